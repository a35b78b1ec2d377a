#!/usr/bin/env bash
# The GPU lease kit: one prepared run that exercises every CUDA, cuBLASLt and NCCL path of sdcprobe
# on a lent GPU machine, which has the CUDA driver, the toolkit and PyTorch but none of our Debian
# libraries and no network (docs/cuda.md, "GPU lease").
#
#   bench/gpu_kit.sh build   here: builds the GPU programs for sm_90 and packs .gpu-kit/ (< 48 MiB)
#   bench/gpu_kit.sh run     there: runs the steps below, each in its own time box, in 360 s
#
# run writes summary.json, summary.md and logs.tar.gz to $OUT (a scratch folder when unset) and
# prints a one-screen table last. Exit status: 0 every step passed, 1 a check failed, 2 something
# could not run or ran out of time. Settings (environment): KIT_BUILD_DIR (build/kit), KIT_CUDA_ARCHITECTURES (90),
# KIT_JOBS (2) for build; SDC_KIT (.gpu-kit), KIT_BUDGET_S (360), KIT_WITHOUT_GPU, KIT_STEPS (the
# steps to run, e.g. "sanitizer bench" for a second try; the others are "not run") for run.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The libraries the lent machine provides (toolkit or Python wheels), never carried: cuBLAS(Lt) and
# NCCL are hundreds of MiB. libcuda comes with the driver.
cuda_libs=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2)
kit_max_bytes=$((48 << 20))
# Skipped gpu tests that state one of these reasons are not failures: the lent machine has one GPU,
# and a sandbox (gVisor) may list no PCI GPU in its /sys.
export KIT_SKIP_REASONS='needs (two|2) GPUs|more than one GPU|sysfs shows no PCI GPU'
# compute-sanitizer checks only the kernels whose mangled names have this substring: every kernel of
# sdcprobe lives in namespace sdc (the build checks it), cuBLASLt's and torch's do not.
export KIT_SANITIZER_FILTER='kns=_ZN3sdc'

die() {
  echo "gpu_kit: error: $*" >&2
  exit 2
}

# ---------------------------------------------------------------------------------------------- build

