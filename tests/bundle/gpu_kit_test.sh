#!/usr/bin/env bash
# bench/gpu_kit.sh run on a machine with no GPU: a kit made from this build's sdcprobe unpacks and
# loads, and every GPU step reports "could not run"; with no kit at all, likewise. Both exit 2 and
# leave summary.json (and no more than 8 files) in $OUT. Then the sanitizer step's verdicts, with a
# fake compute-sanitizer (KIT_WITHOUT_GPU=1 runs the steps here): the tool's refusal of the device
# (as under gVisor) and a failing self-test are "could not run", a reported error is "failed", a
# clean run passes, and a hang is "out of time"; racecheck's internal error is the tool's where it
# also stops on cuBLASLt alone (gpu_kit_racecheck_repro), a failure where only on the GEMM tests; the refusal run also has no xz on PATH, so the kit
# is unpacked by Python's tarfile; every sanitizer run is filtered to sdcprobe's kernels. Then the
# devices step with a stand-in nvidia-smi and sdcprobe: a sysfs without GPUs (gVisor), more GPUs on
# the bus than the container's CUDA shows (--expect-gpus from nvidia-smi -L), and a failed GPU, whose
# working neighbour's UUID is kept for the later steps. Last, the build's search for cuobjdump when
# it is not beside nvcc. Exit 77 (skipped) where a GPU is present:
# there the kit itself runs (bench/gpu_kit.sh build, then run).
#   tests/bundle/gpu_kit_test.sh SDCPROBE REPO WORKDIR
set -euo pipefail
sdcprobe=$1 repo=$2
mkdir -p "$3"
work=$(mktemp -d "$(cd "$3" && pwd)/gpu_kit_test.XXXXXX")
trap "${KEEP_WORK:+:} rm -rf \"$work\"" EXIT
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
# The kit's reports need a python3; this one is Debian's (its tarfile has lzma).
python=/usr/bin/python3

# Runs the kit from $1 into a fresh $OUT, with the environment that follows (NAME=VALUE...); checks
# the exit status ($want, 2 unless set) and the files. Then `expect` reads its summary.json.
run_kit() {
  local src=$1 name=$2 out=$work/out-$2 rc=0
  shift 2
  mkdir -p "$out"
  env SDC_KIT="$src" OUT="$out" "$@" bash "$repo/bench/gpu_kit.sh" run >"$work/run-$name.log" 2>&1 || rc=$?
  [ "$rc" -eq "${want:-2}" ] || fail "$name: exit $rc, not ${want:-2}"
  [ -s "$out/summary.json" ] && [ -s "$out/summary.md" ] && [ -s "$out/logs.tar.gz" ] || fail "$name: files missing"
  [ "$(find "$out" -type f | wc -l)" -le 8 ] || fail "$name: more than 8 files in OUT"
}

# expect NAME STEP=STATUS... [STEP~NOTE-REGEX...]: every step named has that status ("*" for every
# step not named) or a note matching; the boxes and the setup's fit the budget.
expect() {
  "$python" - "$work/out-$1/summary.json" "${@:2}" <<'PY' || fail "$1: summary.json"
import json, re, sys
s = json.load(open(sys.argv[1]))
steps = {x["step"]: x for x in s["steps"]}
order = ["setup", "devices", "gpu_tests", "qualify", "bench", "memory", "sanitizer", "inline", "canary",
         "lightning", "coverage", "lightning_ranks"]
assert [x["step"] for x in s["steps"]] == order, [x["step"] for x in s["steps"]]
assert sum(x["box"] for x in s["steps"]) == 360, [(x["step"], x["box"]) for x in s["steps"]]
named, default = {}, None
for arg in sys.argv[2:]:
    if "~" in arg:
        step, pattern = arg.split("~", 1)
        assert re.search(pattern, steps[step]["note"]), (step, pattern, steps[step]["note"])
    else:
        step, status = arg.split("=", 1)
        if step == "*":
            default = status
        else:
            named[step] = status
for step in order:
    want = named.get(step, default)
    assert want is None or steps[step]["status"] == want, (step, want, steps[step])
PY
}

