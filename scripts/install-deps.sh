#!/usr/bin/env bash
# Installs the Debian packages sdcprobe needs. Idempotent: asks apt only for what is missing, so a
# second run changes nothing.
#   scripts/install-deps.sh          what building, packaging and running need
#   scripts/install-deps.sh --test   that, and the test stack (.ci/run): Slurm, MariaDB, Prometheus,
#                                    node_exporter, OpenMPI, PyTorch, debootstrap, lintian, ...
# Services these packages bring (slurmctld, mariadb, prometheus, ...) are not started: the tests start
# their own daemons. The CUDA toolkit is not installed here: when nvcc is present (e.g. /usr/local/cuda)
# the build adds the CUDA backend, otherwise it builds the CPU backend.
set -euo pipefail

packages=(
  build-essential
  cmake
  ninja-build
  git
  pkg-config
  ccache  # CMake compiles through it when present
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  libcli11-dev
  nlohmann-json3-dev
  libsimdjson-dev
  libsqlite3-dev
  libopenblas-dev
  libboost-math-dev  # Boost.Math (header-only): exact interval inverses
  help2man  # the man pages
  dpkg-dev  # the Debian package (dpkg-shlibdeps)
)

test_packages=(
  sqlite3
  prometheus  # promtool: the tests check the Prometheus textfile with it
  libopenmpi-dev  # --comm mpi (without it the build says what to install)
  openmpi-bin
  python3
  patchelf  # scripts/bundle.sh: relocatable bundles and the GPU lease kit
  python3-torch  # the inline probe's PyTorch example and its test
  # `pip install ./python`, and the deploy tests against real Slurm, munge, node_exporter and NPD's
  # plugin schema (yaml).
  python3-pip
  python3-setuptools
  python3-wheel
  python3-yaml
  python3-venv  # venvs over the system packages: kubernetes-validate and hadolint; pytorch-lightning over the system torch
  slurm-wlm
  munge
  prometheus-node-exporter
  slurmdbd  # Slurm accounting (sacct) for `sdcprobe goodput --sacct`'s real test
  mariadb-server
  debootstrap  # the clean-root package test
  lintian
  clang-14  # the fuzz preset: libFuzzer harnesses (.ci/fuzz.sh)
  libclang-rt-14-dev
  libomp-14-dev
  openjdk-17-jre-headless  # the fleet store's Spark job, run in local mode by its test (PySpark from PyPI)
)

case "${1:-}" in
  "") ;;
  --test) packages+=("${test_packages[@]}") ;;
  *)
    echo "usage: scripts/install-deps.sh [--test]" >&2
    exit 2
    ;;
esac

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
  if [ "${1:-}" = --test ]; then cuda_binary_tools; fi
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
# invoke-rc.d asks policy-rc.d whether to start a service; 101 means no. Only ours is removed after.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  own_policy=1
fi
remove_policy() { if [ -n "$own_policy" ]; then $sudo rm -f "$policy"; fi; }
trap remove_policy EXIT
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ "${1:-}" = --test ]; then cuda_binary_tools; fi
