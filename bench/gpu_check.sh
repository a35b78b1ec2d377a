#!/usr/bin/env bash
# One command for a lent GPU's few minutes: builds sdcprobe with the CUDA backend for this GPU's
# architecture, runs the `gpu` tests, runs the GPU benchmark and prints one table of probe
# throughput against the device's own ceilings. Finishes within 8 minutes.
# Run from the repository root: bench/gpu_check.sh   (BUILD=dir to choose the build directory)
# Exit status: 0 all passed, 1 a test failed, 2 could not build or run.
set -uo pipefail
cd "$(dirname "$0")/.."

build=${BUILD:-build/gpu-check}
budget=470  # seconds for everything; each step gets what is left
start=$SECONDS
# Seconds left, less a reserve for the later steps; never below 10 (timeout 0 would mean no limit).
left() {
  local s=$((budget - (SECONDS - start) - ${1:-0}))
  echo $((s < 10 ? 10 : s))
}
step() { printf '\n== %s  (t=%ds)\n' "$*" $((SECONDS - start)); }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L; then
  echo "gpu_check: no GPU here (nvidia-smi -L failed)"
  exit 2
fi
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')
arch=${cap:-native}

mkdir -p "$build"
step "configure (CUDA architecture $arch)"
timeout "$(left 200)" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSDC_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$build/configure.log" 2>&1 ||
  { tail -n 40 "$build/configure.log"; echo "gpu_check: configure failed"; exit 2; }

step "build"
timeout "$(left 150)" cmake --build "$build" -j "$(nproc)" >"$build/build.log" 2>&1 ||
  { grep -E 'error|Error' "$build/build.log" | head -n 40; echo "gpu_check: build failed (log: $build/build.log)"; exit 2; }

step "gpu tests"
timeout "$(left 90)" ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120
tests_rc=$?

step "gpu benchmark"
json="$build/gpu_bench.json"
timeout "$(left 70)" "$build/bench/gpu_bench" --benchmark_out="$json" --benchmark_out_format=json \
  >"$build/bench.log" 2>&1
bench_rc=$?
[ "$bench_rc" -eq 0 ] || { tail -n 30 "$build/bench.log"; echo "gpu_check: benchmark failed (exit $bench_rc)"; }

step "gpu gemm benchmark (n=${SDC_GEMM_BENCH_N:-8192})"
gemm_json="$build/gpu_gemm_bench.json"
timeout "$(left 5)" "$build/bench/gpu_gemm_bench" --benchmark_out="$gemm_json" --benchmark_out_format=json \
  >"$build/gemm_bench.log" 2>&1
gemm_rc=$?
[ "$gemm_rc" -eq 0 ] || { tail -n 30 "$build/gemm_bench.log"; echo "gpu_check: gemm benchmark failed (exit $gemm_rc)"; }

step "probe throughput against this GPU's ceilings"
if [ -s "$json" ]; then
  python3 - "$json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
def label(b):
    parts = b["name"].split("/")
    if parts[0] == "BM_MemoryProbe": return "mem." + parts[1]
    if parts[0] == "BM_MemoryOp": return "op " + parts[1]
    if parts[0] == "BM_Fma32Probe": return "alu.fma32"
    return "ceilings"
rows = []
for b in runs:
    if b.get("error_occurred"):
        rows.append((label(b), "skipped", b.get("error_message", ""), ""))
    elif b["name"].startswith("BM_Ceilings"):
        print("ceilings: memcpy %.0f GB/s, peak FP32 FMA %.1f TFLOP/s, cuBLAS SGEMM %.1f TFLOP/s (buffer %.0f MiB)" % (
            b["memcpy_GB/s"], b["peak_fma_TFLOP/s"], b["sgemm_TFLOP/s"], b["buffer_MiB"]))
    elif b["name"].startswith("BM_MemoryProbe"):
        rows.append((label(b), "%.0f GB/s" % b["GB/s"], "%.3f of memcpy" % b["ratio_to_memcpy"], ""))
    elif b["name"].startswith("BM_MemoryOp"):
        rows.append((label(b), "%.0f GB/s" % b["GB/s"], "%.3f of memcpy" % b["ratio_to_memcpy"], ""))
    elif b["name"].startswith("BM_Fma32Probe"):
        rows.append(("alu.fma32", "%.2f TFLOP/s" % b["TFLOP/s"], "%.3f of peak FMA" % b["ratio_to_peak_fma"],
                     "%.3f of SGEMM" % b["ratio_to_sgemm"]))
print("%-24s %-16s %-20s %s" % ("probe / op", "rate", "ratio", "reference"))
for r in rows:
    print("%-24s %-16s %-20s %s" % r)
PY
else
  echo "no benchmark output; see $build/bench.log"
fi
if [ -s "$gemm_json" ]; then
  python3 - "$gemm_json" <<'PY'
import json, sys
print("\n%-28s %-12s %-12s %-12s %-14s %s" % ("gemm probe", "bare TF/s", "probe TF/s", "gemm ratio", "verify/GEMM", "end to end"))
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("error_occurred"):
        print("%-28s skipped: %s" % (b["name"], b.get("error_message", "")))
        continue
    print("%-28s %-12.1f %-12.1f %-12.3f %-14.3f %.3f" % (b["name"], b["bare_TFLOP/s"], b["probe_TFLOP/s"],
          b["gemm_ratio"], b["verify_fraction"], b["end_to_end_ratio"]))
PY
fi

printf '\ngpu_check: tests %s, benchmark %s, %ds\n' "$([ $tests_rc -eq 0 ] && echo passed || echo FAILED)" \
  "$([ $bench_rc -eq 0 ] && [ $gemm_rc -eq 0 ] && echo ran || echo FAILED)" $((SECONDS - start))
[ "$tests_rc" -eq 0 ] || exit 1
[ "$bench_rc" -eq 0 ] && [ "$gemm_rc" -eq 0 ] || exit 2
exit 0
