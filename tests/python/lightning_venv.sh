#!/bin/sh
# Makes (once) a virtual environment with pytorch-lightning over the system's torch, for the tests
# that run GoodputCallback under Lightning's real Trainer. Debian ships torch (python3-torch) but not
# Lightning; Lightning's own requirements would pull a second torch, so every package is installed
# with --no-deps at a pinned version, with the system site packages (torch, numpy, yaml) visible.
#
#   tests/python/lightning_venv.sh DIR [2]    prints DIR/bin/python once DIR holds a working environment
#                                             (with 2: pytorch-lightning 2.0, which still runs on torch 1.13)
set -eu
dir=${1:?usage: lightning_venv.sh DIR [2]}
major=${2:-1}
python=${SDC_SYSTEM_PYTHON:-/usr/bin/python3}
if [ -x "$dir/bin/python" ] && [ -f "$dir/.complete" ]; then
  echo "$dir/bin/python"
  exit 0
fi
rm -rf "$dir"
"$python" -m venv --system-site-packages "$dir" >&2
if [ "$major" = 2 ]; then
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    pytorch-lightning==2.0.9 \
    lightning-utilities==0.9.0 \
    torchmetrics==1.1.2 \
    fsspec==2023.9.2 \
    tqdm==4.66.1 \
    packaging==23.1 \
    typing-extensions==4.8.0 >&2
else
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    pytorch-lightning==1.9.5 \
    lightning-utilities==0.8.0 \
    torchmetrics==0.11.4 \
    fsspec==2023.4.0 \
    tqdm==4.65.0 \
    packaging==23.1 >&2
fi
touch "$dir/.complete"
echo "$dir/bin/python"
