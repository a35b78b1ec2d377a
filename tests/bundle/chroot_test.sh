#!/usr/bin/env bash
# The /opt/sdcprobe bundle (scripts/bundle.sh) runs in a root file system that holds only the C
# runtime (loader, glibc, libstdc++, libgcc; scripts/minimal_root.sh), as in a slim container:
# `sdcprobe devices` lists the CPU. Exit 77 (skipped) where this machine cannot chroot or unshare.
#   tests/bundle/chroot_test.sh SDCPROBE REPO WORKDIR
set -euo pipefail
sdcprobe=$1 repo=$2
mkdir -p "$3"
work=$(mktemp -d "$(cd "$3" && pwd)/chroot_test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
root=$work/root
runtime_re='^(ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so'
loader=$(readelf -l "$sdcprobe" | sed -n 's/.*interpreter: \(.*\)]/\1/p')

"$repo/scripts/minimal_root.sh" "$root" "$sdcprobe"
"$repo/scripts/bundle.sh" "$root/opt/sdcprobe" "$sdcprobe"
while read -r f; do
  [[ $(basename "$f") =~ $runtime_re ]] || fail "the minimal root holds $f"
done < <(cd "$root" && find . -type f ! -path './opt/sdcprobe/*')
[ -e "$root$loader" ] || fail "no loader $loader in the root"

# A private mount namespace with /proc (the loader reads /proc/self/exe for $ORIGIN); a user
# namespace where we are not root.
ns=(unshare --mount --pid --fork --mount-proc="$root/proc")
[ "$(id -u)" -eq 0 ] || ns=(unshare --map-root-user --mount --pid --fork --mount-proc="$root/proc")
if ! "${ns[@]}" chroot "$root" "$loader" --version >/dev/null 2>&1; then
  echo "chroot_test: skipped: cannot chroot here (${ns[*]} chroot failed)"
  exit 77
fi

text=$("${ns[@]}" chroot "$root" /opt/sdcprobe/bin/sdcprobe devices 2>&1) || fail "sdcprobe devices: $text"
[[ $text == *cpu0* ]] || fail "sdcprobe devices lists no CPU: $text"
json=$("${ns[@]}" chroot "$root" /opt/sdcprobe/bin/sdcprobe --backend cpu devices --json 2>&1) ||
  fail "sdcprobe --backend cpu devices --json: $json"
[[ $json == *'"backend": "cpu"'* ]] || fail "devices --json: $json"
echo "$text"
echo "chroot_test: passed"
