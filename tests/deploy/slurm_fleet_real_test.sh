#!/usr/bin/env bash
# `sdcprobe fleet goodput` and the goodput epilog (deploy/slurm/goodput-epilog.sh) against real
# Slurm: MariaDB, slurmdbd, munged, slurmctld and slurmd on localhost, as in slurm_sacct_real_test.sh,
# with a node of 4 GPUs (gres.conf naming plain files: no devices) and the epilog installed. Seven jobs:
#   A (2 GPUs) logs with GoodputLog and is requeued while it runs, then finishes;
#   B (4 GPUs) logs an SDC caught by the replica check (its sdc_detected) and fails;
#   C (3 GPUs, so it queues behind B) has no event log;
#   D (3 GPUs) is still running at the window's end;
#   E (2 GPUs) is cancelled while it waits behind D (its start: 22.05's null or 0, 24.11's NO_VAL);
#   F (2 GPUs) runs two ranks that each log their steps and saves, as GoodputCallback does;
#   G (2 GPUs) logs, is requeued fast: the SIGTERM of `scontrol requeue` is its fault, logged after
#     the record's End (Slurm cuts it down to the second) and at most 1 s before the next Start, the
#     second the old rule (an event belongs to the record starting at most 1 s after it) gets wrong;
#     requeued again until one requeue is that fast, then it restores and finishes.
# The test proves: the epilog wrote summaries for A, B, F and G only; the cluster's categories sum exactly
# and equal the sum of the per-job ledgers (the summaries) times their GPUs plus C's and D's
# accounting; C's queue equals sacct's own (Start - Eligible) times its GPU, E's its (End - Eligible);
# B's SDC share shows. With --logs instead of summaries, the jobs without a log folder (C, D, E) are
# counted from the accounting and listed as matching nothing.
# With SDCPROBE_RECORD_DIR set, the accounting, the logs and the window's end are copied there (how
# tests/goodput/data/fleet_22.05 was made, once; fleet_24.11 by record_slurm_trixie.sh, in a Debian 13
# root).
# Needs root, Debian's slurm-wlm, slurmdbd, munge and mariadb-server; exits 77 (skipped) without
# them. Usage: slurm_fleet_real_test.sh SDCPROBE PYTHON_PACKAGE_DIR DEPLOY_DIR
set -uo pipefail
sdcprobe="$(readlink -f "$1")"
package="$(readlink -f "$2")"
deploy="$(readlink -f "$3")"
for tool in munged slurmctld slurmd slurmdbd sacct sacctmgr sbatch scontrol squeue mariadbd mariadb-install-db \
  mariadb python3; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/install-deps.sh)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: slurmd needs root"; exit 77; }