kit_build() {
  set -e
  cd "$repo"
  local build=${KIT_BUILD_DIR:-build/kit} archs=${KIT_CUDA_ARCHITECTURES:-90} t0=$SECONDS
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] || die "nvcc not found: the kit needs the CUDA toolkit to build"
  local launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  mkdir -p "$build"
  echo "gpu_kit: configure $build (Release, sm_$archs, MPI off)"
  # MPI is optional; the lent machine has no OpenMPI, so the kit is built without it.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSDC_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_CUDA_ARCHITECTURES="$archs" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DSDC_BUILD_TESTS=ON \
    -DSDC_BUILD_BENCH=ON "${launcher[@]}" >"$build/kit-configure.log" 2>&1 ||
    { tail -n 30 "$build/kit-configure.log"; die "configure failed (log: $build/kit-configure.log)"; }
  echo "gpu_kit: build"
  cmake --build "$build" -j "${KIT_JOBS:-2}" --target sdcprobe sdcprobe_inline gpu_test_programs gpu_bench \
    gpu_gemm_bench gpu_kit_selftest gpu_kit_racecheck_repro >"$build/kit-build.log" 2>&1 ||
    { grep -E 'error|Error' "$build/kit-build.log" | head -n 30; die "build failed (log: $build/kit-build.log)"; }
  local built=$((SECONDS - t0))

  local tests=() t
  while read -r t; do [ -n "$t" ] && tests+=("$t"); done <"$build/gpu_test_programs.txt"
  [ ${#tests[@]} -gt 0 ] || die "no gpu test programs listed in $build/gpu_test_programs.txt"
  local files=("$build/cli/sdcprobe" "$build/scheduler/inline/libsdcprobe.so" "${tests[@]}"
    "$build/bench/gpu_bench" "$build/bench/gpu_gemm_bench" "$build/bench/gpu_kit_selftest"
    "$build/bench/gpu_kit_racecheck_repro")

  local stage
  stage="$(cd "$build" && pwd)/kit-stage"
  rm -rf "$stage"
  local leave
  leave=$(printf '%s,' "${cuda_libs[@]%%.so*}")
  scripts/bundle.sh --leave "${leave%,}" "$stage/kit" "${files[@]}"
  mkdir -p "$stage/kit/python"
  cp -r python/sdcprobe python/examples "$stage/kit/python/"
  mkdir -p "$stage/kit/python/tests"
  cp python/tests/replica_digest_test.py "$stage/kit/python/tests/"
  find "$stage/kit/python" -name __pycache__ -prune -exec rm -rf {} +
  cp bench/gpu_kit.sh bench/gpu_kit_report.py "$stage/kit/"
  for t in "${tests[@]}"; do basename "$t"; done >"$stage/kit/gpu_tests.txt"
  {
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
    echo "cuda architectures: $archs"
    echo "nvcc: $("$nvcc" --version | tail -n 1)"
    echo "gpu tests: $(tr '\n' ' ' <"$stage/kit/gpu_tests.txt")"
  } >"$stage/kit/MANIFEST"

  check_kit "$stage/kit"
  local cuobjdump
  cuobjdump=$(find_cuobjdump "$nvcc") ||
    die "cuobjdump not found (beside $nvcc, on PATH, in ${KIT_TOOLKIT_DIRS}, in Python's nvidia-* or triton packages): the kernels' names cannot be checked; install the toolkit's cuobjdump or 'pip install nvidia-cuda-cuobjdump'"
  check_kernel_names "$cuobjdump" "${files[@]}"

  echo "gpu_kit: pack .gpu-kit"
  rm -rf .gpu-kit
  mkdir -p .gpu-kit
  # Debian's OpenBLAS alone is 36 MB; xz brings the whole kit to a fraction of the carry limit.
  tar -C "$stage" -cf - kit | xz -T "${KIT_JOBS:-2}" -6 >.gpu-kit/kit.tar.xz
  cp "$stage/kit/MANIFEST" .gpu-kit/MANIFEST
  local size
  size=$(du -sb .gpu-kit | cut -f1)
  printf 'gpu_kit: .gpu-kit is %.1f MiB (limit 48 MiB, unpacked %s); built in %ds, packed in %ds\n' \
    "$(echo "$size / 1048576" | bc -l)" "$(du -sh "$stage/kit" | cut -f1)" "$built" $((SECONDS - t0 - built))
  [ "$size" -le "$kit_max_bytes" ] || die "the kit is over 48 MiB"
  echo "gpu_kit: run it with the device tool: command 'bash bench/gpu_kit.sh run', carry [\".gpu-kit\"], timeout_s 450"
}

# The toolkit folders searched for cuobjdump after the one beside nvcc and PATH.
export KIT_TOOLKIT_DIRS=${KIT_TOOLKIT_DIRS:-"${CUDA_HOME:-/usr/local/cuda} $(echo /usr/local/cuda-* /opt/nvidia/*)"}

# cuobjdump, which lists the kernels' names: a toolkit may hold the compiler without it. Beside
# nvcc, then on PATH, then in the toolkit folders (bin/ or anywhere two levels down), then in
# Python's packages (the nvidia-cuda-cuobjdump wheel, Triton's copy). Prints its path; 1 if none.
find_cuobjdump() {
  local c d sp
  for c in "$(dirname "$1")/cuobjdump" "$(command -v cuobjdump 2>/dev/null)"; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  for d in $KIT_TOOLKIT_DIRS; do
    [ -d "$d" ] || continue
    c=$(find "$d" -maxdepth 3 -type f -name cuobjdump -perm -u+x 2>/dev/null | head -n 1)
    [ -n "$c" ] && { echo "$c"; return 0; }
  done
  while read -r sp; do
    for d in "$sp/nvidia" "$sp/triton"; do
      [ -d "$d" ] || continue
      c=$(find "$d" -maxdepth 5 -type f -name cuobjdump -perm -u+x 2>/dev/null | head -n 1)
      [ -n "$c" ] && { echo "$c"; return 0; }
    done
  done < <(python3 -c 'import site, sys; print("\n".join(sys.path + site.getsitepackages()))' 2>/dev/null)
  return 1
}

# The sanitizer step instruments only kernels whose mangled names match KIT_SANITIZER_FILTER
# (namespace sdc): a kernel of ours outside it would go unchecked, so the build refuses it. A
# cuobjdump that lists no kernel at all (one too old for this toolkit's fat binaries) fails too.
check_kernel_names() {
  local cuobjdump=$1 f names outside listed=0
  shift
  for f in "$@"; do
    # A program without device code (sdc_digest_gpu_tests calls the library's) makes cuobjdump exit
    # non-zero: it lists nothing, which is right for it.
    names=$({ "$cuobjdump" -symbols "$f" 2>/dev/null || true; } | awk '/STO_ENTRY/ { print $NF }' | sort -u)
    [ -z "$names" ] || listed=$((listed + $(wc -l <<<"$names")))
    outside=$(grep -v "^${KIT_SANITIZER_FILTER#kns=}" <<<"$names" || true)
    [ -z "$outside" ] || die "$(basename "$f") has kernels outside namespace sdc, which the sanitizer's filter skips: $outside"
  done
  [ "$listed" -gt 0 ] || die "$cuobjdump lists no kernel in the kit's programs: it cannot read this toolkit's binaries"
  echo "gpu_kit: every kernel in the kit ($listed, listed by $cuobjdump) is in namespace sdc (the sanitizer's filter $KIT_SANITIZER_FILTER)"
}

# Only the lent machine's CUDA libraries may stay unresolved: `env -i ldd` with the loader's cache
# ignored (this machine's cache knows /usr/local/cuda), so every library outside the default system
# folders must come from the kit, and Debian libraries there must not be used from there.
check_kit() {
  local kit=$1 bad=0 f lib arrow path rest allowed_re
  local runtime_re='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so'
  allowed_re="^($(printf '%s|' "${cuda_libs[@]%%.so*}")libcuda)\\.so"
  declare -A left=()
  for f in "$kit"/bin/* "$kit"/lib/*; do
    [ -L "$f" ] && continue
    while read -r lib arrow path rest; do
      [ "$arrow" = "=>" ] || continue
      [[ $lib =~ $runtime_re ]] && continue
      if [ "$path" = not ] && [[ $lib =~ $allowed_re ]]; then
        left[$lib]=1
      elif [ "$path" = not ] || [[ $path != "$kit"/* ]]; then
        echo "gpu_kit: $(basename "$f") needs $lib from outside the kit ($path $rest)" >&2
        bad=1
      fi
    done < <(env -i LD_TRACE_LOADED_OBJECTS=1 LD_WARN=yes /lib64/ld-linux-x86-64.so.2 --inhibit-cache "$f")
  done
  [ "$bad" -eq 0 ] || die "ldd check failed"
  echo "gpu_kit: ldd check passed: only ${!left[*]} unresolved (the lent machine has them)"
}

# ------------------------------------------------------------------------------------------------ run

# Each step is a function run under `timeout` in its own bash (hence exported): it prints its log,
# lines starting "kit: " are its notes, and it returns 0 passed, 1 failed, 2 could not run, 3 out of
# time (a command ran past its box: nothing found, but not everything tested either).

# A time box for one command inside a step, never past the step's own (KIT_STEP_DEADLINE, epoch
# seconds). --foreground keeps it in the step's process group, so the step's own `timeout` still
# ends everything the step started. Exit 124 when out of time.
step_within() {
  local want=$1 left
  shift
  left=$((KIT_STEP_DEADLINE - $(date +%s) - 1))
  [ "$left" -lt "$want" ] && want=$left
  if [ "$want" -lt 3 ]; then
    echo "kit: no time left in the step's box for ${1##*/}"
    return 124
  fi
  timeout --foreground -k 5 "$want" "$@"
}