run_kit "$work/no-kit" no-kit
expect no-kit 'setup=could not run' '*=could not run' 'setup~no kit at'

# A kit with this build's sdcprobe alone: unpacked, its CUDA libraries looked for, the binary loaded.
mkdir -p "$work/stage" "$work/kit"
"$repo/scripts/bundle.sh" --leave libcudart,libcublas,libcublasLt,libnccl "$work/stage/kit" "$sdcprobe" >/dev/null
echo "commit: test" >"$work/stage/kit/MANIFEST"
tar -C "$work/stage" -cf - kit | xz -0 >"$work/kit/kit.tar.xz"
run_kit "$work/kit" kit PATH="$(dirname "$python"):$PATH"
expect kit 'setup=could not run' '*=could not run' 'setup~no GPU here|CUDA libraries not found'

# The sanitizer step's programs, which the fake tool never runs (any run of one fails the test).
for p in gpu_kit_selftest gpu_kit_racecheck_repro cuda_device_test sdc_gemm_gpu_tests; do
  printf '#!/bin/sh\necho "run without the sanitizer: $0" >&2\nexit 99\n' >"$work/stage/kit/bin/$p"
  chmod +x "$work/stage/kit/bin/$p"
done
mkdir -p "$work/kit-sanitizer"
tar -C "$work/stage" -cf - kit | xz -0 >"$work/kit-sanitizer/kit.tar.xz"

# A fake compute-sanitizer: logs "TOOL PROGRAM" to $work/calls-$FAKE_MODE, its kernel filter to
# $work/filters-$FAKE_MODE, and answers as FAKE_MODE says. Its words are the real tool's (a refused
# device: gVisor's "Device not supported", then error 999 at the program's first allocation).
mkdir -p "$work/fake"
cat >"$work/fake/compute-sanitizer" <<FAKE
#!/bin/sh
tool="" filter=""
while [ \$# -gt 0 ]; do
  case \$1 in
    --tool) tool=\$2; shift 2 ;;
    --kernel-name) filter=\$2; shift 2 ;;
    --*) shift 2 ;;
    *) break ;;
  esac
done
program=\$(basename "\$1")
echo "\$tool \$program" >>"$work/calls-\$FAKE_MODE"
echo "\$filter" >>"$work/filters-\$FAKE_MODE"
echo "========= COMPUTE-SANITIZER"
case \$FAKE_MODE:\$tool:\$program in
  refuse:*)
    echo "========= Error: Device not supported. For a list of supported devices, see the documentation."
    echo "========= Program hit cudaErrorUnknown (error 999) due to \"unknown error\" on CUDA API call to cudaMalloc."
    echo "========= ERROR SUMMARY: 1 error"
    exit 1 ;;
  selftest:*:gpu_kit_selftest)
    echo "gpu_kit_selftest: cudaMalloc: initialization error (error 3)"
    echo "========= Target application returned an error"
    echo "========= ERROR SUMMARY: 0 errors"
    exit 1 ;;
  finding:memcheck:cuda_device_test)
    echo "========= Invalid __global__ write of size 16 bytes"
    echo "=========     at sweep_kernel+0x1f0"
    echo "========= ERROR SUMMARY: 1 error"
    exit 1 ;;
  internal:racecheck:*|ours:racecheck:sdc_gemm_gpu_tests)
    echo "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception."
    echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
    exit 1 ;;
  hang:*) sleep 60 ;;
esac
echo "[       OK ] \$program"
echo "========= ERROR SUMMARY: 0 errors"
FAKE
chmod +x "$work/fake/compute-sanitizer"

