#!/usr/bin/env bash
# bench/gpu_kit.sh run on a machine with no GPU: a kit made from this build's sdcprobe unpacks and
# loads, and every GPU step reports "could not run"; with no kit at all, likewise. Both exit 2 and
# leave summary.json (and no more than 8 files) in $OUT. Exit 77 (skipped) where a GPU is present:
# there the kit itself runs (bench/gpu_kit.sh build, then run).
#   tests/bundle/gpu_kit_test.sh SDCPROBE REPO WORKDIR
set -euo pipefail
sdcprobe=$1 repo=$2
mkdir -p "$3"
work=$(mktemp -d "$(cd "$3" && pwd)/gpu_kit_test.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Every failure shows the kit's own logs, so that one seen once in CI can be diagnosed.
fail() {
  for log in "$work"/run-*.log "$work"/out-*/summary.md; do
    [ -f "$log" ] && { echo "--- $log"; cat "$log"; } >&2
  done
  echo "FAIL: $*" >&2
  exit 1
}
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_kit_test: skipped: a GPU is present"
  exit 77
fi

# Runs the kit from $1 into a fresh $OUT; checks exit 2, the files and that every step after setup
# could not run. Prints the setup note.
check_run() {
  local out=$work/out-$2 rc=0
  mkdir -p "$out"
  SDC_KIT=$1 OUT=$out bash "$repo/bench/gpu_kit.sh" run >"$work/run-$2.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || fail "$2: exit $rc, not 2"
  [ -s "$out/summary.json" ] && [ -s "$out/summary.md" ] && [ -s "$out/logs.tar.gz" ] || fail "$2: files missing"
  [ "$(find "$out" -type f | wc -l)" -le 8 ] || fail "$2: more than 8 files in OUT"
  python3 - "$out/summary.json" "$2" <<'PY' || fail "$2: summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["exit_code"] == 2, s["exit_code"]
steps = {x["step"]: x for x in s["steps"]}
gpu = ["devices", "gpu_tests", "qualify", "memory", "sanitizer", "inline", "lightning", "coverage",
       "bench"]
assert all(steps[n]["status"] == "could not run" for n in gpu), steps
print("%s: %s" % (sys.argv[2], steps["setup"]["note"]))
PY
}

check_run "$work/no-kit" no-kit
grep -q 'no kit at' "$work/run-no-kit.log" || fail "no-kit: the reason is not given"

# A kit with this build's sdcprobe alone: unpacked, its CUDA libraries looked for, the binary loaded.
mkdir -p "$work/stage" "$work/kit"
"$repo/scripts/bundle.sh" --leave libcudart,libcublas,libcublasLt,libnccl "$work/stage/kit" "$sdcprobe" >/dev/null
echo "commit: test" >"$work/stage/kit/MANIFEST"
tar -C "$work/stage" -cf - kit | xz -0 >"$work/kit/kit.tar.xz"
check_run "$work/kit" kit
grep -Eq 'no GPU here|CUDA libraries not found' "$work/run-kit.log" || fail "kit: the reason is not given"
echo "gpu_kit_test: passed"