# A step's verdict on one command: WHAT RC [WANT]. A time-out is "out of time", any other exit but
# WANT (0) a failure; step_result returns what the step found.
check_exit() {
  local what=$1 rc=$2 want=${3:-0}
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "kit: out of time: $what"
    STEP_TIMED_OUT=1
  elif [ "$rc" -ne "$want" ]; then
    echo "kit: $what: exit $rc, not $want"
    STEP_FAILED=1
  fi
  [ "$rc" -eq "$want" ]
}
step_result() {
  if [ -n "${STEP_FAILED:-}" ]; then return 1; fi
  if [ -n "${STEP_TIMED_OUT:-}" ]; then return 3; fi
  return 0
}

# NVIDIA display and 3D controllers in sysfs (under SDCPROBE_SYSFS_ROOT when set, as sdcprobe reads it).
count_bus_gpus() {
  local d n=0
  for d in "${SDCPROBE_SYSFS_ROOT:-}"/sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] && [[ $(cat "$d/class" 2>/dev/null) == 0x03* ]] && n=$((n + 1))
  done
  echo $n
}

# What sdcprobe must find comes from nvidia-smi -L (KIT_GPUS, set at setup): a container on a larger
# host shows its GPUs to CUDA and to nvidia-smi, while sysfs may list the host's (or, under gVisor,
# none). The UUID of the first working GPU is kept whatever the exit, so that a failed GPU beside it
# does not leave every later step without a device.
step_devices() {
  local rc
  nvidia-smi -q >"$LOGS/nvidia-smi-q.txt" 2>&1 || { echo "kit: nvidia-smi -q failed"; return 2; }
  grep -E '^\s*(Product Name|Product Architecture|GPU UUID|Driver Version|CUDA Version|VBIOS Version|Bus Id|Persistence Mode|Compute Mode|MIG Mode|Current|Pending|Total|Free|SM|Memory|Graphics|Power Draw|Current Limit|GPU Current Temp|Volatile|Aggregate|Retired Pages|Remapped Rows|Correctable Error|Uncorrectable Error)\s*:' \
    "$LOGS/nvidia-smi-q.txt" | head -n 60
  "$SDC" --backend cuda ${KIT_GPUS:+--expect-gpus "$KIT_GPUS"} devices --json >"$WORK/devices.json"
  rc=$?
  cat "$WORK/devices.json"
  python3 - "$WORK/devices.json" "$WORK/uuid" "$(count_bus_gpus)" "${KIT_GPUS:-?}" <<'PY' || STEP_FAILED=1
import json, sys
try:
    devices = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print("kit: sdcprobe devices wrote no device list: %s" % e)
    sys.exit(1)
if not isinstance(devices, list):
    print("kit: sdcprobe devices: %s" % devices)
    sys.exit(1)
cuda = [d for d in devices if d.get("backend") == "cuda"]
working = [d for d in cuda if not d.get("open_error")]
print("kit: GPUs on the bus (sysfs) %s, in nvidia-smi -L %s, opened by CUDA %d of %d listed"
      % (sys.argv[3], sys.argv[4], len(working), len(cuda)))
for d in cuda:
    if d.get("open_error"):
        print("kit: %s: %s" % (d.get("pci_bus_id"), d["open_error"]))
if not working:
    print("kit: sdcprobe opens no CUDA device")
    sys.exit(1)
d = working[0]
open(sys.argv[2], "w").write(d["uuid"])
print("kit: testing %s %s, sm %s, %.0f GiB" % (d["name"], d["uuid"], d["compute_capability"], d["memory_bytes"] / 2**30))
PY
  check_exit "sdcprobe devices" $rc
  # The GPUs' own counters through NVML: a binding that misreads the driver shows here as exit 2,
  # a misjudged counter as exit 1.
  echo "--- sdcprobe health --watch 2"
  step_within 8 "$SDC" health --watch 2 --json "$LOGS/health.json"
  check_exit "sdcprobe health" $?
  step_result
}

step_gpu_tests() {
  local t name
  [ -s "$KIT/gpu_tests.txt" ] || { echo "kit: the kit lists no gpu test programs"; return 2; }
  while read -r name; do
    t="$KIT/bin/$name"
    echo "--- $name"
    step_within 60 "$t" --gtest_output="json:$LOGS/gtest-$name.json" >"$LOGS/gtest-$name.log" 2>&1
    check_exit "$name" $? || true
  done <"$KIT/gpu_tests.txt"
  # The report judges each test from its JSON (a failed program is judged there too); the GEMM
  # bound's headroom (max |r|/tau per type) comes from the GEMM tests' output.
  python3 "$KIT_REPORT" gtest "$LOGS" $(cat "$KIT/gpu_tests.txt") || STEP_FAILED=1
  step_result
}