# No xz on PATH: every program of the usual folders but the xz family, and Debian's python3.
mkdir -p "$work/no-xz"
for d in /usr/local/bin /usr/bin /bin /usr/sbin /sbin; do
  [ -d "$d" ] && { ln -s -t "$work/no-xz" "$d"/* 2>/dev/null || true; }  # the first folder's wins
done
rm -f "$work"/no-xz/{xz,unxz,xzcat,xzdec,lzma,unlzma,lzcat} "$work/no-xz/python3"
ln -s "$python" "$work/no-xz/python3"
! PATH=$work/no-xz command -v xz >/dev/null || fail "xz is still on the test's PATH"

# The refusal, the whole run: "could not run" for the sanitizer, and for every other step as before.
run_kit "$work/kit-sanitizer" refuse PATH="$work/fake:$work/no-xz" KIT_WITHOUT_GPU=1 FAKE_MODE=refuse
expect refuse 'setup=passed' '*=could not run' 'sanitizer~compute-sanitizer cannot run here.*Device not supported'
grep -q "no xz here: unpacking with Python's tarfile" "$work/run-refuse.log" || fail "refuse: not unpacked by tarfile"
[ "$(cat "$work/calls-refuse")" = "memcheck gpu_kit_selftest" ] || fail "refuse: not the self-test alone: $(cat "$work/calls-refuse")"

# The sanitizer step alone (KIT_STEPS), with xz: the other steps are "not run".
sanitizer_run() {
  run_kit "$work/kit-sanitizer" "$1" PATH="$work/fake:$(dirname "$python"):$PATH" KIT_WITHOUT_GPU=1 FAKE_MODE="$1" \
    KIT_STEPS=sanitizer "${@:2}"
}
sanitizer_run selftest
expect selftest 'setup=passed' '*=not run' 'sanitizer=could not run' 'sanitizer~self-test'
[ "$(cat "$work/calls-selftest")" = "memcheck gpu_kit_selftest" ] || fail "selftest: ran on after the self-test"

want=1 sanitizer_run finding
expect finding 'setup=passed' '*=not run' 'sanitizer=failed' 'sanitizer~errors reported by memcheck-device \('
[ "$(head -n 1 "$work/calls-finding")" = "memcheck gpu_kit_selftest" ] || fail "finding: the self-test is not first"
for run in "memcheck cuda_device_test" "memcheck sdc_gemm_gpu_tests" "racecheck gpu_kit_racecheck_repro" \
  "racecheck sdc_gemm_gpu_tests" "synccheck cuda_device_test" "synccheck sdc_gemm_gpu_tests"; do
  grep -qx "$run" "$work/calls-finding" || fail "finding: no run of $run"
done

sanitizer_run clean
expect clean 'setup=passed' '*=not run' 'sanitizer=passed' 'sanitizer~memcheck, racecheck and synccheck clean'
[ "$(sort -u "$work/filters-clean")" = "kns=_ZN3sdc" ] || fail "clean: a run not filtered to sdcprobe's kernels: $(sort -u "$work/filters-clean")"
[ "$(wc -l <"$work/filters-clean")" -eq 7 ] || fail "clean: not seven sanitizer runs"

# racecheck's internal error on cuBLASLt's GEMMs alone (gpu_kit_racecheck_repro) and on the GEMM
# tests: the tool's failure, "could not run"; on the GEMM tests alone: a failure.
sanitizer_run internal
expect internal 'setup=passed' '*=not run' 'sanitizer=could not run' 'sanitizer~could not run racecheck-cublaslt racecheck-gemm'
want=1 sanitizer_run ours
expect ours 'setup=passed' '*=not run' 'sanitizer=failed' 'sanitizer~errors reported by racecheck-gemm \('

# A hang: the step's box ends it, and it is "out of time", not a failure.
sanitizer_run hang KIT_BUDGET_S=12
expect hang 'setup=passed' '*=not run' 'sanitizer=out of time'
# The devices step: a stand-in nvidia-smi shows FAKE_GPUS GPUs; a stand-in sdcprobe answers as the
# real one does when sysfs lists two GPUs and CUDA one (inventory_cli_test checks the real one): with
# --expect-gpus 1 the one it opens, without it also the other as a failed device, and exit 1. It logs
# every call to $work/sdc-calls.
cat >"$work/fake/nvidia-smi" <<'FAKE'
#!/bin/sh
[ "$1" = -L ] || { echo "    Product Name : NVIDIA H200"; exit 0; }
i=0
while [ "$i" -lt "${FAKE_GPUS:-1}" ]; do
  echo "GPU $i: NVIDIA H200 (UUID: GPU-0000000$i-1111-2222-3333-444444444444)"
  i=$((i + 1))
done
FAKE
mkdir -p "$work/devices-stage/kit/bin"
cp -r "$work/stage/kit/." "$work/devices-stage/kit/"
cat >"$work/devices-stage/kit/bin/sdcprobe" <<FAKE
#!/bin/sh
echo "\$*" >>"$work/sdc-calls"
case " \$* " in
  *" --version "*) echo "sdcprobe 0.1.0 (stand-in)"; exit 0 ;;
  *" devices "*) ;;
  *) exit 0 ;;
esac
working='{"backend": "cuda", "uuid": "GPU-00000000-1111-2222-3333-444444444444", "name": "NVIDIA H200",
  "pci_bus_id": "00000000:19:00.0", "compute_capability": "9.0", "memory_bytes": 150000000000, "open_error": ""}'
case " \$* " in
  *" --expect-gpus 1 "*) echo "[\$working]" ;;
  *) echo "[\$working, {\"backend\": \"cuda\", \"uuid\": \"\", \"name\": \"\", \"pci_bus_id\": \"00000000:3B:00.0\",
       \"open_error\": \"00000000:3B:00.0 is on the PCI bus but CUDA does not show it\"}]"; exit 1 ;;
esac
FAKE
chmod +x "$work/fake/nvidia-smi" "$work/devices-stage/kit/bin/sdcprobe"
mkdir -p "$work/kit-devices"
tar -C "$work/devices-stage" -cf - kit | xz -0 >"$work/kit-devices/kit.tar.xz"
# sysfs trees: none with GPUs, and one with two NVIDIA 3D controllers and a NIC.
fake_pci() {
  mkdir -p "$1/sys/bus/pci/devices/$2"
  echo "$3" >"$1/sys/bus/pci/devices/$2/vendor"
  echo "$4" >"$1/sys/bus/pci/devices/$2/class"
}
mkdir -p "$work/sys-none/sys/bus/pci/devices"
fake_pci "$work/sys-two" 0000:19:00.0 0x10de 0x030200
fake_pci "$work/sys-two" 0000:3b:00.0 0x10de 0x030200
fake_pci "$work/sys-two" 0000:5d:00.0 0x15b3 0x020700
devices_run() {
  run_kit "$work/kit-devices" "$1" PATH="$work/fake:$(dirname "$python"):$PATH" KIT_WITHOUT_GPU=1 \
    KIT_STEPS="devices coverage" "${@:2}"
}

# gVisor: sysfs lists no GPU, CUDA and nvidia-smi one. The devices step passes and says so.
: >"$work/sdc-calls"
devices_run gvisor SDCPROBE_SYSFS_ROOT="$work/sys-none" FAKE_GPUS=1
expect gvisor 'setup=passed' '*=not run' 'devices=passed' 'coverage=passed' \
  'devices~on the bus \(sysfs\) 0, in nvidia-smi -L 1, opened by CUDA 1 of 1'

# A container on a larger host: sysfs lists two GPUs, CUDA and nvidia-smi one. --expect-gpus 1 goes
# to every sdcprobe call that opens devices, and the step passes.
: >"$work/sdc-calls"
devices_run container SDCPROBE_SYSFS_ROOT="$work/sys-two" FAKE_GPUS=1
expect container 'setup=passed' '*=not run' 'devices=passed' 'coverage=passed' \
  'devices~on the bus \(sysfs\) 2, in nvidia-smi -L 1, opened by CUDA 1 of 1' 'devices~testing NVIDIA H200 GPU-00000000'
grep -q -- '--expect-gpus 1 devices --json' "$work/sdc-calls" || fail "container: devices without --expect-gpus 1"
grep -q -- '--expect-gpus 1 coverage' "$work/sdc-calls" || fail "container: coverage without --expect-gpus 1"

# nvidia-smi shows both GPUs, CUDA one: a failed GPU. The step fails, and the working GPU's UUID is
# still kept, so the coverage step after it runs.
want=1 devices_run failed SDCPROBE_SYSFS_ROOT="$work/sys-two" FAKE_GPUS=2
expect failed 'setup=passed' '*=not run' 'devices=failed' 'coverage=passed' \
  'devices~testing NVIDIA H200 GPU-00000000'

# The build's cuobjdump where the toolkit has nvcc alone: found in a Python package (the
# nvidia-cuda-cuobjdump wheel's layout); with none anywhere the lookup fails, and the build with it.
# The machine's own cuobjdump (/usr/local/bin on some images) is taken off the PATH used here.
rm -f "$work/no-xz/cuobjdump"
mkdir -p "$work/nvcc-only/bin" "$work/wheel/nvidia/cuda_cuobjdump/bin"
printf '#!/bin/sh\n' | tee "$work/nvcc-only/bin/nvcc" >"$work/wheel/nvidia/cuda_cuobjdump/bin/cuobjdump"
chmod +x "$work/nvcc-only/bin/nvcc" "$work/wheel/nvidia/cuda_cuobjdump/bin/cuobjdump"
find_cuobjdump() {
  env PATH="$work/no-xz" KIT_TOOLKIT_DIRS="$work/nvcc-only" "$@" bash "$repo/bench/gpu_kit.sh" find-cuobjdump \
    "$work/nvcc-only/bin/nvcc" 2>&1
}
found=$(find_cuobjdump PYTHONPATH="$work/wheel") || fail "cuobjdump: the wheel's not found: $found"
[ "$found" = "$work/wheel/nvidia/cuda_cuobjdump/bin/cuobjdump" ] || fail "cuobjdump: found $found, not the wheel's"
! found=$(find_cuobjdump) || fail "cuobjdump: found $found where there is none"
[[ $found == *"cuobjdump not found"* ]] || fail "cuobjdump: no reason given: $found"
# The build's kernel-name check: a program without device code (cuobjdump exits non-zero on it)
# lists no kernel and passes; a kernel outside namespace sdc, or no kernel in any program, fails.
cat >"$work/fake-cuobjdump" <<'SH'
#!/bin/sh
case $2 in
  *with-sdc) echo "STT_FUNC STO_ENTRY _ZN3sdc6kernelEv" ;;
  *outside) echo "STT_FUNC STO_ENTRY _Z5otherv" ;;
  *) echo "cuobjdump info: File does not contain device code" >&2; exit 255 ;;
esac
SH
chmod +x "$work/fake-cuobjdump"
names() { bash "$repo/bench/gpu_kit.sh" check-kernel-names "$work/fake-cuobjdump" "$@" 2>&1; }
out=$(names prog-with-sdc prog-host-only) || fail "kernel names: a program without device code failed the build: $out"
[[ $out == *"every kernel in the kit (1,"* ]] || fail "kernel names: not counted: $out"
! out=$(names prog-with-sdc prog-outside) || fail "kernel names: a kernel outside namespace sdc passed"
[[ $out == *"outside namespace sdc"* ]] || fail "kernel names: no reason given: $out"
! out=$(names prog-host-only) || fail "kernel names: no kernel anywhere passed"
[[ $out == *"lists no kernel"* ]] || fail "kernel names: no reason given: $out"
echo "gpu_kit_test: passed"
