#!/usr/bin/env bash
# Mends two things CPack 3.25 does in a .deb it made:
# - Installed-Size counts a symlink as its target's size (libsdcprobe.so and .so.1 count the library
#   twice more): set it the way dpkg-gencontrol counts, each file's size in KiB rounded up and 1 KiB
#   for every other entry (directory, symlink);
# - a library in /usr/lib gets a postinst that only calls ldconfig: the package's ldconfig trigger
#   does that, so it goes.
#   cmake/deb_fixup.sh DEB
set -euo pipefail
deb=$(readlink -f "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -R "$deb" "$work/pkg"
size=$(cd "$work/pkg" && find . -path ./DEBIAN -prune -o ! -path . -printf '%y %s\n' |
  awk '{ s += ($1 == "f") ? int(($2 + 1023) / 1024) : 1 } END { print s + 0 }')
if [ -f "$work/pkg/DEBIAN/postinst" ] &&
  [ "$(grep -v -e '^#!/bin/sh$' -e '^set -e$' -e '^$' -e '^fi$' -e '^\s*ldconfig$' -e '^if \[ "$1" = "configure" \]; then$' \
    "$work/pkg/DEBIAN/postinst")" = "" ]; then
  rm "$work/pkg/DEBIAN/postinst"
fi
sed -i "s/^Installed-Size: .*/Installed-Size: $size/" "$work/pkg/DEBIAN/control"
dpkg-deb --root-owner-group -b "$work/pkg" "$work/out.deb" >/dev/null
mv "$work/out.deb" "$deb"