work="$(mktemp -d /tmp/sdcprobe-fleet.XXXXXX)"
chmod 755 "$work"
pids=()
source "$(dirname "$(readlink -f "$0")")/test_lib.sh"
stop_all() {
  if [ "${#jobs[@]}" -gt 0 ]; then
    scancel --full "${jobs[@]}" 2>/dev/null
    # Let the jobs end while slurmd runs: stopped first, it leaves their slurmstepd running.
    for _ in $(seq 50); do
      [ -z "$(squeue -h -j "$(IFS=,; echo "${jobs[*]}")" 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  stop_pids
  # A step daemon that outlived them anyway (reparented to init) is ours if it reads our slurm.conf.
  for pid in $(pgrep -x slurmstepd); do
    grep -qz "^SLURM_CONF=$work/" "/proc/$pid/environ" 2>/dev/null && kill -9 "$pid"
  done
  if [ "${failures:-1}" -ne 0 ]; then
    tail -n 15 "$work"/*.log 2>/dev/null
  fi
  rm -rf "$work"
}
jobs=()
trap stop_all EXIT
trap 'exit 1' INT TERM
failures=0

node="$(hostname -s)"
db_port="$(free_port)"
dbd_port="$(free_port)"
ctld_port="$(free_port)"
slurmd_port="$(free_port)"
export SLURM_CONF="$work/slurm.conf"
mkdir -p "$work/state" "$work/spool" "$work/logs" "$work/goodput-spool"

mariadb-install-db --user=root --datadir="$work/db" --auth-root-authentication-method=normal --skip-test-db \
  > "$work/mariadb-install.log" 2>&1 || { echo "FAIL: mariadb-install-db"; exit 1; }
mariadbd --no-defaults --user=root --datadir="$work/db" --socket="$work/db.sock" --port="$db_port" \
  --bind-address=127.0.0.1 --skip-grant-tables --innodb-buffer-pool-size=16M --log-error="$work/mariadb.log" &
pids+=($!)
start_munged
cat > "$work/slurmdbd.conf" <<EOF2
AuthType=auth/munge
AuthInfo=socket=$work/munge.sock
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
PidFile=$work/slurmdbd.pid
LogFile=$work/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=root
StorageLoc=slurm_acct_db
EOF2
chmod 600 "$work/slurmdbd.conf"

# The epilog as a site would install it, with its settings in the environment.
cat > "$work/epilog.sh" <<EOF2
#!/bin/bash
export SLURM_CONF="$SLURM_CONF" SDCPROBE="$sdcprobe" SDCPROBE_GOODPUT_SPOOL="$work/goodput-spool"
export SDCPROBE_GOODPUT_LOGS="$work/logs/{job_id}/events.rank*.jsonl"
exec "$deploy/slurm/goodput-epilog.sh"
EOF2
chmod 755 "$work/epilog.sh"
write_slurm_conf sdcprobe-fleet "AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
AccountingStoragePass=$work/munge.sock
AccountingStorageTRES=gres/gpu
GresTypes=gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
Epilog=$work/epilog.sh"
# Four GPUs and two CPUs on the node (write_slurm_conf gives one), so two jobs can share it.
sed -i -e "s/^SelectType=select\/linear$//" -e "s/^NodeName=.*/NodeName=$node NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:4 State=UNKNOWN/" \
  "$SLURM_CONF"
# slurmd counts a GPU per File it can stat; with task/none nothing opens them.
mkdir -p "$work/dev"
touch "$work/dev/gpu0" "$work/dev/gpu1" "$work/dev/gpu2" "$work/dev/gpu3"
printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s/dev/gpu[0-3]\n' "$node" "$work" > "$work/gres.conf"
# Slurm 24.11's slurmd starts a cgroup plugin even with task/none and proctrack/linuxproc, and stops
# where no cgroup is mounted (a chroot); 22.05's knows no "disabled" and needs no cgroup.conf.
case "$(slurmd -V)" in
  *" 2"[0-3].*) ;;  # Debian prints "slurm-wlm 22.05.8"
  *) echo "CgroupPlugin=disabled" > "$work/cgroup.conf" ;;
esac

