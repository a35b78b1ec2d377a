#!/usr/bin/env bash
# The Slurm and NHC gates against the real sdcprobe (CPU backend, injected faults) and a fake
# scontrol on PATH that records its argv: the exact drain command for a fault, nothing for a pass.
# The NHC check of the GPUs' own health runs `sdcprobe health` on the stand-in NVML.
# Usage: gates_test.sh SDCPROBE DEPLOY_DIR FAKE_NVML
set -uo pipefail
sdcprobe="$1"
deploy="$2"
fake_nvml="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

mkdir "$work/bin"
cat > "$work/bin/scontrol" <<'FAKE'
#!/usr/bin/env bash
# Records each call: one argument per line, then "--".
{ printf '%s\n' "$@"; echo "--"; } >> "$SCONTROL_LOG"
if [ "${2:-}" = show ]; then
  echo "NodeName=$4 Arch=x86_64 State=IDLE${FAKE_REASON:+ Reason=$FAKE_REASON}"
fi
FAKE
chmod +x "$work/bin/scontrol"
# A fake logger: records what would reach syslog.
cat > "$work/bin/logger" <<'FAKE'
#!/usr/bin/env bash
echo "$*" >> "$LOGGER_LOG"
FAKE
chmod +x "$work/bin/logger"
export PATH="$work/bin:$PATH" SCONTROL_LOG="$work/scontrol.log" LOGGER_LOG="$work/logger.log" SDCPROBE="$sdcprobe" \
  NODE=node1 SDCPROBE_STATE_DIR="$work/state"
unset SCONTROL SDCPROBE_DRY_RUN SDCPROBE_PROLOG_FAIL_JOB FAKE_REASON SDCPROBE_LOG_SOCKET EXPECT_GPUS SDCPROBE_SYSFS_ROOT \
  SDCPROBE_COULD_NOT_TEST SDCPROBE_COULD_NOT_TEST_AFTER SDCPROBE_PROLOG_COULD_NOT_TEST_AFTER

