#!/usr/bin/env bash
# The package on a clean Debian 12 root, as an operator meets it: builds the CPU-only .deb, makes a
# `debootstrap --variant=minbase bookworm` root, installs the .deb there with apt-get from the
# Debian mirror this machine's apt uses, runs sdcprobe, the gates and `import sdcprobe`, then purges
# it and checks that nothing of it is left. The debootstrap root is cached as a tarball in
# /var/cache/sdcprobe-ci (SDC_ROOT_CACHE) between runs on the same machine. Needs root.
#   tests/deploy/clean_root_test.sh REPO WORKDIR
set -euo pipefail
repo=$(readlink -f "$1")
mkdir -p "$2"
work=$(mktemp -d "$(readlink -f "$2")/clean_root.XXXXXX")
root=$work/root
cache=${SDC_ROOT_CACHE:-/var/cache/sdcprobe-ci}/bookworm-minbase.tar
trap 'rm -rf "$work"' EXIT
[ "$(id -u)" -eq 0 ] || { echo "clean_root_test: needs root (debootstrap, chroot)"; exit 1; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
in_root() { unshare --mount --pid --fork --mount-proc="$root/proc" chroot "$root" env -i \
  PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

# The mirror of this machine's Debian sources (deb822 or one-line form).
mirror=$(sed -n 's|^URIs: *\([^ ]*\).*|\1|p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
[ -n "$mirror" ] || mirror=$(sed -n 's|^deb \+\(http[^ ]*\) \+bookworm .*|\1|p' /etc/apt/sources.list 2>/dev/null | head -n1)
[ -n "$mirror" ] || fail "no Debian mirror in /etc/apt/sources.list{,.d/debian.sources}"

# The package, without CUDA: a clean Debian root has no CUDA libraries to satisfy the CUDA build's
# dependencies (docs/operating.md, "Installing"). Built inside the clone, with the release build's
# flags (-Werror where CI sets SDC_WERROR), so that ccache (keyed on paths relative to
# CCACHE_BASEDIR) gives it the release build's objects: only the CUDA files differ.
build=$repo/build/package-cpu
export CCACHE_BASEDIR=$repo
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSDC_CUDA=OFF -DSDC_BUILD_TESTS=OFF \
  -DSDC_BUILD_BENCH=OFF -DSDC_WERROR="${SDC_WERROR:-OFF}" >"$work/build.log" 2>&1 &&
  cmake --build "$build" >>"$work/build.log" 2>&1 &&
  (cd "$build" && cpack -G DEB -B "$work/deb") >>"$work/build.log" 2>&1 || {
  cat "$work/build.log"
  fail "building the package"
}
deb=$(ls "$work"/deb/sdcprobe_*.deb)

mkdir -p "$root"
if [ -f "$cache" ]; then
  tar -xf "$cache" -C "$root"
else
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/debootstrap.log"
    fail "debootstrap"
  }
  mkdir -p "$(dirname "$cache")"
  tar -cf "$cache.tmp" -C "$root" . && mv "$cache.tmp" "$cache"
fi
echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"  # no services started in the root
chmod 755 "$root/usr/sbin/policy-rc.d"
cp "$deb" "$root/tmp/"
name=$(basename "$deb")

in_root apt-get update -qq >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get update"; }
in_root apt-get install -y -q "./tmp/$name" >"$work/apt.log" 2>&1 || {
  cat "$work/apt.log"
  fail "apt-get install ./$name"
}
grep -E "newly installed|After this operation" "$work/apt.log" | sed 's/^/clean_root_test: /'

version=$(in_root sdcprobe --version) || fail "sdcprobe --version: $version"
[[ $version == "sdcprobe "* ]] || fail "sdcprobe --version: $version"
out=$(cd "$root" && in_root sdcprobe qualify --level quick --backend cpu 2>&1) || fail "qualify: $out"
echo "$out" | tail -n 1
# The installed gates, with the installed binary and /etc/default/sdcprobe: a pass, and an injected
# fault that would drain (dry run: no Slurm in the root).
out=$(in_root env NODE=node1 SCONTROL=true /usr/lib/sdcprobe/healthcheck.sh 2>&1) || fail "healthcheck: $out"
out=$(in_root env NODE=node1 SCONTROL=true SDCPROBE_DRY_RUN=1 SDCPROBE_ARGS="--backend cpu --cpu-devices 2 \
--inject device=1,probe=alu.fma32,model=bitflip,bit=7" /usr/lib/sdcprobe/healthcheck.sh 2>&1)
[[ $out == *"would run: true update NodeName=node1 State=DRAIN Reason=SDC:"* ]] || fail "healthcheck, fault: $out"
in_root env NODE=node1 SCONTROL=true /usr/lib/sdcprobe/prolog.sh >/dev/null 2>&1 || fail "prolog.sh on a pass"
if in_root env NODE=node1 SCONTROL=true SDCPROBE_DRY_RUN=1 SDCPROBE_ARGS="--backend cpu --cpu-devices 2 \
--inject device=1,probe=alu.fma32,model=bitflip,bit=7" /usr/lib/sdcprobe/prolog.sh >/dev/null 2>&1; then
  fail "prolog.sh passed an injected fault"
fi
# The sweep's idle check: no NVIDIA driver and no Slurm in the root, so idle.
out=$(in_root /usr/lib/sdcprobe/idle-check.sh 2>&1) || fail "idle-check.sh: $out"
[[ $out == "idle: no NVIDIA driver"* ]] || fail "idle-check.sh: $out"
out=$(in_root python3 -c 'import sdcprobe; from sdcprobe import _library; print(_library.load().sdc_version().decode())' 2>&1) ||
  fail "import sdcprobe: $out"
[ -n "$out" ] || fail "import sdcprobe: no version"
# State the docs say purge removes: the sweep's history.
in_root sdcprobe sweep --once --budget 20s --level quick --backend cpu --state-dir /var/lib/sdcprobe >/dev/null 2>&1 ||
  fail "sweep --once"
[ -f "$root/var/lib/sdcprobe/history.db" ] || fail "the sweep wrote no /var/lib/sdcprobe/history.db"

in_root apt-get purge -y -q sdcprobe >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get purge sdcprobe"; }
for path in /usr/bin/sdcprobe /usr/lib/sdcprobe /etc/default/sdcprobe /var/lib/sdcprobe /usr/share/doc/sdcprobe \
  /usr/lib/python3/dist-packages/sdcprobe /usr/share/man/man1/sdcprobe.1.gz; do
  [ ! -e "$root$path" ] || fail "purge left $path"
done
echo "clean_root_test: passed"
