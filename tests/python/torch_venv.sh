#!/bin/sh
# Makes (once) a virtual environment with a current PyTorch and pytorch-lightning 2.x, for the tests
# of the training-time checks on the PyTorch users train on (FSDP2, DTensor, tensor parallelism over
# a DeviceMesh). Debian's python3-torch is 1.13; this environment does not see the system's site
# packages, so its torch is the only one. The wheels carry CUDA's libraries (about 5 GB installed);
# torch imports and trains on the CPU without a GPU. Every package is pinned by
# tests/python/torch2-constraints.txt (the environment's `pip freeze` when it was made).
#
#   tests/python/torch_venv.sh DIR    prints DIR/bin/python once DIR holds a working environment
set -eu
dir=${1:?usage: torch_venv.sh DIR}
python=${SDC_SYSTEM_PYTHON:-/usr/bin/python3}
constraints=$(dirname "$0")/torch2-constraints.txt
if [ -x "$dir/bin/python" ] && [ -f "$dir/.complete" ]; then
  echo "$dir/bin/python"
  exit 0
fi
rm -rf "$dir"
"$python" -m venv "$dir" >&2
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check -c "$constraints" \
  torch pytorch-lightning numpy >&2
"$dir/bin/python" -c "import torch, pytorch_lightning; from torch.distributed.fsdp import fully_shard" >&2
touch "$dir/.complete"
echo "$dir/bin/python"
