#!/usr/bin/env bash
# scripts/bundle.sh makes a relocatable bundle: the program's RUNPATH is $ORIGIN/../lib, every
# library beyond the C runtime comes from the bundle (the loader's cache ignored), the bundle runs
# after being moved, --leave keeps named libraries out, the system's own libraries are never
# patched, and bad input is a clear error with exit 2.
#   tests/bundle/bundle_test.sh SDCPROBE REPO WORKDIR
set -euo pipefail
sdcprobe=$1 repo=$2
mkdir -p "$3"
work=$(mktemp -d "$(cd "$3" && pwd)/bundle_test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
bundle=$repo/scripts/bundle.sh
runtime_re='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so'
loader=$(readelf -l "$sdcprobe" | sed -n 's/.*interpreter: \(.*\)]/\1/p')

# Bad input.
rc=0
out=$("$bundle" "$work/x" "$work/no-such-file" 2>&1) || rc=$?
[ "$rc" -eq 2 ] && [[ $out == *"bundle: error: $work/no-such-file: no such file"* ]] || fail "missing file: rc $rc: $out"
rc=0
"$bundle" "$work/x" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "no FILE: rc $rc"

# Each system library stays as it was: the bundle patches copies only.
# (patchelf rewrites the dynamic section, which readelf prints).
dynamic() { for f in $(ldd "$sdcprobe" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do readelf -d "$f"; done; }
before=$(dynamic)
"$bundle" "$work/a/sdcprobe" "$sdcprobe"
[ "$(dynamic)" = "$before" ] || fail "a system library was patched in place"
dest=$work/a/sdcprobe
runpath=$(readelf -d "$dest/bin/sdcprobe" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[ "$runpath" = '$ORIGIN/../lib' ] || fail "bin/sdcprobe RUNPATH is '$runpath'"
[ -n "$(ls "$dest/lib")" ] || fail "no library bundled"

# Without the loader's cache, so that nothing is found through this machine's configuration.
trace() { env -i LD_TRACE_LOADED_OBJECTS=1 LD_WARN=yes "$loader" --inhibit-cache "$1"; }
for f in "$dest/bin/sdcprobe" "$dest"/lib/*; do
  while read -r lib arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $lib =~ $runtime_re ]] && continue
    [[ $path == "$dest"/* ]] || fail "$(basename "$f") loads $lib from '$path', not from the bundle"
  done < <(trace "$f")
done

# Relocated, with an empty environment.
mv "$dest" "$work/moved"
json=$(env -i "$work/moved/bin/sdcprobe" --backend cpu devices --json) || fail "the moved bundle does not run"
[[ $json == *'"backend": "cpu"'* ]] || fail "devices --json: $json"

# --leave keeps a library out.
"$bundle" --leave libsqlite3 "$work/b" "$sdcprobe" >/dev/null
[ ! -e "$work/b/lib/libsqlite3.so.0" ] || fail "--leave libsqlite3 bundled it anyway"
echo "bundle_test: passed"
