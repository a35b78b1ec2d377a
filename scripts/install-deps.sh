#!/usr/bin/env bash
# Installs the Debian packages sdcprobe builds and tests with. Idempotent: asks apt only for what
# is missing, so a second run changes nothing. The CUDA toolkit is not installed here: when nvcc is
# present (e.g. /usr/local/cuda) the build adds the CUDA backend, otherwise it builds the CPU backend.
set -euo pipefail

packages=(
  build-essential cmake ninja-build git pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libsimdjson-dev
  libsqlite3-dev sqlite3
  prometheus  # promtool: the tests check the Prometheus textfile with it
  libopenblas-dev
  libopenmpi-dev openmpi-bin
  python3
  patchelf  # scripts/bundle.sh: relocatable bundles and the GPU lease kit
  python3-torch  # the inline probe's PyTorch example and its test
  # The Debian package (help2man: the man page; pip: `pip install ./python`) and the deploy
  # tests against real Slurm, munge, node_exporter and NPD's plugin schema (yaml).
  help2man dpkg-dev python3-pip python3-setuptools python3-wheel python3-yaml
  slurm-wlm munge prometheus-node-exporter
  slurmdbd mariadb-server  # Slurm accounting (sacct) for `sdcprobe goodput --sacct`'s real test
  clang-14 libclang-rt-14-dev libomp-14-dev  # the fuzz preset: libFuzzer harnesses (.ci/fuzz.sh)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The SASS check (scripts/check_sass.sh) reads the kernels with cuobjdump, which needs nvdisasm. A
# toolkit assembled from NVIDIA's Python wheels may have nvcc without them: install both beside it.
cuda_binary_tools() {
  local nvcc bin tmp sudo=""
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] || return 0
  bin=$(dirname "$(readlink -f "$nvcc")")
  if [ -x "$bin/cuobjdump" ] && [ -x "$bin/nvdisasm" ]; then return 0; fi
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install-deps: installing cuobjdump and nvdisasm in $bin"
  tmp=$(mktemp -d)
  python3 -m pip install -q --no-deps --target "$tmp" nvidia-cuda-cuobjdump==13.2.86 nvidia-cuda-nvdisasm==13.2.86
  $sudo install -m 755 "$tmp/nvidia/cu13/bin/cuobjdump" "$tmp/nvidia/cu13/bin/nvdisasm" "$bin/"
  rm -rf "$tmp"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  cuda_binary_tools
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
cuda_binary_tools