# qualify always runs each device in a watched worker process (isolation); `run` is the same
# catalogue in-process. The injected fault first: it is the check that matters most. The two runs
# after the plain qualify repeat its probes for another path (consensus, in-process), so their memory
# probes take a small buffer (--size) and the box's seconds go to the runs at the level's sizes.
# The lent GPU is the kit's alone: --allocated, as the machine may run it in a container that NVML
# cannot see beyond (docs/operating.md, "Busy GPUs"); a GPU NVML shows in use is still refused.
step_qualify() {
  local uuid rc sdc=("$SDC" --backend cuda ${KIT_GPUS:+--expect-gpus "$KIT_GPUS"})
  uuid=$(cat "$WORK/uuid" 2>/dev/null) || { echo "kit: no GPU UUID from step devices"; return 2; }
  echo "--- qualify --inject (must exit 1 and name $uuid)"
  step_within 20 "${sdc[@]}" qualify --allocated --level quick --json "$LOGS/qualify-inject.json" \
    --inject 'probe=alu.fma32,model=bitflip,bit=7,mode=permanent' >"$WORK/inject.out" 2>&1
  rc=$?
  cat "$WORK/inject.out"
  if check_exit "qualify with an injected fault" $rc 1; then
    grep -q "$uuid" "$WORK/inject.out" || { echo "kit: injected fault: the output does not name $uuid"; STEP_FAILED=1; }
  fi
  echo "--- qualify (isolated workers)"
  step_within 20 "${sdc[@]}" qualify --allocated --level quick --json "$LOGS/qualify.json"
  check_exit "qualify" $?
  echo "--- qualify --consensus"
  step_within 12 "${sdc[@]}" qualify --allocated --level quick --consensus --size 1G --json "$LOGS/qualify-consensus.json"
  check_exit "qualify --consensus" $?
  echo "--- run '*' in-process"
  step_within 16 "${sdc[@]}" run --allocated --level quick --size 1G --json "$LOGS/run-inprocess.json" '*'
  check_exit "run in-process" $?
  [ -n "${STEP_FAILED:-}${STEP_TIMED_OUT:-}" ] ||
    echo "kit: the injected fault exits 1 naming $uuid; qualify, --consensus, run passed"
  step_result
}

# > 2^32 words: 64-bit indexing and the random pattern's key change at 32 GiB, and a fault planted
# at word 5e9 must be found there.
step_memory() {
  local free_mib
  [ -s "$WORK/uuid" ] || { echo "kit: no GPU UUID from step devices"; return 2; }
  free_mib=$(nvidia-smi -i 0 --query-gpu=memory.free --format=csv,noheader,nounits | head -n 1 | tr -d ' ')
  if [ "${free_mib:-0}" -lt $((42 * 1024)) ]; then
    echo "kit: only ${free_mib:-?} MiB free on GPU 0, 42 GiB needed"
    return 2
  fi
  step_within 60 "$SDC" --backend cuda ${KIT_GPUS:+--expect-gpus "$KIT_GPUS"} run --device 0 --size 40G --iterations 1 \
    --json "$LOGS/memory-40g-inject.json" --inject 'probe=mem.own_address,model=bitflip,index=5000000000' \
    mem.own_address
  check_exit "40 GiB run with a fault at word 5e9" $? 1
  step_within 60 "$SDC" --backend cuda ${KIT_GPUS:+--expect-gpus "$KIT_GPUS"} run --device 0 --size 40G --iterations 1 \
    --json "$LOGS/memory-40g.json" \
    mem.own_address mem.moving_inversions
  check_exit "40 GiB run" $?
  [ -z "${STEP_TIMED_OUT:-}" ] || { step_result; return; }
  python3 - "$LOGS/memory-40g.json" "$LOGS/memory-40g-inject.json" <<'PY' || STEP_FAILED=1
import json, sys
ok = True
try:
    clean = json.load(open(sys.argv[1]))
    for r in clean["results"]:
        size = r["params"].get("bytes", 0)
        print("kit: %s %s over %.1f GiB" % (r["probe"], r["outcome"], size / 2**30))
        ok &= r["outcome"] == "pass" and size >= 40 * 2**30
    fault = json.load(open(sys.argv[2]))["results"][0]
    indices = sorted({rec["index"] for rec in fault.get("records", [])})
    print("kit: fault planted at word 5000000000 found at %s" % indices)
    ok &= 5000000000 in indices
except (OSError, KeyError, IndexError, ValueError) as e:
    print("kit: cannot read the memory reports: %s" % e)
    ok = False
sys.exit(0 if ok else 1)
PY
  step_result
}

# compute-sanitizer's own words when it cannot work on this machine (gVisor: "Device not supported",
# then error 999 at the first allocation), as opposed to a finding in the program it runs.
export KIT_SANITIZER_REFUSED='Device not supported|not supported on this (platform|device|system)|error 999|cudaErrorUnknown|CUDA_ERROR_UNKNOWN|Unable to (find|load|attach|launch)|Target application terminated before first instrumented API call'

# One sanitizer run: TOOL NAME PROGRAM [ARGS...] into sanitizer-NAME.log. Returns 0 clean, 1 the tool
# reported errors or a test failed, 2 the tool could not run or the tests did not, 3 out of time.
sanitize() {
  local tool=$1 name=$2 log=$LOGS/sanitizer-$2.log rc
  shift 2
  echo "--- $name"
  step_within 60 "$SANITIZER" --tool "$tool" --kernel-name "$KIT_SANITIZER_FILTER" --error-exitcode 1 --print-limit 20 \
    "$@" >"$log" 2>&1
  rc=$?
  tail -n 12 "$log"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "kit: out of time: $name"
    return 3
  elif grep -Eq "$KIT_SANITIZER_REFUSED" "$log"; then
    echo "kit: compute-sanitizer cannot run here ($name): $(grep -Em1 "$KIT_SANITIZER_REFUSED" "$log" | cut -c1-120)"
    return 2
  elif [ $rc -ne 0 ]; then
    echo "kit: $name: exit $rc ($(grep -Em1 'ERROR SUMMARY|FAILED' "$log" | cut -c1-80))"
    return 1
  elif grep -q '\[  SKIPPED \]' "$log"; then
    echo "kit: $name: tests skipped under the sanitizer"
    return 2
  fi
  echo "kit: $name clean"
}

