#!/usr/bin/env bash
# `pip install ./python` works, and the installed package finds libsdcprobe.so.1 through the system
# path (here LD_LIBRARY_PATH, as ld.so.cache does for /usr/lib/<triplet>), away from any build tree.
# Offline: setuptools comes from the system (--no-build-isolation). Usage: pip_install_test.sh SOURCE_DIR LIB_DIR
set -euo pipefail
source_dir="$1"
lib_dir="$2"
python="${PYTHON:-/usr/bin/python3}"  # Debian's, with python3-pip, -setuptools and -wheel
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$source_dir/python" "$work/src"  # setuptools writes build files beside the sources
"$python" -m pip install --quiet --no-build-isolation --no-deps --target "$work/site" "$work/src"
test -f "$work/site/sdcprobe/inline.py"
ls -d "$work"/site/sdcprobe-*.dist-info >/dev/null
cd "$work"
# Not found without the system path: the package does not reach into a build tree.
if env -u SDCPROBE_LIBRARY PYTHONPATH="$work/site" LD_LIBRARY_PATH= "$python" -c \
  'from sdcprobe import _library; _library.load()' 2>/dev/null && ! ldconfig -p | grep -q libsdcprobe.so.1; then
  echo "FAIL: loaded a library without one on the system path"
  exit 1
fi
version="$(env -u SDCPROBE_LIBRARY PYTHONPATH="$work/site" LD_LIBRARY_PATH="$lib_dir" "$python" -c \
  'from sdcprobe import _library; print(_library.load().sdc_version().decode())')"
echo "pip-installed sdcprobe loaded libsdcprobe.so.1, version $version"
test -n "$version"