uuid1="$("$sdcprobe" --backend cpu --cpu-devices 2 devices --json | grep -o '"uuid": "[^"]*"' | sed -n 2p | cut -d'"' -f4)"
[ -n "$uuid1" ] || { echo "FAIL: no UUID for virtual device 1"; exit 1; }
pass_args="--backend cpu --cpu-devices 2"
fault_args="--backend cpu --cpu-devices 2 --inject device=1,probe=alu.fma32,model=bitflip,bit=7"

source "$(dirname "$(readlink -f "$0")")/test_lib.sh"
log() { cat "$SCONTROL_LOG" 2>/dev/null; }
reset() { rm -f "$SCONTROL_LOG"; }

show_call=$'-o\nshow\nnode\nnode1\n--'
drain_call=$'update\nNodeName=node1\nState=DRAIN\nReason=SDC: '"$uuid1"$' alu.fma32\n--'

reset
SDCPROBE_ARGS="$pass_args" "$deploy/slurm/healthcheck.sh"
check "healthcheck: a pass calls scontrol not at all" "" "$(log)"

reset
SDCPROBE_ARGS="$fault_args" "$deploy/slurm/healthcheck.sh"
check "healthcheck: exit code is 0 for Slurm" 0 $?
check "healthcheck: a fault drains with the UUID and probe" "$show_call"$'\n'"$drain_call" "$(log)"

reset
SDCPROBE_ARGS="$fault_args" FAKE_REASON="Not responding [slurm@2026-11-29T10:00:00]" "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "healthcheck: another tool's reason is left untouched" "$show_call" "$(log)"

reset
SDCPROBE_ARGS="$fault_args" FAKE_REASON="SDC: CPU-old alu.fma64" "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "healthcheck: an earlier SDC reason is replaced" "$show_call"$'\n'"$drain_call" "$(log)"

reset
out="$(SDCPROBE_ARGS="$fault_args" SDCPROBE_DRY_RUN=1 "$deploy/slurm/healthcheck.sh" 2>/dev/null)"
check "dry run: no update" "$show_call" "$(log)"
check "dry run: prints the command" \
  "sdcprobe-gate: dry run: would run: scontrol update NodeName=node1 State=DRAIN Reason=SDC:\\ $uuid1\\ alu.fma32" "$out"

reset
SDCPROBE_ARGS="$pass_args" "$deploy/slurm/prolog.sh"
check "prolog: a pass exits 0" 0 $?
check "prolog: a pass calls scontrol not at all" "" "$(log)"
SDCPROBE_ARGS="$fault_args" "$deploy/slurm/prolog.sh" 2>/dev/null
check "prolog: a fault exits 1" 1 $?
SDCPROBE_ARGS="$fault_args" SDCPROBE_PROLOG_FAIL_JOB=0 "$deploy/slurm/prolog.sh" 2>/dev/null
check "prolog: SDCPROBE_PROLOG_FAIL_JOB=0 lets the job run" 0 $?

# Could not test: --cpu-devices 0 is rejected, exit 2. The prolog drains at the first, with why.
# The why is npd's UNKNOWN line, cut at its 80 characters.
cpu0_reason="Reason=sdcprobe: could not test: --cpu-devices: expected a decimal or 0x-hex integer in"
reset
SDCPROBE_ARGS="--backend cpu --cpu-devices 0" "$deploy/slurm/prolog.sh" 2>/dev/null
check "exit 2 by default: the job fails" 1 $?
check "exit 2 by default: drained with why" "$show_call"$'\nupdate\nNodeName=node1\nState=DRAIN\n'"$cpu0_reason"$'\n--' \
  "$(log)"
reset
SDCPROBE_ARGS="--backend cpu --cpu-devices 0" SDCPROBE_COULD_NOT_TEST=keep "$deploy/slurm/prolog.sh" 2>/dev/null
check "exit 2, keep: the job runs" 0 $?
check "exit 2, keep: no drain" "" "$(log)"
reset
SDCPROBE_ARGS="--backend cpu --cpu-devices 0" FAKE_REASON="ops: replacing a fan" "$deploy/slurm/prolog.sh" 2>/dev/null
check "exit 2: another tool's reason is left untouched" "$show_call" "$(log)"

# A missing binary (exit 127) under slurmd, which discards the output: syslog hears of each, and the
# third in a row drains the node; a check that runs starts the count again.
missing_reason="Reason=sdcprobe: could not test: exit 127, the binary or a library it needs is missing"
reset
rm -f "$LOGGER_LOG"
SDCPROBE="$work/no-such-sdcprobe" "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "missing binary: healthcheck exits 0" 0 $?
check "missing binary: no drain at the first" "" "$(log)"
check "missing binary: logged to syslog" \
  "-t sdcprobe-gate -p daemon.warning -- could not test (exit 127): exit 127, the binary or a library it needs is missing; 1 of 3 in a row before node1 is drained" \
  "$(cat "$LOGGER_LOG" 2>/dev/null)"
SDCPROBE="$work/no-such-sdcprobe" "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "missing binary: no drain at the second" "" "$(log)"
SDCPROBE="$work/no-such-sdcprobe" "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "missing binary: drained at the third" "$show_call"$'\nupdate\nNodeName=node1\nState=DRAIN\n'"$missing_reason"$'\n--' \
  "$(log)"
reset
rm -rf "$work/state"
SDCPROBE="$work/no-such-sdcprobe" "$deploy/slurm/healthcheck.sh" 2>/dev/null
SDCPROBE="$work/no-such-sdcprobe" "$deploy/slurm/healthcheck.sh" 2>/dev/null
SDCPROBE_ARGS="$pass_args" "$deploy/slurm/healthcheck.sh"
SDCPROBE="$work/no-such-sdcprobe" "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "missing binary: a pass starts the count again" "" "$(log)"
reset
rm -rf "$work/state"
SDCPROBE="$work/no-such-sdcprobe" SDCPROBE_COULD_NOT_TEST_AFTER=1 "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "missing binary, after 1: drained at once" "$show_call"$'\nupdate\nNodeName=node1\nState=DRAIN\n'"$missing_reason"$'\n--' \
  "$(log)"
reset
rm -rf "$work/state"
SDCPROBE="$work/no-such-sdcprobe" SDCPROBE_STATE_DIR=/proc/no-state "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "missing binary, no place for the count: drained at once" \
  "$show_call"$'\nupdate\nNodeName=node1\nState=DRAIN\n'"$missing_reason"$'\n--' "$(log)"
reset
rm -rf "$work/state"
for _ in 1 2 3 4; do SDCPROBE="$work/no-such-sdcprobe" SDCPROBE_COULD_NOT_TEST=keep "$deploy/slurm/healthcheck.sh" 2>/dev/null; done
check "missing binary, keep: never drained" "" "$(log)"

# GPUs on the PCI bus (a fake sysfs tree) that CUDA does not show: drained naming the first bus id;
# EXPECT_GPUS=0 says none is meant to be tested, and the CPU passes.
mkdir -p "$work/sysfs/sys/bus/pci/devices"
for address in 0000:1b:00.0 0000:43:00.0; do
  mkdir -p "$work/sysfs/sys/bus/pci/devices/$address"
  echo 0x10de > "$work/sysfs/sys/bus/pci/devices/$address/vendor"
  echo 0x030200 > "$work/sysfs/sys/bus/pci/devices/$address/class"
done
small="--size 64K --iterations 2"
reset
SDCPROBE_SYSFS_ROOT="$work/sysfs" SDCPROBE_ARGS="$small" "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "GPUs CUDA does not show: drained with the bus id" \
  "$show_call"$'\nupdate\nNodeName=node1\nState=DRAIN\nReason=SDC: GPU 00000000:1B:00.0 not seen by CUDA +1 more\n--' "$(log)"
reset
SDCPROBE_SYSFS_ROOT="$work/sysfs" SDCPROBE_ARGS="$small --budget 1h" EXPECT_GPUS=0 "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "EXPECT_GPUS=0: the CPU passes" "" "$(log)"

# A hostile verdict stays one literal argument: no command runs, odd characters are dropped.
reset
cat > "$work/evil-sdcprobe" <<FAKE
#!/usr/bin/env bash
echo 'SDC: GPU-1 x; touch $work/pwned \$(touch $work/pwned2) \`touch $work/pwned3\`'
exit 1
FAKE
chmod +x "$work/evil-sdcprobe"
SDCPROBE="$work/evil-sdcprobe" "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "hostile verdict: nothing ran" "" "$(ls "$work" | grep pwned)"
check "hostile verdict: one literal, sanitised reason" \
  "Reason=$(printf '%s' "SDC: GPU-1 x touch $work/pwned (touch $work/pwned2) touch $work/pwned3" | cut -c1-80)" \
  "$(log | grep '^Reason=')"

# A fault of a GPU's own counters (sdcprobe health, read by every level) drains naming its field.
reset
cat > "$work/health-sdcprobe" <<'FAKE'
#!/usr/bin/env bash
echo 'SDC: GPU-1 health row_remap'
exit 1
FAKE
chmod +x "$work/health-sdcprobe"
SDCPROBE="$work/health-sdcprobe" "$deploy/slurm/healthcheck.sh" 2>/dev/null
check "a GPU health fault drains naming its field" "Reason=SDC: GPU-1 health row_remap" "$(log | grep '^Reason=')"

# NHC: the check calls NHC's die with the verdict on a fault, and nothing on a pass.
nhc() {  # ARGS -> what die received
  ( die() { echo "die $1 $2"; }
    log() { :; }
    # shellcheck disable=SC1091
    . "$deploy/nhc/sdcprobe.nhc"
    SDCPROBE_ARGS="$1" check_sdcprobe )
}
check "nhc: a pass" "" "$(nhc "$pass_args")"
check "nhc: a fault" "die 1 SDC: $uuid1 alu.fma32" "$(nhc "$fault_args")"
# NHC evals die's message: a hostile verdict reaches it reduced to the safe character set.
check "nhc: a hostile verdict is filtered" \
  "die 1 $(printf '%s' "SDC: GPU-1 x touch $work/pwned (touch $work/pwned2) touch $work/pwned3" | cut -c1-80)" \
  "$(SDCPROBE="$work/evil-sdcprobe" nhc "")"
# check_sdcprobe_health: sdcprobe health on the stand-in NVML; SDCPROBE_ARGS are the level's only.
nhc_health() {  # NVML_ENV -> what die received
  ( die() { echo "die $1 $2"; }
    log() { :; }
    # shellcheck disable=SC1091
    . "$deploy/nhc/sdcprobe.nhc"
    eval "export SDCPROBE_NVML_LIBRARY=$fake_nvml FAKE_NVML='GPU-a=;GPU-b=' $1"
    SDCPROBE_ARGS="--budget 40s" check_sdcprobe_health )
}
check "nhc health: healthy GPUs" "" "$(nhc_health "")"
check "nhc health: a pending row remap" "die 1 SDC: GPU-b health row_remap" \
  "$(nhc_health "FAKE_NVML_REMAP='GPU-b=0,0,1,0'")"
check "nhc health: two faults" "die 1 SDC: GPU-a health recovery_action +1 more" \
  "$(nhc_health "FAKE_NVML_RECOVERY='GPU-a=1' FAKE_NVML_LINK='GPU-b=5,5,8,16'")"
rm -rf "$work/state"
SDCPROBE="$work/no-such-sdcprobe" nhc "" >/dev/null
SDCPROBE="$work/no-such-sdcprobe" nhc "" >/dev/null  # the level's count is 2
check "nhc health: a driver that fails is counted apart from the level's" "" "$(nhc_health FAKE_NVML_INIT=fail)"
check "nhc health: the second does not fail it" "" "$(nhc_health FAKE_NVML_INIT=fail)"
check "nhc health: the third fails it with why" \
  "die 1 sdcprobe: could not test: NVML error: nvmlInit_v2: Driver Not Loaded" "$(nhc_health FAKE_NVML_INIT=fail)"

rm -f "$LOGGER_LOG"
rm -rf "$work/state"
check "nhc: a missing binary does not fail the first check" "" "$(SDCPROBE="$work/no-such-sdcprobe" nhc "")"
check "nhc: a missing binary is logged to syslog" \
  "-t sdcprobe-nhc -p daemon.warning -- could not test (exit 127): exit 127, the binary or a library it needs is missing" \
  "$(cat "$LOGGER_LOG" 2>/dev/null)"
check "nhc: nor the second" "" "$(SDCPROBE="$work/no-such-sdcprobe" nhc "")"
check "nhc: the third fails it with why" \
  "die 1 sdcprobe: could not test: exit 127, the binary or a library it needs is missing" \
  "$(SDCPROBE="$work/no-such-sdcprobe" nhc "")"
rm -rf "$work/state"
check "nhc: keep never fails it" "" \
  "$(for _ in 1 2 3; do SDCPROBE="$work/no-such-sdcprobe" SDCPROBE_COULD_NOT_TEST=keep nhc ""; done)"

# The sweep's idle check fails closed: only an answering squeue with no job on the node is idle ...
idle() {  # SQUEUE_BODY -> the idle check's exit code
  printf '#!/usr/bin/env bash\n%s\n' "$1" > "$work/bin/squeue"
  chmod +x "$work/bin/squeue"
  "$deploy/slurm/idle-check.sh" >/dev/null 2>&1
  echo $?
}
check "idle check: no running job is idle" 0 "$(idle 'exit 0')"
check "idle check: a running job is busy" 1 "$(idle 'echo 4242')"
check "idle check: a failing squeue is busy" 1 "$(idle 'echo "slurm_load_jobs error" >&2; exit 1')"
# ... and a process on a GPU is busy whatever Slurm says (sdcprobe idle exits 1; its NVML reading is
# tested in sdc_gpu_idle_tests).
printf '#!/usr/bin/env bash\n[ "$*" = idle ] && { echo "busy: in use: GPU-a (pid 7)"; exit 1; }\nexit 3\n' >"$work/busy-gpu"
chmod +x "$work/busy-gpu"
check "idle check: a GPU process is busy" 1 "$(SDCPROBE="$work/busy-gpu" idle 'exit 0')"
check "idle check: the sweep unit uses it" 1 \
  "$(grep -c -- '--idle-check /usr/lib/sdcprobe/idle-check.sh$' "$deploy/systemd/sdcprobe-sweep.service")"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all gate checks passed"