wait_for "munged" test -S "$work/munge.sock" || exit 1
wait_for "mariadb" mariadb --no-defaults --socket="$work/db.sock" -e 'select 1' >/dev/null 2>&1 || exit 1
# The database exists before slurmdbd starts: when slurmdbd creates it, it retries
# mysql_real_connect on the handle whose first connect failed, and on that handle MariaDB
# Connector/C 3.4 (Debian 13, Slurm 24.11) refuses every result set ("5027 Number of columns in
# result (=1) set execeeds maxmimum allowed number of columns (=0)").
mariadb --no-defaults --socket="$work/db.sock" -e 'create database slurm_acct_db' || exit 1
slurmdbd -D >> "$work/slurmdbd.log" 2>&1 &
pids+=($!)
wait_for "slurmdbd" sacctmgr -i list cluster >/dev/null 2>&1 || exit 1
sacctmgr -i add cluster sdcprobe-fleet > "$work/sacctmgr.log" 2>&1
slurmctld -D -i -f "$SLURM_CONF" >> "$work/slurmctld.log" 2>&1 &
pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" >> "$work/slurmd.log" 2>&1 &
pids+=($!)
is_idle() { [ "$(sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]; }
wait_for "$node to register" is_idle || exit 1

# A: requeued while it runs (as in slurm_sacct_real_test.sh), restored, finished.
cat > "$work/a.sh" <<EOF2
#!/bin/bash
mkdir -p "$work/logs/\$SLURM_JOB_ID"
exec /usr/bin/python3 - <<'PY'
import os, sys, time
sys.path.insert(0, "$package")
from sdcprobe import GoodputLog
job = os.environ["SLURM_JOB_ID"]
log = GoodputLog("$work/logs/%s/events.rank0.jsonl" % job, rank=0)
attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
log.attempt(attempt)
if attempt == 0:
    for i in range(3):
        with log.step(i):
            time.sleep(0.1)
    with log.checkpoint(2):
        time.sleep(0.05)
    log.commit(2)
    open("$work/a.running", "w").close()
    with log.step(3):
        time.sleep(600)  # requeued here
else:
    with log.restore(2):
        pass
    for i in range(3, 5):
        with log.step(i):
            time.sleep(0.1)
    log.job_end()
PY
EOF2
# B: the replica check finds an SDC after step 2 (its probe and sdc_detected, as ReplicaCheck writes
# them into the recorder's log) and the job stops with an error.
cat > "$work/b.sh" <<EOF2
#!/bin/bash
mkdir -p "$work/logs/\$SLURM_JOB_ID"
exec /usr/bin/python3 - <<'PY'
import os, sys, time
sys.path.insert(0, "$package")
from sdcprobe import GoodputLog
job = os.environ["SLURM_JOB_ID"]
log = GoodputLog("$work/logs/%s/events.rank0.jsonl" % job, rank=0)
log.attempt(0)
for i in range(4):
    with log.step(i):
        time.sleep(0.2)
    if i == 1:
        with log.checkpoint(1):
            time.sleep(0.05)
        log.commit(1)
log.log_event("probe_begin", probe="replica_check")
log.log_event("probe_end", probe="replica_check", verdict="fail")
log.log_event("sdc_detected", last_good_step=1, suspect_rank=1, detector="replica_check")
log.close()
sys.exit(1)
PY
EOF2
printf '#!/bin/bash\nsleep 1\n' > "$work/c.sh"
printf '#!/bin/bash\ntouch %s/d.running\nsleep 600\n' "$work" > "$work/d.sh"
printf '#!/bin/bash\nsleep 1\n' > "$work/e.sh"
# F: two ranks (processes of one task), each logging its steps, two saves and an eval.
cat > "$work/f.sh" <<EOF2
#!/bin/bash
mkdir -p "$work/logs/\$SLURM_JOB_ID"
for rank in 0 1; do
  /usr/bin/python3 - "\$rank" <<'PY' &
import os, sys, time
sys.path.insert(0, "$package")
from sdcprobe import GoodputLog
rank = int(sys.argv[1])
log = GoodputLog("$work/logs/%s/events.rank%d.jsonl" % (os.environ["SLURM_JOB_ID"], rank), rank=rank)
log.attempt(0)
for i in range(4):
    with log.step(i):
        time.sleep(0.1)
    if i % 2 == 1:
        with log.checkpoint(i):
            time.sleep(0.05)
        log.commit(i)
with log.eval():
    time.sleep(0.05)
log.job_end()
PY
done
wait
EOF2
# G: each run waits in step 2 until told to finish; Slurm's SIGTERM (a requeue) ends the run with a
# fault (the attempt's context logs it), and the next run restores step 1.
cat > "$work/g.sh" <<EOF2
#!/bin/bash
mkdir -p "$work/logs/\$SLURM_JOB_ID"
exec /usr/bin/python3 - <<'PY'
import os, signal, sys, time
sys.path.insert(0, "$package")
from sdcprobe import GoodputLog
class Requeued(Exception):
    pass
def requeued(signum, frame):
    raise Requeued()
signal.signal(signal.SIGTERM, requeued)
job = os.environ["SLURM_JOB_ID"]
log = GoodputLog("$work/logs/%s/events.rank0.jsonl" % job, rank=0)
attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
with log.attempt(attempt):
    if attempt == 0:
        for i in range(2):
            with log.step(i):
                time.sleep(0.1)
        with log.checkpoint(1):
            time.sleep(0.05)
        log.commit(1)
    else:
        with log.restore(1):
            pass
    open("$work/g.running.%d" % attempt, "w").close()
    with log.step(2):
        while not os.path.exists("$work/g.finish"):
            time.sleep(0.01)
        time.sleep(0.1)
    with log.step(3):
        time.sleep(0.1)
log.job_end()
PY
EOF2
chmod 755 "$work"/[abcdefg].sh
submit() { sbatch --parsable -N1 -w "$node" -n1 -o "$work/$1.out" "${@:2}" "$work/$1.sh"; }
a=$(submit a --requeue --gres=gpu:2); jobs+=("$a")
wait_for "A's first run" test -e "$work/a.running" || exit 1
scontrol requeue "$a"
is_pending() { [ "$(squeue -h -j "$1" -o %T 2>/dev/null)" = PENDING ]; }
wait_for "A's requeue" is_pending "$a" || exit 1
scontrol update JobId="$a" StartTime=now
b=$(submit b --gres=gpu:4); jobs+=("$b")
c=$(submit c --gres=gpu:3); jobs+=("$c")
is_done() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }
for j in "$a" "$b" "$c"; do wait_for "job $j to finish" is_done "$j" || exit 1; done
f=$(submit f --gres=gpu:2); jobs+=("$f")
wait_for "F to finish" is_done "$f" || exit 1
# G: requeued and started again at once (StartTime=now as soon as it waits), until its fault lies
# after the requeued record's End and the next record starts at most 1 s after the fault (the
# requeue, its epilog and the restart take one to two seconds here).
g=$(submit g --requeue --gres=gpu:2); jobs+=("$g")
fast_requeue() {  # RUN: 0 when run RUN-1's fault and run RUN's start are that close, 1 if not, 2 not yet known
  sacct -j "$g" --duplicates --json > "$work/g.sacct.json" 2>> "$work/sacct.log" || return 2
  python3 - "$work/g.sacct.json" "$work/logs/$g/events.rank0.jsonl" "$1" <<'PY'
import json, sys
S = 10**9
records = sorted((r for r in json.load(open(sys.argv[1]))["jobs"] if r["time"]["start"]), key=lambda r: r["time"]["start"])
run = int(sys.argv[3])
if len(records) <= run or not records[run - 1]["time"]["end"]:
    sys.exit(2)
faults = [json.loads(l)["t"] for l in open(sys.argv[2]) if '"fault_detected"' in l]
if len(faults) < run:
    sys.exit(2)
end, start, fault = records[run - 1]["time"]["end"], records[run]["time"]["start"], faults[run - 1]
print("G's run %d: End %d, fault %.3f, next Start %d" % (run - 1, end, fault / S, start))
sys.exit(0 if end * S <= fault < (end + 1) * S and (start - 1) * S <= fault else 1)
PY
}
for run in $(seq 1 20); do
  wait_for "G's run $((run - 1))" test -e "$work/g.running.$((run - 1))" || exit 1
  # Just after a second begins, so that the next run, a second or two later, can start in the next one.
  python3 -c 'import time; time.sleep(1.05 - time.time() % 1)'
  scontrol requeue "$g"
  for _ in $(seq 2000); do
    state="$(squeue -h -j "$g" -o %T 2>/dev/null)"
    [ "$state" = RUNNING ] && break
    [ "$state" = PENDING ] && scontrol update JobId="$g" StartTime=now 2>/dev/null
    sleep 0.01
  done
  wait_for "G's run $run" test -e "$work/g.running.$run" || exit 1
  for _ in $(seq 600); do
    fast_requeue "$run"
    verdict=$?
    [ "$verdict" -ne 2 ] && break
    sleep 0.5
  done
  [ "$verdict" -eq 0 ] && break
done
check "G was once requeued within the second of its fault" 0 "$verdict"
rm -f "$work/goodput-spool/$g.json"  # the requeues' epilogs' summaries; the last run's is awaited below
touch "$work/g.finish"
wait_for "G to finish" is_done "$g" || exit 1
d=$(submit d --gres=gpu:3); jobs+=("$d")
wait_for "D to run" test -e "$work/d.running" || exit 1
e=$(submit e --gres=gpu:2); jobs+=("$e")
waits_for_resources() { [ "$(squeue -h -j "$e" -o %T:%r 2>/dev/null)" = PENDING:Resources ]; }
wait_for "E to wait behind D" waits_for_resources || exit 1
sleep 2
scancel "$e"
wait_for "E's cancel" is_done "$e" || exit 1
for j in "$a" "$b" "$f" "$g"; do wait_for "the epilog's summary of job $j" test -s "$work/goodput-spool/$j.json" || exit 1; done
check "the epilog wrote no summary for the jobs without a log" "" "$(ls "$work/goodput-spool" | grep -E "^($c|$e).json")"
until_s=$(( $(date +%s) + 1 ))
sleep 2
until=$(date -u -d "@$until_s" +%Y-%m-%dT%H:%M:%SZ)
all_recorded() {
  sacct --allocations --duplicates --allusers --json -S now-1hour > "$work/sacct.json" 2>> "$work/sacct.log" &&
    python3 - "$work/sacct.json" "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$run" <<'PY'
import json, sys
records = json.load(open(sys.argv[1]))["jobs"]
ids = [r["job_id"] for r in records]
ok = ids.count(int(sys.argv[2])) == 2 and all(int(j) in ids for j in sys.argv[3:9])
ok = ok and ids.count(int(sys.argv[8])) == int(sys.argv[9]) + 1
ok = ok and all(r["time"]["end"] or r["job_id"] == int(sys.argv[5]) for r in records)
sys.exit(0 if ok else 1)
PY
}
wait_for "all records in the accounting" all_recorded || exit 1

"$sdcprobe" fleet goodput --sacct "$work/sacct.json" --until "$until" --by job --json "$work/fleet.json" \
  --prom "$work/fleet.prom" "$work/goodput-spool" > "$work/fleet.txt" 2> "$work/fleet.log"
check "sdcprobe fleet goodput exit" 0 "$?"
cat "$work/fleet.txt" "$work/fleet.log"
python3 - "$work/sacct.json" "$work/goodput-spool" "$work/fleet.json" "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$until_s" <<'PY'
import json, os, sys
S = 10**9
records = json.load(open(sys.argv[1]))["jobs"]
fleet = json.load(open(sys.argv[3]))
a, b, c, d, e, f, g_job, until = (int(x) for x in sys.argv[4:])
def t(r, k):
    v = r["time"][k]
    return v["number"] if isinstance(v, dict) and v.get("set", True) else (v if isinstance(v, int) else 0)
def gpus(r):  # allocated, else requested (a record that never ran)
    for kind in ("allocated", "requested"):
        n = sum(x["count"] for x in r["tres"][kind] if x["type"] == "gres" and x["name"] == "gpu")
        if n:
            return n
    return 0
cats = ["queue", "detection_teardown", "restart_warmup", "rework", "blocking_overhead"]
expect = {k: 0 for k in cats + ["productive", "uninstrumented_failed_run", "uninstrumented_other_run"]}
sdc = {k: 0 for k in cats}
for job in (a, b, f, g_job):
    s = json.load(open(os.path.join(sys.argv[2], "%d.json" % job)))
    g = max(gpus(r) for r in records if r["job_id"] == job)
    expect["productive"] += s["productive_ns"] * g
    for k in cats:
        expect[k] += s["categories"][k]["ns"] * g
        sdc[k] += s["categories"][k]["sdc_ns"] * g
    if job == b:
        print("B's SDC time lost: %d ns" % s["sdc_lost_ns"])
        b_sdc = s["sdc_lost_ns"]
rc = [r for r in records if r["job_id"] == c][0]
c_queue = (t(rc, "start") - t(rc, "eligible")) * S * gpus(rc)
expect["queue"] += c_queue
expect["uninstrumented_other_run"] += (t(rc, "end") - t(rc, "start")) * S * gpus(rc)
rd = [r for r in records if r["job_id"] == d][0]
expect["queue"] += (t(rd, "start") - t(rd, "eligible")) * S * gpus(rd)
expect["uninstrumented_other_run"] += (until - t(rd, "start")) * S * gpus(rd)
re = [r for r in records if r["job_id"] == e][0]
print("E, cancelled while pending: eligible %s start %r end %s" % (t(re, "eligible"), re["time"]["start"], t(re, "end")))
e_queue = (t(re, "end") - t(re, "eligible")) * S * gpus(re)
expect["queue"] += e_queue
got = fleet["gpu_ns"]
ok = True
for k in cats:
    ok &= int(got[k]["gpu_ns"]) == expect[k] and int(got[k]["sdc_gpu_ns"]) == sdc[k]
for k in ("uninstrumented_failed_run", "uninstrumented_other_run"):
    ok &= int(got[k]["gpu_ns"]) == expect[k]
ok &= int(got["productive"]) == expect["productive"]
wall = int(got["wall"])
ok &= wall == sum(expect.values())
ok &= fleet["jobs"]["from_summaries"] == 4 and fleet["jobs"]["from_sacct"] == 3
ok &= e_queue > 0
ok &= b_sdc > 0 and int(got["rework"]["sdc_gpu_ns"]) + int(got["detection_teardown"]["sdc_gpu_ns"]) > 0
print("cluster wall %d GPU-ns = sum of the jobs %d; C's queue from sacct %d GPU-ns" % (wall, sum(expect.values()), c_queue))
print("fleet:", {k: got[k] for k in got}, "expected:", expect)
# C's queue is its own line in the work list when grouped by job.
queue = [w for w in fleet["work_list"] if w["category"] == "queue"][0]
cq = [x for x in queue["top"] if x["job"] == str(c)]
ok &= not c_queue or (cq and abs(cq[0]["gpu_hours"] * 3600 * S - c_queue) < 1)
sys.exit(0 if ok else 1)
PY
check "the cluster's categories are the jobs' ledgers times their GPUs, C's queue is sacct's" 0 "$?"
grep -q '^sdcprobe_cluster_ettr ' "$work/fleet.prom"
check "the Prometheus textfile has the cluster's ETTR" 0 "$?"

# The logs themselves, by the documented template: C, D and E have no folder, and match nothing.
"$sdcprobe" fleet goodput --sacct "$work/sacct.json" --until "$until" --logs "$work/logs/{job_id}/events.rank*.jsonl" \
  --json "$work/fleet-logs.json" > "$work/fleet-logs.txt" 2> "$work/fleet-logs.log"
check "sdcprobe fleet goodput --logs exit" 0 "$?"
cat "$work/fleet-logs.txt" "$work/fleet-logs.log"
check "the jobs whose logs matched nothing" "3 $c $d $e" "$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"]
print(j["logs_matched_nothing"], *sorted(j["logs_matched_nothing_first"]))' "$work/fleet-logs.json")"

if [ -n "${SDCPROBE_RECORD_DIR:-}" ]; then
  mkdir -p "$SDCPROBE_RECORD_DIR"
  cp "$work/sacct.json" "$SDCPROBE_RECORD_DIR/sacct.json"
  cp -r "$work/logs" "$SDCPROBE_RECORD_DIR/"
  echo "$until" > "$SDCPROBE_RECORD_DIR/until"
  printf 'a=%s b=%s c=%s d=%s e=%s f=%s g=%s\n' "$a" "$b" "$c" "$d" "$e" "$f" "$g" > "$SDCPROBE_RECORD_DIR/jobs"
fi
[ "$failures" -eq 0 ] && echo "PASS" || echo "$failures check(s) failed"
exit $((failures > 0))
