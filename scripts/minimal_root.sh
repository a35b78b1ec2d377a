#!/usr/bin/env bash
# Makes ROOT a minimal root file system for chroot: the dynamic loader, glibc, libstdc++ and libgcc
# that FILE... load here, at the same paths, and nothing else (no shell, no ld.so.cache, no GPU
# libraries). A bundle (scripts/bundle.sh) placed inside must run there, which proves that it needs
# nothing beyond the C runtime; `ld.so --list` there shows what it would still want.
#
#   scripts/minimal_root.sh ROOT FILE...
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: scripts/minimal_root.sh ROOT FILE..." >&2; exit 2; }
root=$1
shift

runtime_re='^(ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so'
mkdir -p "$root/tmp" "$root/proc" "$root/dev"
chmod 1777 "$root/tmp"
for file in "$@"; do
  while read -r first second third _; do
    # "libc.so.6 => /lib/.../libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
    if [ "$second" = "=>" ]; then
      name=$first path=$third
    else
      name=$(basename "$first") path=$first
    fi
    [[ $name =~ $runtime_re ]] || continue
    [ -e "$path" ] || continue
    mkdir -p "$root$(dirname "$path")"
    cp -L "$path" "$root$path"
  done < <(ldd "$file")
done