# Self-test first: when the tool cannot run a trivial kernel, nothing after it would mean anything.
# memcheck on every kernel family; racecheck where shared memory is used (the SIMT GEMM's double
# buffer, block_sum in the GEMM checks); synccheck on the warp-synchronous code (the mismatch
# records' __ballot_sync(__activemask()) / __shfl_sync, the digest's and block_sum's shuffles).
# racecheck first runs gpu_kit_racecheck_repro (cuBLASLt's small GEMMs and one block sum): where the
# tool fails there with an internal error, the same error on the GEMM tests is the tool's, and that
# run could not be judged; anywhere else it is a failure.
step_sanitizer() {
  local rc found="" cannot="" timed="" p
  SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
    /usr/local/cuda/compute-sanitizer/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -n 1)
  [ -n "$SANITIZER" ] || { echo "kit: compute-sanitizer not found"; return 2; }
  for p in gpu_kit_selftest gpu_kit_racecheck_repro cuda_device_test sdc_gemm_gpu_tests; do
    [ -x "$KIT/bin/$p" ] || { echo "kit: the kit has no $p"; return 2; }
  done
  sanitize memcheck memcheck-selftest "$KIT/bin/gpu_kit_selftest"
  rc=$?
  if [ $rc -ne 0 ]; then
    [ $rc -eq 3 ] && return 3
    echo "kit: the sanitizer's self-test (one trivial kernel) did not pass: compute-sanitizer cannot run here"
    return 2
  fi
  local patterns='CudaDeviceTest.FillWritesWhatTheCpuWrites:CudaDeviceTest.MarchElementsPassCleanInBothDirections'
  local records='CudaDeviceTest.VerifyReportsEachWrongWordWithItsPlace'
  local others='CudaDeviceTest.ChainsMatchHostGoldensForEveryKind:CudaDeviceTest.DigestEqualsTheCpuDigestAndTheHostSum'
  others+=':CudaDeviceTest.MemoryFaultModelsAreDetectedWhereInjected'
  local gemm='CudaGemmEngine.SimtEdgeShapesMatchTheCpu:CudaGemmEngine.SmallShapesPassCleanAndLocateAFlip'
  local runs=(
    "memcheck device $KIT/bin/cuda_device_test --gtest_filter=$patterns:$records:$others"
    "memcheck gemm $KIT/bin/sdc_gemm_gpu_tests --gtest_filter=$gemm"
    "racecheck cublaslt $KIT/bin/gpu_kit_racecheck_repro"
    "racecheck gemm $KIT/bin/sdc_gemm_gpu_tests --gtest_filter=$gemm"
    "synccheck device $KIT/bin/cuda_device_test --gtest_filter=$records:CudaDeviceTest.DigestEqualsTheCpuDigestAndTheHostSum"
    "synccheck gemm $KIT/bin/sdc_gemm_gpu_tests --gtest_filter=$gemm"
  )
  local run tool name internal='Internal Sanitizer Error'
  for run in "${runs[@]}"; do
    read -r tool name p <<<"$run"
    # shellcheck disable=SC2086  # the program and its filter, split on purpose
    sanitize "$tool" "$tool-$name" $p
    rc=$?
    if [ $rc -eq 1 ] && [ "$tool" = racecheck ] && grep -q "$internal" "$LOGS/sanitizer-$tool-$name.log" &&
      grep -q "$internal" "$LOGS/sanitizer-racecheck-cublaslt.log"; then
      echo "kit: $tool-$name: the tool's own failure ($internal), as on cuBLASLt's GEMMs alone (racecheck-cublaslt)"
      rc=2
    fi
    case $rc in
      0) ;;
      1) found+=" $tool-$name" ;;
      2) cannot+=" $tool-$name" ;;
      *) timed+=" $tool-$name" ;;
    esac
  done
  [ -z "$found" ] || { echo "kit: errors reported by$found (sanitizer-*.log)"; return 1; }
  [ -z "$cannot" ] || { echo "kit: could not run$cannot"; return 2; }
  [ -z "$timed" ] || { echo "kit: out of time in$timed"; return 3; }
  echo "kit: memcheck, racecheck and synccheck clean (${#runs[@]} runs)"
}

# The image's own PyTorch, which loads its CUDA libraries from its wheels: LD_LIBRARY_PATH holds
# only those folders, so that libsdcprobe.so shares torch's libraries and never the toolkit's.
step_inline() {
  local py="env LD_LIBRARY_PATH=$WHEEL_DIRS SDCPROBE_LIBRARY=$KIT/lib/libsdcprobe.so.1 PYTHONUNBUFFERED=1 python3"
  $py -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 2)' ||
    { echo "kit: torch sees no CUDA device"; return 2; }
  echo "--- clean"
  step_within 90 $py "$KIT/python/examples/train_cuda.py" --steps 300 --every 25 \
    --events "$LOGS/inline-clean.jsonl" --json "$LOGS/inline-clean.json"
  check_exit "inline clean run" $?
  echo "--- injected fault"
  step_within 90 $py "$KIT/python/examples/train_cuda.py" --steps 300 --every 25 \
    --inject 'probe=alu.*,model=bitflip,mode=permanent,after=4' \
    --events "$LOGS/inline-fault.jsonl" --json "$LOGS/inline-fault.json"
  check_exit "inline fault run (0: the fault was caught)" $?
  echo "--- replica check digests: a CUDA tensor's digest equals the CPU digest of the same tensor"
  (cd "$KIT/python/tests" && step_within 30 $py -m unittest -v replica_digest_test)
  check_exit "replica digest tests" $?
  echo "--- goodput"
  step_within 30 "$SDC" goodput "$LOGS/inline-fault.jsonl" --json >"$LOGS/goodput-fault.json"
  check_exit "sdcprobe goodput" $? || { step_result; return; }
  python3 - "$LOGS/goodput-fault.json" <<'PY' || STEP_FAILED=1
import json, sys
try:
    g = json.load(open(sys.argv[1]))
    sdc = g["sdc_lost_ns"] / 1e9
    rework = g["categories"]["rework"]["sdc_ns"] / 1e9
except (OSError, KeyError, ValueError) as e:
    print("kit: cannot read the goodput report: %s" % e)
    sys.exit(1)
print("kit: goodput attributes %.3f s to SDC (%.3f s of rework)" % (sdc, rework))
sys.exit(0 if sdc > 0 else 1)
PY
  step_result
}

