#!/usr/bin/env bash
# CI: the libFuzzer harnesses (preset `fuzz`: clang 14, ASan + UBSan, CUDA off), each run for a
# bounded time from its corpus in tests/fuzz/corpus/. A crash, leak, timeout, sanitizer report or
# failed property fails the step; libFuzzer prints the input, and saves it under the work folder.
# SDC_FUZZ_SECONDS (default 15: ten harnesses in the time seven had at 20) sets the time per
# harness; README.md ("Testing") has longer runs.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${SDC_FUZZ_SECONDS:-15}

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One harness per core at a time (each is single-threaded): every harness keeps its full time, and
# the step takes half the wall time on two cores.
fuzz_one() {
  local name=$1
  # New inputs go to a scratch folder first in the list; the repository's corpus is only read.
  mkdir -p "$work/$name"
  if ! build/fuzz/tests/fuzz/libfuzzer/"${name}_fuzzer" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$work/${name}-" "$work/$name" "tests/fuzz/corpus/$name/" >"$work/$name.log" 2>&1; then
    cat "$work/$name.log"
    echo "fuzz: ${name} found a failing input (above)" >&2
    return 1
  fi
  echo "fuzz: ${name} for ${seconds} s: $(grep -E '^#[0-9]+[[:space:]]+DONE' "$work/$name.log" | tail -1)"
}
export -f fuzz_one
export work seconds
ls tests/fuzz/corpus | xargs -P "$(nproc)" -I{} bash -c 'fuzz_one "$1"' _ {}
