#!/usr/bin/env bash
# Makes a relocatable bundle: copies programs and shared libraries into DEST/bin and DEST/lib,
# with every shared library they load beyond the C runtime (glibc, libstdc++, libgcc) and the GPU
# driver (libcuda), and points their RPATH at DEST/lib relative to $ORIGIN. The bundle then runs
# from any path, e.g. /opt/sdcprobe mounted into a slim container (docs/operating.md) or the GPU
# lease kit (bench/gpu_kit.sh).
#
#   scripts/bundle.sh [--leave NAME,...] DEST FILE...
#
# FILE: programs go to DEST/bin; shared libraries (lib*.so*) to DEST/lib under their SONAME.
# --leave: library names (prefixes, e.g. libcudart,libcublas,libnccl) left for the target machine
#          to provide; ldd must resolve everything else here.
# Libraries the bundle does not patch are hard-linked when the file system allows (the CUDA
# libraries are large), else copied. Needs ldd, readelf and patchelf.
set -euo pipefail

usage() {
  echo "usage: scripts/bundle.sh [--leave NAME,...] DEST FILE..." >&2
  exit 2
}

leave=""
if [ "${1:-}" = "--leave" ]; then
  [ $# -ge 2 ] || usage
  leave=$2
  shift 2
fi
[ $# -ge 2 ] || usage
dest=$1
shift
for tool in ldd readelf patchelf; do
  command -v "$tool" >/dev/null || { echo "bundle: error: $tool not found (scripts/install-deps.sh --test installs it)" >&2; exit 2; }
done

# The C runtime and the driver: every Linux host or container image has its own, and libcuda must
# match the host's kernel module.
system_re='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda)\.so'
leave_re='^$'
if [ -n "$leave" ]; then
  leave_re="^(${leave//,/|})\\.so"
fi

mkdir -p "$dest/bin" "$dest/lib"

# Copies $1 to $2: a hard link when the file will not be patched and the file system allows.
place() {
  local src dst=$2 patch=$3
  src=$(readlink -f "$1")
  rm -f "$dst"
  if [ "$patch" = no ] && ln "$src" "$dst" 2>/dev/null; then
    return
  fi
  cp -L "$src" "$dst"
  chmod u+w "$dst"
}

# True when a library needs a RUNPATH to find its bundled neighbours: it loads something that is
# neither the C runtime nor already found through its own $ORIGIN.
needs_patch() {
  local dynamic needed
  dynamic=$(readelf -d "$1")
  [[ $dynamic == *'PATH)'*'[$ORIGIN]'* ]] && return 1
  for needed in $(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dynamic"); do
    [[ $needed =~ $system_re ]] || return 0
  done
  return 1
}

declare -A bundled=()
unresolved=()
for file in "$@"; do
  [ -f "$file" ] || { echo "bundle: error: $file: no such file" >&2; exit 2; }
  name=$(basename "$file")
  if [[ $name == lib*.so* ]]; then
    soname=$(readelf -d "$file" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    target="$dest/lib/${soname:-$name}"
    place "$file" "$target" yes
    patchelf --set-rpath '$ORIGIN' "$target"
    [ "$name" = "${soname:-$name}" ] || ln -sf "$soname" "$dest/lib/$name"
  else
    target="$dest/bin/$name"
    place "$file" "$target" yes
    patchelf --set-rpath '$ORIGIN/../lib' "$target"
  fi
  # ldd lists the whole closure, as the build's RUNPATH resolves it.
  while read -r lib arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $lib =~ $system_re ]] && continue
    if [[ $lib =~ $leave_re ]]; then continue; fi
    if [ "$path" = "not" ]; then
      unresolved+=("$lib (needed by $name)")
      continue
    fi
    [ -n "${bundled[$lib]:-}" ] && continue
    bundled[$lib]=$path
    if needs_patch "$path"; then
      place "$path" "$dest/lib/$lib" yes
      patchelf --set-rpath '$ORIGIN' "$dest/lib/$lib"
    else
      place "$path" "$dest/lib/$lib" no
    fi
  done < <(ldd "$file")
done

if [ ${#unresolved[@]} -gt 0 ]; then
  printf 'bundle: error: not found here: %s\n' "${unresolved[@]}" >&2
  exit 2
fi
echo "bundle: $# file(s) and ${#bundled[@]} librar$([ ${#bundled[@]} -eq 1 ] && echo y || echo ies) in $dest ($(du -shL "$dest" | cut -f1))"
