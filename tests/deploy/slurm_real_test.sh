#!/usr/bin/env bash
# The Slurm gates against real Slurm: munged, slurmctld and slurmd on localhost (loopback only, free
# ports), each started here by its own pid from a generated config (proctrack/linuxproc, task/none,
# no cgroups), and stopped on exit whatever happens. sdcprobe runs on the CPU backend with small
# sizes; faults are injected. Proves with real sinfo / scontrol / srun:
#   a healthy HealthCheckProgram leaves the node idle; an injected fault drains it with the SDC:
#   reason; another tool's reason is untouched; the prolog with a fault keeps srun off the node (and
#   a batch job is requeued, held); a missing binary is logged to syslog (a socket this test
#   listens on, through logger --socket), and drains the node at the third check in a row.
# Needs root and Debian's slurm-wlm and munge; exits 77 (skipped) without them.
# Usage: slurm_real_test.sh SDCPROBE DEPLOY_DIR
set -uo pipefail
sdcprobe="$(readlink -f "$1")"
deploy="$(readlink -f "$2")"
for tool in munged slurmctld slurmd sinfo scontrol srun sbatch squeue scancel logger python3 flock; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/install-deps.sh --test)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: slurmd needs root"; exit 77; }

work="$(mktemp -d /tmp/sdcprobe-slurm.XXXXXX)"
chmod 755 "$work"
pids=()
source "$(dirname "$(readlink -f "$0")")/test_lib.sh"
stop_all() {
  local pid
  # The gates slurmd started, each in its own process group (with their sdcprobe), then the daemons.
  for pid in $(cat "$work/gate.pids" 2>/dev/null); do kill -- "-$pid" 2>/dev/null; done
  stop_pids
  if [ "${failures:-1}" -ne 0 ] && [ -n "${show_logs:-}" ]; then
    tail -n 20 "$work"/*.log 2>/dev/null
  fi
  rm -rf "$work"
}
trap stop_all EXIT
trap 'exit 1' INT TERM

failures=0

node="$(hostname -s)"
ctld_port="$(free_port)"
slurmd_port="$(free_port)"
export SLURM_CONF="$work/slurm.conf"
mkdir -p "$work/state" "$work/spool"

# munge, with its own key and socket.
start_munged

# syslog: a datagram socket this test reads, as journald or rsyslog would.
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "ab", buffering=0) as out:
    while True:
        out.write(s.recv(65536) + b"\n")
' "$work/log.sock" "$work/syslog.txt" &
pids+=($!)

# The gates as slurmd runs them, with this test's settings: slurmd gives them no environment.
gate_env="export SLURM_CONF='$SLURM_CONF' PATH=/usr/sbin:/usr/bin:/sbin:/bin NODE='$node'
export SDCPROBE='$sdcprobe' SDCPROBE_LOG_SOCKET='$work/log.sock' SDCPROBE_STATE_DIR='$work/state'
# Small sizes and a watchdog within slurmd's 60 s: a loaded machine must not turn into a device_error.
export SDCPROBE_ARGS='--backend cpu --cpu-devices 1 --size 16K --iterations 8 --probe-timeout 50'
fault=' --inject device=0,probe=alu.fma32,model=bitflip,bit=7'"
cat > "$work/healthcheck" <<EOF2
#!/usr/bin/env bash
echo \$\$ >> '$work/gate.pids'
# One check at a time: slurmd starts one every HealthCheckInterval even while the last still runs.
exec 9> '$work/healthcheck.lock'
flock -n 9 || exit 0
$gate_env
[ -e '$work/hc-fault' ] && SDCPROBE_ARGS+="\$fault"
[ -e '$work/missing' ] && SDCPROBE='$work/no-such-sdcprobe'
'$deploy/slurm/healthcheck.sh' 2>> '$work/gates.log'
rc=\$?
echo "\$rc" >> '$work/healthchecks'
exit \$rc
EOF2
cat > "$work/prolog" <<EOF2
#!/usr/bin/env bash
echo \$\$ >> '$work/gate.pids'
$gate_env
[ -e '$work/prolog-fault' ] && SDCPROBE_ARGS+="\$fault"
exec '$deploy/slurm/prolog.sh' 2>> '$work/gates.log'
EOF2
chmod 755 "$work/healthcheck" "$work/prolog"

write_slurm_conf sdcprobe-test "AccountingStorageType=accounting_storage/none
HealthCheckProgram=$work/healthcheck
HealthCheckInterval=5
HealthCheckNodeState=ANY
Prolog=$work/prolog
PrologFlags=Alloc"

wait_for "munged" test -S "$work/munge.sock" || exit 1
slurmctld -D -i -f "$SLURM_CONF" >> "$work/slurmctld.log" 2>&1 &
pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" >> "$work/slurmd.log" 2>&1 &
pids+=($!)
show_logs=1

state() { sinfo -h -n "$node" -o %T 2>/dev/null; }
reason() { scontrol -o show node "$node" 2>/dev/null | sed -n 's/.* Reason=\(.*\)$/\1/p' | sed 's/ \[[^]]*\]$//'; }
checks() { wc -l < "$work/healthchecks" 2>/dev/null || echo 0; }
checks_past() { [ "$(checks)" -ge "$1" ]; }
is_idle() { [ "$(state)" = idle ]; }
is_drained() { [[ "$(state)" == drain* ]]; }
resume() { scontrol update NodeName="$node" State=RESUME; wait_for "$node idle" is_idle; }

uuid="$("$sdcprobe" --backend cpu devices --json | grep -o '"uuid": "[^"]*"' | head -1 | cut -d'"' -f4)"
wait_for "$node to register" is_idle || exit 1

# 1. A healthy check leaves the node idle.
n=$(checks)
wait_for "two health checks" checks_past $((n + 2))
check "healthy HealthCheckProgram: node idle" idle "$(state)"
check "healthy HealthCheckProgram: no reason" "" "$(reason)"

# 2. An injected fault drains the node with the SDC: reason.
touch "$work/hc-fault"
wait_for "the drain" is_drained
check "fault: drain reason" "SDC: $uuid alu.fma32" "$(reason)"
rm -f "$work/hc-fault"
n=$(checks)
wait_for "a passing health check" checks_past $((n + 1))
check "a passing check does not resume the node" 1 "$(is_drained && echo 1)"

# 3. Another tool's reason is untouched.
resume
scontrol update NodeName="$node" State=DRAIN Reason="ops: replacing a fan"
touch "$work/hc-fault"
n=$(checks)
wait_for "two health checks with the fault" checks_past $((n + 2))
check "another tool's reason is untouched" "ops: replacing a fan" "$(reason)"
rm -f "$work/hc-fault"

# 4. The prolog with a fault keeps srun off the node.
resume
touch "$work/prolog-fault"
timeout 300 srun -N1 -w "$node" -t 1 touch "$work/job-ran" > "$work/srun.log" 2>&1
srun_rc=$?
check "prolog fault: srun fails" 1 "$([ "$srun_rc" -ne 0 ] && echo 1)"
check "prolog fault: the job never ran" "" "$(ls "$work/job-ran" 2>/dev/null)"
wait_for "the prolog's drain" is_drained
check "prolog fault: drain reason" "SDC: $uuid alu.fma32" "$(reason)"
echo "what the srun user saw: $(tr '\n' ' ' < "$work/srun.log")"

# A batch job is requeued, and held (Priority=0), not run elsewhere: docs/operating.md says so.
resume
job="$(sbatch --parsable -N1 -w "$node" -t 1 -o /dev/null --wrap "touch '$work/batch-ran'")"
job_field() { scontrol -o show job "$job" 2>/dev/null | grep -o " $1=[^ ]*" | cut -d= -f2; }
is_held() { [ "$(job_field JobState)" = PENDING ] && [ "$(job_field Priority)" = 0 ]; }
wait_for "the batch job to be requeued and held" is_held
check "prolog fault: the batch job is requeued and held" "PENDING 0" "$(job_field JobState) $(job_field Priority)"
check "prolog fault: the batch job never ran" "" "$(ls "$work/batch-ran" 2>/dev/null)"
echo "what squeue shows for it: $(squeue -h -j "$job" -o '%T %r')"
scancel "$job"
rm -f "$work/prolog-fault"

# 5. A missing binary: syslog hears of it at once, and the third check in a row drains the node.
resume
touch "$work/missing"
logged_missing() { grep -q 'sdcprobe-gate: could not test (exit 127).*1 of 3 in a row' "$work/syslog.txt" 2>/dev/null; }
wait_for "the missing binary in syslog" logged_missing
check "missing binary: logged to syslog" 1 "$(logged_missing && echo 1)"
check "missing binary: node left idle at the first check" idle "$(state)"
wait_for "the drain after three checks without the binary" is_drained
check "missing binary: drain reason" "sdcprobe: could not test: exit 127, the binary or a library it needs is missing" \
  "$(reason)"
rm -f "$work/missing"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
show_logs=
echo "all real Slurm checks passed"
