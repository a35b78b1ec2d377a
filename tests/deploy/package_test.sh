#!/usr/bin/env bash
# The Debian package as an administrator meets it: builds the .deb with CPack (dependencies from
# dpkg-shlibdeps), checks it with lintian, installs it, checks the installed layout, runs `sdcprobe
# qualify --level quick` from /usr/bin, runs the installed gate and Python package, then purges it,
# whatever happens. A CUDA build depends on NVIDIA's CUDA packages; where the toolkit came from
# elsewhere (no such packages installed), dpkg is told to ignore dependencies, and every other
# dependency is checked to be installed. tests/deploy/clean_root_test.sh installs the CPU package
# with apt-get on a clean root.
# Needs root (sudo) and dpkg; changes the system only between install and purge. Usage: package_test.sh BUILD_DIR
set -euo pipefail
build="$(readlink -f "$1")"
if [ "$(id -u)" -ne 0 ]; then
  exec sudo "$0" "$@"  # dpkg -i and --purge
fi
if dpkg-query -W -f='${Status}' sdcprobe 2>/dev/null | grep -q "install ok installed"; then
  echo "package_test: an sdcprobe package is already installed here; not touching it"
  exit 1
fi
work="$(mktemp -d)"
cleanup() {
  dpkg --purge sdcprobe >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
check() {  # NAME COMMAND...
  local name="$1"
  shift
  if "$@" >"$work/out" 2>&1; then
    echo "ok: $name"
  else
    echo "FAIL: $name"
    sed 's/^/  /' "$work/out"
    failures=$((failures + 1))
  fi
}

(cd "$build" && cpack -G DEB -B "$work/deb" >"$work/cpack.log" 2>&1) || {
  cat "$work/cpack.log"
  exit 1
}
deb="$(ls "$work"/deb/sdcprobe_*.deb)"
echo "package: $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB"
depends="$(dpkg-deb -f "$deb" Depends)"
echo "Depends: $depends"
check "dpkg-shlibdeps filled Depends" grep -q "libsqlite3-0" <<<"$depends"
check "/etc/default/sdcprobe is a conffile" grep -qx /etc/default/sdcprobe < <(dpkg-deb -I "$deb" conffiles)
check "an ldconfig trigger" grep -qx "activate-noawait ldconfig" < <(dpkg-deb -I "$deb" triggers)
check "a description beyond the synopsis" test "$(dpkg-deb -f "$deb" Description | wc -l)" -gt 3
if command -v lintian >/dev/null; then
  lintian "$deb" >"$work/lintian.log" 2>&1 || true
  check "lintian: no errors" test "$(grep -c '^E: ' "$work/lintian.log")" -eq 0
  grep '^[EW]: ' "$work/lintian.log" | sed 's/^/  lintian: /' || true
else
  echo "skipped: lintian (not installed; scripts/install-deps.sh --test installs it)"
fi
# Installed-Size as dpkg counts it (files rounded up to KiB, 1 KiB for every other entry).
dpkg-deb -x "$deb" "$work/data"
size=$(cd "$work/data" && find . ! -path . -printf '%y %s\n' | awk '{ s += ($1 == "f") ? int(($2 + 1023) / 1024) : 1 } END { print s }')
check "Installed-Size $(dpkg-deb -f "$deb" Installed-Size) KiB is the files' $size KiB" \
  test "$(dpkg-deb -f "$deb" Installed-Size)" -eq "$size"
for elf in "$work/data/usr/bin/sdcprobe" "$work"/data/usr/lib/*/libsdcprobe.so.1.*; do
  check "no RUNPATH in $(basename "$elf")" test -z "$(readelf -d "$elf" | grep -E 'RUNPATH|RPATH')"
  check "stripped: $(basename "$elf")" test -z "$(readelf -S "$elf" | grep -F .symtab)"
done

force=()
if grep -q "cuda-cudart-" <<<"$depends" && ! dpkg-query -W "cuda-cudart-*" >/dev/null 2>&1; then
  echo "the CUDA toolkit here is not NVIDIA's packages: installing without dependency checks"
  force=(--force-depends)
  for dep in $(tr ',' '\n' <<<"$depends" | sed 's/(.*)//; s/ //g' | grep -v -e '^cuda-cudart-' -e '^libcublas-' -e '^libnccl2$'); do
    check "dependency installed: $dep" dpkg-query -W "$dep"
  done
fi
dpkg -i "${force[@]}" "$deb" >"$work/dpkg.log" 2>&1 || {
  cat "$work/dpkg.log"
  exit 1
}
triplet="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
for f in /usr/bin/sdcprobe /usr/lib/sdcprobe/healthcheck.sh /usr/lib/sdcprobe/prolog.sh \
  /usr/lib/sdcprobe/idle-check.sh; do
  check "installed, executable: $f" test -x "$f"
done
for f in /usr/lib/sdcprobe/sdcprobe-gate.sh /usr/lib/sdcprobe/sdcprobe.nhc /etc/default/sdcprobe \
  /usr/include/sdcprobe/sdcprobe.h "/usr/lib/$triplet/libsdcprobe.so.1.0.0" /usr/share/man/man1/sdcprobe.1.gz \
  /usr/lib/systemd/system/sdcprobe-sweep.service /usr/lib/systemd/system/sdcprobe-sweep.timer \
  /usr/share/doc/sdcprobe/README.md /usr/share/doc/sdcprobe/examples/kubernetes/sdcprobe.yaml \
  /usr/lib/python3/dist-packages/sdcprobe/inline.py; do
  check "installed: $f" test -f "$f"
done
check "state directory /var/lib/sdcprobe" test -d /var/lib/sdcprobe
check "SONAME libsdcprobe.so.1" grep -q 'Library soname: \[libsdcprobe.so.1\]' \
  < <(readelf -d "/usr/lib/$triplet/libsdcprobe.so.1.0.0")
# Every file the units' Documentation= names is installed.
for doc in $(sed -n 's/^Documentation=//p' /usr/lib/systemd/system/sdcprobe-sweep.service | tr ' ' '\n' |
  sed -n 's|^file://||p'); do
  check "the unit's documentation: $doc" test -f "$doc"
done
check "man sdcprobe" grep -q "qualify" < <(zcat /usr/share/man/man1/sdcprobe.1.gz)
# A page per subcommand, from its own --help (roff escapes the dashes).
check "man sdcprobe-qualify" grep -qF -- '\-\-level' < <(zcat /usr/share/man/man1/sdcprobe-qualify.1.gz)
check "man sdcprobe-golden-record" grep -qF -- '\-\-out' < <(zcat /usr/share/man/man1/sdcprobe-golden-record.1.gz)
for f in /usr/share/doc/sdcprobe/copyright /usr/share/doc/sdcprobe/changelog.gz; do
  check "installed: $f" test -f "$f"
done

# From /usr/bin, outside the source and build trees, with no library path of the build.
cd /
check "sdcprobe qualify --level quick from /usr/bin" env -u LD_LIBRARY_PATH /usr/bin/sdcprobe qualify --level quick
# The installed gate finds the installed binary by default and reads /etc/default/sdcprobe.
check "installed healthcheck, dry run of a fault" grep -q "would run: true update NodeName=node1 State=DRAIN Reason=SDC:" \
  < <(NODE=node1 SCONTROL=true SDCPROBE_DRY_RUN=1 SDCPROBE_ARGS="--backend cpu --cpu-devices 2 \
--inject device=1,probe=alu.fma32,model=bitflip,bit=7" /usr/lib/sdcprobe/healthcheck.sh 2>/dev/null)
# The Python package finds the installed libsdcprobe.so.1 through the system path.
check "python3: import sdcprobe, load libsdcprobe.so.1" env -u SDCPROBE_LIBRARY -u PYTHONPATH /usr/bin/python3 -c \
  'from sdcprobe import _library; import sys; v = _library.load().sdc_version().decode(); print(v); sys.exit(v == "")'

# The sweep's state, which purge removes.
check "sweep --once writes /var/lib/sdcprobe/history.db" env -u LD_LIBRARY_PATH /usr/bin/sdcprobe sweep --once \
  --budget 20s --level quick --backend cpu --state-dir /var/lib/sdcprobe
check "history.db is there" test -f /var/lib/sdcprobe/history.db

dpkg --purge sdcprobe >"$work/dpkg.log" 2>&1 || cat "$work/dpkg.log"
check "purged: no /usr/bin/sdcprobe" test ! -e /usr/bin/sdcprobe
check "purged: no /etc/default/sdcprobe" test ! -e /etc/default/sdcprobe
check "purged: no /usr/lib/sdcprobe" test ! -e /usr/lib/sdcprobe
check "purged: no /var/lib/sdcprobe" test ! -e /var/lib/sdcprobe
check "purged: no Python package" test ! -e /usr/lib/python3/dist-packages/sdcprobe

if [ "$failures" -ne 0 ]; then
  echo "$failures package check(s) failed"
  exit 1
fi
echo "all package checks passed"