# The canary step (python/examples/canary_cuda.py): DDP ranks on the GPU over gloo, a clean run and
# one with a corrupted matrix product on rank 1, which the canary must name while the replica check
# cannot see it. "could not run" when torch sees no GPU.
step_canary() {
  local rc py="env LD_LIBRARY_PATH=$WHEEL_DIRS SDCPROBE_LIBRARY=$KIT/lib/libsdcprobe.so.1 PYTHONUNBUFFERED=1 python3"
  step_within 36 $py "$KIT/python/examples/canary_cuda.py" --json "$LOGS/canary.json" >"$LOGS/canary.out" 2>&1
  rc=$?
  tail -n 20 "$LOGS/canary.out"
  [ $rc -eq 2 ] && { echo "kit: torch sees no CUDA device"; return 2; }
  check_exit "canary run" $rc
  python3 - "$LOGS/canary.json" <<'PY' || true
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(0)
for what, ok in s["checks"].items():
    print("kit: canary: %s: %s" % (what, "yes" if ok else "NO"))
print("kit: canary step at %.2f of a training step" % s["clean"]["canary_over_step"])
PY
  step_result
}

# A Lightning run (the image has Lightning 2.6) with GoodputCallback: recorder, inline probe with
# an injected fault, and the ledger over the merged per-rank files. "could not run" without Lightning.
step_lightning() {
  [ -s "$WORK/uuid" ] || { echo "kit: no GPU UUID from step devices"; return 2; }
  local rc py="env LD_LIBRARY_PATH=$WHEEL_DIRS SDCPROBE_LIBRARY=$KIT/lib/libsdcprobe.so.1 PYTHONUNBUFFERED=1 python3"
  step_within 23 $py "$KIT/python/examples/train_lightning.py" --sdcprobe "$SDC" --out "$LOGS/lightning" \
    --ckpt-dir "$WORK/lightning-ckpt" --steps 200 --inject 'probe=alu.*,model=bitflip,mode=permanent,after=4' \
    >"$LOGS/lightning.json"
  rc=$?
  tail -n 1 "$LOGS/lightning.json"
  [ $rc -eq 2 ] && return 2
  check_exit "Lightning run" $rc
  step_result
}

# Two DDP ranks under Lightning, one per GPU: each rank's inline probe must run on a GPU of its own
# (made before Lightning set the rank's device, every rank's took GPU 0). It needs two GPUs: with
# fewer it is "not applicable", which leaves the kit's exit status alone.
step_lightning_ranks() {
  [ -s "$WORK/uuid" ] || { echo "kit: no GPU UUID from step devices"; return 2; }
  [ "${KIT_GPUS:-0}" -ge 2 ] || { echo "kit: ${KIT_GPUS:-0} GPU lent; two DDP ranks on GPUs of their own need two"; return 4; }
  local rc py="env LD_LIBRARY_PATH=$WHEEL_DIRS SDCPROBE_LIBRARY=$KIT/lib/libsdcprobe.so.1 PYTHONUNBUFFERED=1 python3"
  step_within 28 $py "$KIT/python/examples/train_lightning.py" --sdcprobe "$SDC" --out "$LOGS/lightning-ranks" \
    --ckpt-dir "$WORK/lightning-ranks-ckpt" --steps 100 --devices 2 >"$LOGS/lightning-ranks.json"
  rc=$?
  grep '^kit: ' "$LOGS/lightning-ranks.json"
  [ $rc -eq 2 ] && return 2
  check_exit "Lightning on two GPUs" $rc
  step_result
}

step_coverage() {
  local rc
  [ -s "$WORK/uuid" ] || { echo "kit: no GPU UUID from step devices"; return 2; }
  step_within 10 "$SDC" --backend cuda ${KIT_GPUS:+--expect-gpus "$KIT_GPUS"} coverage --probes 'alu.fma32,alu.int64,mem.own_address' \
    --models bitflip,lane --trials 5 --clean 1 --json "$LOGS/coverage.json" --markdown "$LOGS/coverage.md"
  rc=$?
  cat "$LOGS/coverage.md" 2>/dev/null
  check_exit coverage $rc && echo "kit: coverage campaign done (tables in coverage.md)"
  step_result
}

# gpu_gemm_bench also reports the GEMM checks' figures at n = 8192 for every random type: the tile,
# max |r|/tau (the bound's headroom), the smallest single-element change every check catches (per
# rms of C) and the check's time against the GEMM's, both timed by CUDA events on the stream; the
# report prints them one line per type, and per type the checked rate against the bare GEMM's for a
# new input set and for repeats (BM_GemmCheckAtSpeed). Then a short gemm.burn.bf16: its checked
# TFLOP/s, whether it reached load (reached_load) and the clock and power maxima under load it was
# judged by (summary.json's "burn"), and the temperature it ran at. Each type's check at speed runs on
# both paths (fast, and thin: SDCPROBE_GEMM_CHECK=thin) and plants a fault in a batch's middle repeat,
# and the burn one in its middle GEMM: the step fails unless each is named (issue 51's goals, one call).
step_bench() {
  local b rc
  export KIT_BURN_PLANTED=2000
  for b in gpu_bench gpu_gemm_bench; do
    [ -x "$KIT/bin/$b" ] || { echo "kit: the kit has no $b"; return 2; }
  done
  for b in gpu_bench gpu_gemm_bench; do
    echo "--- $b"
    step_within 90 "$KIT/bin/$b" --benchmark_format=json --benchmark_out="$LOGS/$b.json" \
      --benchmark_out_format=json >"$LOGS/$b.log" 2>&1
    rc=$?
    tail -n 5 "$LOGS/$b.log"
    check_exit "$b" $rc
  done
  # The burn on the fast path (the default stays thin until this is measured), with 16 elements' signs
  # flipped in one GEMM near its middle (about 4,200 GEMMs in 10 s on the thin path's H200): it must
  # fail (exit 1) naming that GEMM alone; its rates are the burn's.
  echo "--- gemm.burn.bf16, 10 s, a fault planted in GEMM $KIT_BURN_PLANTED"
  SDCPROBE_GEMM_CHECK=fast step_within 15 "$SDC" --backend cuda ${KIT_GPUS:+--expect-gpus "$KIT_GPUS"} run --allocated --burn 10 \
    --inject "probe=gemm.burn.bf16,model=bitflip,bit=31,count=16,mode=transient,after=$KIT_BURN_PLANTED" \
    --json "$LOGS/burn.json" gemm.burn.bf16 >"$LOGS/burn.log" 2>&1
  rc=$?
  tail -n 3 "$LOGS/burn.log"
  check_exit "gemm.burn.bf16 with its planted fault" $rc 1
  python3 "$KIT_REPORT" bench "$LOGS" || STEP_FAILED=1
  step_result
}

