#!/usr/bin/env bash
# The GPU lease kit: one prepared run that exercises every CUDA, cuBLASLt and NCCL path of sdcprobe
# on a lent GPU machine, which has the CUDA driver, the toolkit and PyTorch but none of our Debian
# libraries and no network (docs/cuda.md, "GPU lease").
#
#   bench/gpu_kit.sh build   here: builds the GPU programs for sm_90 and packs .gpu-kit/ (< 48 MiB)
#   bench/gpu_kit.sh run     there: runs the steps below, each in its own time box, in 6 minutes
#
# run writes summary.json, summary.md and logs.tar.gz to $OUT (a scratch folder when unset) and
# prints a one-screen table last. Exit status: 0 every step passed, 1 a check failed, 2 something
# could not run. Settings (environment): KIT_BUILD_DIR (build/kit), KIT_CUDA_ARCHITECTURES (90),
# KIT_JOBS (2) for build; SDC_KIT (.gpu-kit), KIT_BUDGET_S (330), KIT_WITHOUT_GPU for run.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The libraries the lent machine provides (toolkit or Python wheels), never carried: cuBLAS(Lt) and
# NCCL are hundreds of MiB. libcuda comes with the driver.
cuda_libs=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2)
kit_max_bytes=$((48 << 20))
# Skipped gpu tests that state one of these reasons are not failures: the lent machine has one GPU,
# and cuBLASLt has no E5M2 x E5M2 GEMM.
export KIT_SKIP_REASONS='needs (two|2) GPUs|more than one GPU|e5m2'

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
    gpu_gemm_bench >"$build/kit-build.log" 2>&1 ||
    { grep -E 'error|Error' "$build/kit-build.log" | head -n 30; die "build failed (log: $build/kit-build.log)"; }
  local built=$((SECONDS - t0))

  local tests=() t
  while read -r t; do [ -n "$t" ] && tests+=("$t"); done <"$build/gpu_test_programs.txt"
  [ ${#tests[@]} -gt 0 ] || die "no gpu test programs listed in $build/gpu_test_programs.txt"
  local files=("$build/cli/sdcprobe" "$build/scheduler/inline/libsdcprobe.so" "${tests[@]}"
    "$build/bench/gpu_bench" "$build/bench/gpu_gemm_bench")

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
  echo "gpu_kit: run it with the device tool: command 'bash bench/gpu_kit.sh run', carry [\".gpu-kit\"], timeout_s 420"
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
# lines starting "kit: " are its notes, and it returns 0 passed, 1 failed, 2 could not run.

# A time box for one command inside a step. --foreground keeps it in the step's process group, so
# the step's own `timeout` still ends everything the step started.
step_within() { timeout --foreground -k 5 "$@"; }

step_devices() {
  nvidia-smi -q >"$LOGS/nvidia-smi-q.txt" 2>&1 || { echo "kit: nvidia-smi -q failed"; return 2; }
  grep -E '^\s*(Product Name|Product Architecture|GPU UUID|Driver Version|CUDA Version|VBIOS Version|Bus Id|Persistence Mode|Compute Mode|MIG Mode|Current|Pending|Total|Free|SM|Memory|Graphics|Power Draw|Current Limit|GPU Current Temp|Volatile|Aggregate|Retired Pages|Remapped Rows|Correctable Error|Uncorrectable Error)\s*:' \
    "$LOGS/nvidia-smi-q.txt" | head -n 60
  "$SDC" --backend cuda devices --json >"$WORK/devices.json" || { echo "kit: sdcprobe devices failed"; return 1; }
  cat "$WORK/devices.json"
  python3 - "$WORK/devices.json" "$WORK/uuid" <<'PY'
import json, sys
devices = json.load(open(sys.argv[1]))
cuda = [d for d in devices if d["backend"] == "cuda"]
if not cuda:
    print("kit: sdcprobe lists no CUDA device")
    sys.exit(1)
open(sys.argv[2], "w").write(cuda[0]["uuid"])
print("kit: %d CUDA device(s): %s %s, sm %s, %.0f GiB" % (len(cuda), cuda[0]["name"], cuda[0]["uuid"],
      cuda[0]["compute_capability"], cuda[0]["memory_bytes"] / 2**30))
PY
}

step_gpu_tests() {
  local t name rc=0
  while read -r name; do
    t="$KIT/bin/$name"
    echo "--- $name"
    step_within 100 "$t" --gtest_output="json:$LOGS/gtest-$name.json" >"$LOGS/gtest-$name.log" 2>&1
    echo "exit $?"
  done <"$KIT/gpu_tests.txt"
  python3 "$KIT_REPORT" gtest "$LOGS" $(cat "$KIT/gpu_tests.txt") || rc=$?
  return $rc
}

# qualify always runs each device in a watched worker process (isolation); `run` is the same
# catalogue in-process.
step_qualify() {
  local uuid rc fail=0
  uuid=$(cat "$WORK/uuid" 2>/dev/null) || { echo "kit: no GPU UUID from step devices"; return 2; }
  echo "--- run '*' in-process"
  step_within 90 "$SDC" --backend cuda run --level quick --json "$LOGS/run-inprocess.json" '*'
  rc=$?
  [ $rc -eq 0 ] || { echo "kit: run in-process exit $rc"; fail=1; }
  echo "--- qualify (isolated workers)"
  step_within 90 "$SDC" --backend cuda qualify --level quick --json "$LOGS/qualify.json"
  rc=$?
  [ $rc -eq 0 ] || { echo "kit: qualify exit $rc"; fail=1; }
  echo "--- qualify --consensus"
  step_within 90 "$SDC" --backend cuda qualify --level quick --consensus --json "$LOGS/qualify-consensus.json"
  rc=$?
  [ $rc -eq 0 ] || { echo "kit: qualify --consensus exit $rc"; fail=1; }
  echo "--- qualify --inject (must exit 1 and name $uuid)"
  step_within 90 "$SDC" --backend cuda qualify --level quick --json "$LOGS/qualify-inject.json" \
    --inject 'probe=alu.fma32,model=bitflip,bit=7,mode=permanent' >"$WORK/inject.out" 2>&1
  rc=$?
  cat "$WORK/inject.out"
  if [ $rc -ne 1 ]; then
    echo "kit: injected fault: exit $rc, not 1"
    fail=1
  elif ! grep -q "$uuid" "$WORK/inject.out"; then
    echo "kit: injected fault: the output does not name $uuid"
    fail=1
  else
    echo "kit: run, qualify, --consensus passed; the injected fault exits 1 naming $uuid"
  fi
  return $fail
}

# > 2^32 words: 64-bit indexing and the random pattern's key change at 32 GiB, and a fault planted
# at word 5e9 must be found there.
step_memory() {
  local free_mib rc fail=0
  free_mib=$(nvidia-smi -i 0 --query-gpu=memory.free --format=csv,noheader,nounits | head -n 1 | tr -d ' ')
  if [ "${free_mib:-0}" -lt $((42 * 1024)) ]; then
    echo "kit: only ${free_mib:-?} MiB free on GPU 0, 42 GiB needed"
    return 2
  fi
  step_within 80 "$SDC" --backend cuda run --device 0 --size 40G --iterations 1 --json "$LOGS/memory-40g.json" \
    mem.own_address mem.moving_inversions
  rc=$?
  [ $rc -eq 0 ] || { echo "kit: 40 GiB run exit $rc"; fail=1; }
  step_within 60 "$SDC" --backend cuda run --device 0 --size 40G --iterations 1 \
    --json "$LOGS/memory-40g-inject.json" --inject 'probe=mem.own_address,model=bitflip,index=5000000000' \
    mem.own_address
  rc=$?
  [ $rc -eq 1 ] || { echo "kit: 40 GiB run with a fault at word 5e9: exit $rc, not 1"; fail=1; }
  python3 - "$LOGS/memory-40g.json" "$LOGS/memory-40g-inject.json" <<'PY' || fail=1
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
  return $fail
}

step_sanitizer() {
  local cs tool rc fail=0
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
    /usr/local/cuda/compute-sanitizer/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -n 1)
  [ -n "$cs" ] || { echo "kit: compute-sanitizer not found"; return 2; }
  # Small buffers and every kernel family: patterns, verify with records, chains, digest, injection.
  local filter='CudaDeviceTest.FillWritesWhatTheCpuWrites:CudaDeviceTest.MarchElementsPassCleanInBothDirections'
  filter+=':CudaDeviceTest.VerifyReportsEachWrongWordWithItsPlace:CudaDeviceTest.ChainsMatchHostGoldensForEveryKind'
  filter+=':CudaDeviceTest.DigestEqualsTheCpuDigestAndTheHostSum:CudaDeviceTest.MemoryFaultModelsAreDetectedWhereInjected'
  for tool in memcheck racecheck; do
    echo "--- $tool"
    step_within 45 "$cs" --tool "$tool" --error-exitcode 1 --print-limit 20 "$KIT/bin/cuda_device_test" \
      --gtest_filter="$filter" >"$LOGS/sanitizer-$tool.log" 2>&1
    rc=$?
    tail -n 15 "$LOGS/sanitizer-$tool.log"
    if [ $rc -ne 0 ]; then
      echo "kit: $tool exit $rc"
      fail=1
    elif grep -q '\[  SKIPPED \]' "$LOGS/sanitizer-$tool.log"; then
      echo "kit: $tool: tests skipped under the sanitizer"
      fail=1
    else
      echo "kit: $tool clean ($(grep -c '\[       OK \]' "$LOGS/sanitizer-$tool.log") tests)"
    fi
  done
  return $fail
}

# The image's own PyTorch, which loads its CUDA libraries from its wheels: LD_LIBRARY_PATH holds
# only those folders, so that libsdcprobe.so shares torch's libraries and never the toolkit's.
step_inline() {
  local rc fail=0 py="env LD_LIBRARY_PATH=$WHEEL_DIRS SDCPROBE_LIBRARY=$KIT/lib/libsdcprobe.so.1 PYTHONUNBUFFERED=1 python3"
  $py -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 2)' ||
    { echo "kit: torch sees no CUDA device"; return 2; }
  echo "--- clean"
  step_within 90 $py "$KIT/python/examples/train_cuda.py" --steps 300 --every 25 \
    --events "$LOGS/inline-clean.jsonl" --json "$LOGS/inline-clean.json"
  rc=$?
  [ $rc -eq 0 ] || { echo "kit: inline clean run exit $rc"; fail=1; }
  echo "--- injected fault"
  step_within 90 $py "$KIT/python/examples/train_cuda.py" --steps 300 --every 25 \
    --inject 'probe=alu.*,model=bitflip,mode=permanent,after=4' \
    --events "$LOGS/inline-fault.jsonl" --json "$LOGS/inline-fault.json"
  rc=$?
  [ $rc -eq 0 ] || { echo "kit: inline fault run exit $rc (the fault was not caught)"; fail=1; }
  echo "--- replica check digests: a CUDA tensor's digest equals the CPU digest of the same tensor"
  (cd "$KIT/python/tests" && step_within 30 $py -m unittest -v replica_digest_test)
  rc=$?
  [ $rc -eq 0 ] || { echo "kit: replica digest tests exit $rc"; fail=1; }
  echo "--- goodput"
  step_within 30 "$SDC" goodput "$LOGS/inline-fault.jsonl" --json >"$LOGS/goodput-fault.json"
  rc=$?
  [ $rc -eq 0 ] || { echo "kit: sdcprobe goodput exit $rc"; fail=1; }
  python3 - "$LOGS/goodput-fault.json" <<'PY' || fail=1
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
  return $fail
}

# A Lightning run (the image has Lightning 2.6) with GoodputCallback: recorder, inline probe with
# an injected fault, and the ledger over the merged per-rank files. "could not run" without Lightning.
step_lightning() {
  local rc py="env LD_LIBRARY_PATH=$WHEEL_DIRS SDCPROBE_LIBRARY=$KIT/lib/libsdcprobe.so.1 PYTHONUNBUFFERED=1 python3"
  step_within 80 $py "$KIT/python/examples/train_lightning.py" --sdcprobe "$SDC" --out "$LOGS/lightning" \
    --ckpt-dir "$WORK/lightning-ckpt" --steps 200 --inject 'probe=alu.*,model=bitflip,mode=permanent,after=4' \
    >"$LOGS/lightning.json"
  rc=$?
  tail -n 1 "$LOGS/lightning.json"
  return $rc
}

step_coverage() {
  local rc
  step_within 80 "$SDC" --backend cuda coverage --probes 'alu.fma32,alu.int64,mem.own_address' \
    --models bitflip,lane --trials 20 --clean 2 --json "$LOGS/coverage.json" --markdown "$LOGS/coverage.md"
  rc=$?
  cat "$LOGS/coverage.md" 2>/dev/null
  [ $rc -eq 0 ] || { echo "kit: coverage exit $rc"; return 1; }
  echo "kit: coverage campaign done (tables in coverage.md)"
}