# Finds each CUDA library in the toolkit, then the Python wheels (nvidia-*), then the loader's
# cache; prints where, and sets LIB_DIRS (and WHEEL_DIRS: every wheel's library folder). Returns 1
# naming what is missing.
locate_cuda_libs() {
  local dirs=() d lib found missing=() sp
  for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && dirs+=("$d")
  done
  while read -r sp; do
    [ -d "$sp/nvidia" ] || continue
    while read -r d; do
      dirs+=("$d")
      WHEEL_DIRS+="${WHEEL_DIRS:+:}$d"
    done < <(find "$sp/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u)
  done < <(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
  LIB_DIRS=""
  for lib in "${cuda_libs[@]}"; do
    found=""
    for d in "${dirs[@]}"; do
      if [ -e "$d/$lib" ]; then found=$d; break; fi
    done
    if [ -z "$found" ]; then
      found=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l { print $NF; exit }')
      found=${found%/*}
    fi
    if [ -z "$found" ]; then
      missing+=("$lib")
      continue
    fi
    echo "gpu_kit: $lib from $found$([[ $found == */nvidia/* ]] && echo ' (Python wheel)')"
    [[ ":$LIB_DIRS:" == *":$found:"* ]] || LIB_DIRS+="${LIB_DIRS:+:}$found"
  done
  [ ${#missing[@]} -eq 0 ] || { echo "gpu_kit: not found: ${missing[*]}"; return 1; }
}

# Unpacks the kit: ARCHIVE DEST. Minimal images may lack the xz program; their python3 has lzma.
unpack_kit() {
  if command -v xz >/dev/null; then
    timeout 30 tar -C "$2" -xJf "$1"
    return
  fi
  echo "gpu_kit: no xz here: unpacking with Python's tarfile"
  timeout 60 python3 - "$1" "$2" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as kit:
    # The "data" filter (where this Python has it) refuses paths and links that leave DEST.
    if hasattr(tarfile, "data_filter"):
        kit.extractall(sys.argv[2], filter="data")
    else:
        kit.extractall(sys.argv[2])
PY
}

kit_run() {
  cd "$repo"
  export OUT=${OUT:-$(mktemp -d /tmp/sdc-kit-out.XXXXXX)}
  mkdir -p "$OUT"
  export WORK LOGS KIT SDC WHEEL_DIRS="" KIT_REPORT=$repo/bench/gpu_kit_report.py
  WORK=$(mktemp -d /tmp/sdc-kit.XXXXXX)
  LOGS=$WORK/logs
  KIT=$WORK/kit
  SDC=$KIT/bin/sdcprobe
  mkdir -p "$LOGS"
  local budget=${KIT_BUDGET_S:-360} start=$SECONDS cannot="" kit_src=${SDC_KIT:-$repo/.gpu-kit}
  # By value: what the lease is for first, so that a run cut short loses the least. The boxes and
  # the setup's (unpacking, at most 30 s with xz, and torch's first import) sum to the budget. Sized
  # from the first lease's times on an H200 (docs/gpu-results.md, 2026-12-04): devices 1 s,
  # gpu_tests 8, qualify 21 (four runs of 2-7 s), bench 5, memory 2, sanitizer 8 (cut short by a
  # failure), coverage 0; the torch steps cold: inline 48, canary 36, Lightning 14, of which each
  # import of torch took 6.5 s cold and 4 s warm. The torch steps get about 1.4x their cold time,
  # the others 2-5x theirs; bench adds its 10 s burn and the check at speed's benchmarks to that.
  # The second lease (same day) took inline 55 s and then over 62, canary 30-35 s, gpu_tests 9-12 s.
  # lightning_ranks runs only where two GPUs are lent (about the Lightning step's time, and a second
  # rank's import of torch); its 30 s came from the boxes with the most room (devices 10 to 5,
  # gpu_tests 30 to 22, qualify 45 to 35, canary 45 to 38).
  local steps=(devices gpu_tests qualify bench memory sanitizer inline canary lightning coverage lightning_ranks)
  local -A box=([devices]=5 [gpu_tests]=22 [qualify]=35 [bench]=35 [memory]=15 [sanitizer]=40 [inline]=75
    [canary]=38 [lightning]=25 [coverage]=10 [lightning_ranks]=30)
  printf 'step\tstatus\tseconds\tbox\tnote\n' >"$WORK/steps.tsv"
  record() {
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5//$'\t'/ }" >>"$WORK/steps.tsv"
    printf '== %-10s %-14s %4ss of %4ss  %s\n' "$1" "$2" "$3" "$4" "$5"
  }

  # Setup: unpack the kit, find the CUDA libraries, load the kit's binary, see a GPU.
  local t0=$SECONDS note
  {
    echo "gpu_kit: run on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ), OUT=$OUT"
    if [ ! -f "$kit_src/kit.tar.xz" ]; then
      cannot="no kit at $kit_src (bench/gpu_kit.sh build, then carry .gpu-kit)"
    elif ! unpack_kit "$kit_src/kit.tar.xz" "$WORK"; then
      cannot="cannot unpack $kit_src/kit.tar.xz"
    else
      cat "$KIT/MANIFEST"
      if ! locate_cuda_libs; then
        cannot="CUDA libraries not found"
      else
        export LD_LIBRARY_PATH="$LIB_DIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        [ -d /usr/local/nvidia/lib64 ] && LD_LIBRARY_PATH+=":/usr/local/nvidia/lib64"
        "$SDC" --version || cannot="the kit's sdcprobe does not load"
        # torch's first import reads a few GiB of wheels (6.5 s cold, 4 s warm): once here, so
        # that the inline, canary and Lightning steps start warm; within what is left of setup's 30 s.
        local took left=$((30 - (SECONDS - t0)))
        [ "$left" -ge 1 ] || left=1
        if took=$(timeout "$left" env LD_LIBRARY_PATH="$WHEEL_DIRS" python3 -c \
          'import time; t = time.monotonic(); import torch; print("%.1f" % (time.monotonic() - t))' 2>/dev/null); then
          echo "gpu_kit: torch imported in ${took}s (warm for the torch steps)"
        else
          echo "gpu_kit: torch does not import here (the torch steps will say so)"
        fi
      fi
    fi
    # KIT_WITHOUT_GPU=1 runs the steps anyway, to try the kit's own plumbing on a machine with no GPU.
    if [ -z "$cannot" ] && ! timeout 20 nvidia-smi -L >"$WORK/gpus.txt" && [ -z "${KIT_WITHOUT_GPU:-}" ]; then
      cannot="no GPU here (nvidia-smi -L failed)"
    fi
    cat "$WORK/gpus.txt" 2>/dev/null
    # The GPUs (not MIG instances) this container shows: what sdcprobe must find (--expect-gpus).
    KIT_GPUS=$(grep -c '^GPU ' "$WORK/gpus.txt" 2>/dev/null)
    [ "${KIT_GPUS:-0}" -gt 0 ] || KIT_GPUS=""
    export KIT_GPUS
  } >"$LOGS/setup.log" 2>&1
  cat "$LOGS/setup.log"
  note=${cannot:-$(grep -c ' from ' "$LOGS/setup.log") CUDA libraries found; $(grep -c '^GPU ' "$LOGS/setup.log") GPU(s)}
  record setup "$([ -z "$cannot" ] && echo passed || echo 'could not run')" $((SECONDS - t0)) 30 "$note"

  export -f $(compgen -A function step_) check_exit sanitize count_bus_gpus
  local name limit rc status
  for name in "${steps[@]}"; do
    if [ -n "${KIT_STEPS:-}" ] && [[ " ${KIT_STEPS//,/ } " != *" $name "* ]]; then
      record "$name" "not run" 0 "${box[$name]}" "not in KIT_STEPS"
      continue
    fi
    if [ -n "$cannot" ]; then
      record "$name" "could not run" 0 "${box[$name]}" "$cannot"
      continue
    fi
    limit=$((budget - (SECONDS - start)))
    [ "$limit" -le "${box[$name]}" ] || limit=${box[$name]}
    if [ "$limit" -lt 5 ]; then
      record "$name" "out of time" 0 "${box[$name]}" "not started: the budget of ${budget}s is spent"
      continue
    fi
    t0=$SECONDS
    KIT_STEP_DEADLINE=$(($(date +%s) + limit)) timeout -k 5 "$limit" bash -c "step_$name" >"$LOGS/$name.log" 2>&1
    rc=$?
    note=$(grep '^kit: ' "$LOGS/$name.log" | tail -n 2 | sed 's/^kit: //' | paste -sd ';' -)
    case $rc in
      0) status=passed ;;
      2) status="could not run" ;;
      3) status="out of time" ;;
      4) status="not applicable" ;;
      124 | 137) status="out of time" note="stopped at its box of ${limit}s; $note" ;;
      *) status=failed ;;
    esac
    record "$name" "$status" $((SECONDS - t0)) "${box[$name]}" "$note"
  done

  # A failure outweighs anything untested; "out of time" is untested, not failed.
  local exit_code=0
  if cut -f2 "$WORK/steps.tsv" | grep -qx failed; then
    exit_code=1
  elif cut -f2 "$WORK/steps.tsv" | grep -Eqx 'could not run|out of time|not run'; then
    exit_code=2
  fi
  tar -C "$WORK" -czf "$OUT/logs.tar.gz" logs steps.tsv $( [ -f "$KIT/MANIFEST" ] && echo kit/MANIFEST)
  if command -v python3 >/dev/null &&
    python3 "$KIT_REPORT" summary "$WORK" "$OUT" "$exit_code" $((SECONDS - start)); then
    :
  else
    # No Python: the steps alone, still as JSON.
    {
      printf '{"exit_code": %d, "seconds": %d, "steps": [' "$exit_code" $((SECONDS - start))
      tail -n +2 "$WORK/steps.tsv" | awk -F'\t' '{gsub(/["\\]/, "", $5); printf "%s{\"step\": \"%s\", \"status\": \"%s\", \"seconds\": %s, \"box\": %s, \"note\": \"%s\"}", (NR > 1 ? ", " : ""), $1, $2, $3, $4, $5}'
      printf ']}\n'
    } >"$OUT/summary.json"
    column -t -s $'\t' "$WORK/steps.tsv"
  fi
  rm -rf "$WORK"
  return $exit_code
}

case ${1:-} in
  build) kit_build ;;
  run) kit_run ;;
  find-cuobjdump) find_cuobjdump "${2:-nvcc}" || die "cuobjdump not found" ;;  # for tests/bundle/gpu_kit_test.sh
  check-kernel-names) (set -e && check_kernel_names "${@:2}") ;;                # likewise, under the build's set -e
  *)
    echo "usage: bench/gpu_kit.sh build|run|find-cuobjdump NVCC|check-kernel-names CUOBJDUMP PROGRAM..." >&2
    exit 2
    ;;
esac