step_bench() {
  local b rc fail=0
  for b in gpu_bench gpu_gemm_bench; do
    echo "--- $b"
    step_within 90 "$KIT/bin/$b" --benchmark_format=json --benchmark_out="$LOGS/$b.json" \
      --benchmark_out_format=json >"$LOGS/$b.log" 2>&1
    rc=$?
    tail -n 5 "$LOGS/$b.log"
    [ $rc -eq 0 ] || { echo "kit: $b exit $rc"; fail=1; }
  done
  python3 "$KIT_REPORT" bench "$LOGS" || fail=1
  return $fail
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
  local budget=${KIT_BUDGET_S:-330} start=$SECONDS cannot="" kit_src=${SDC_KIT:-$repo/.gpu-kit}
  local steps=(devices gpu_tests qualify memory sanitizer inline lightning coverage bench)
  local -A box=([devices]=30 [gpu_tests]=120 [qualify]=150 [memory]=60 [sanitizer]=100 [inline]=100
    [lightning]=90 [coverage]=60 [bench]=90)
  printf 'step\tstatus\tseconds\tnote\n' >"$WORK/steps.tsv"
  record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4//$'\t'/ }" >>"$WORK/steps.tsv"
    printf '== %-10s %-14s %4ss  %s\n' "$1" "$2" "$3" "$4"
  }

  # Setup: unpack the kit, find the CUDA libraries, load the kit's binary, see a GPU.
  local t0=$SECONDS note
  {
    echo "gpu_kit: run on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ), OUT=$OUT"
    if [ ! -f "$kit_src/kit.tar.xz" ]; then
      cannot="no kit at $kit_src (bench/gpu_kit.sh build, then carry .gpu-kit)"
    elif ! timeout 60 tar -C "$WORK" -xJf "$kit_src/kit.tar.xz"; then
      cannot="cannot unpack $kit_src/kit.tar.xz"
    else
      cat "$KIT/MANIFEST"
      if ! locate_cuda_libs; then
        cannot="CUDA libraries not found"
      else
        export LD_LIBRARY_PATH="$LIB_DIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        [ -d /usr/local/nvidia/lib64 ] && LD_LIBRARY_PATH+=":/usr/local/nvidia/lib64"
        "$SDC" --version || cannot="the kit's sdcprobe does not load"
      fi
    fi
    # KIT_WITHOUT_GPU=1 runs the steps anyway, to try the kit's own plumbing on a machine with no GPU.
    if [ -z "$cannot" ] && ! timeout 20 nvidia-smi -L && [ -z "${KIT_WITHOUT_GPU:-}" ]; then
      cannot="no GPU here (nvidia-smi -L failed)"
    fi
  } >"$LOGS/setup.log" 2>&1
  cat "$LOGS/setup.log"
  note=${cannot:-$(grep -c ' from ' "$LOGS/setup.log") CUDA libraries found; $(grep -c '^GPU ' "$LOGS/setup.log") GPU(s)}
  record setup "$([ -z "$cannot" ] && echo passed || echo 'could not run')" $((SECONDS - t0)) "$note"

  export -f $(compgen -A function step_)
  local i name limit rc status reserve
  for i in "${!steps[@]}"; do
    name=${steps[$i]}
    if [ -n "$cannot" ]; then
      record "$name" "could not run" 0 "$cannot"
      continue
    fi
    # Every later step keeps at least 20 s, so one slow step cannot starve the rest.
    reserve=$((20 * (${#steps[@]} - i - 1)))
    limit=$((budget - (SECONDS - start) - reserve))
    [ "$limit" -le "${box[$name]}" ] || limit=${box[$name]}
    if [ "$limit" -lt 10 ]; then
      record "$name" "could not run" 0 "out of time"
      continue
    fi
    t0=$SECONDS
    timeout -k 5 "$limit" bash -c "step_$name" >"$LOGS/$name.log" 2>&1
    rc=$?
    note=$(grep '^kit: ' "$LOGS/$name.log" | tail -n 2 | sed 's/^kit: //' | paste -sd ';' -)
    case $rc in
      0) status=passed ;;
      2) status="could not run" ;;
      124 | 137) status=failed note="timed out after ${limit}s; $note" ;;
      *) status=failed ;;
    esac
    record "$name" "$status" $((SECONDS - t0)) "$note"
  done

  local exit_code=0
  if cut -f2 "$WORK/steps.tsv" | grep -qx failed; then
    exit_code=1
  elif cut -f2 "$WORK/steps.tsv" | grep -qx 'could not run'; then
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
      tail -n +2 "$WORK/steps.tsv" | awk -F'\t' '{gsub(/["\\]/, "", $4); printf "%s{\"step\": \"%s\", \"status\": \"%s\", \"seconds\": %s, \"note\": \"%s\"}", (NR > 1 ? ", " : ""), $1, $2, $3, $4}'
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
  *)
    echo "usage: bench/gpu_kit.sh build|run" >&2
    exit 2
    ;;
esac
