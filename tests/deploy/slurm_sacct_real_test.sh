#!/usr/bin/env bash
# `sdcprobe goodput --sacct` against real Slurm accounting: MariaDB, slurmdbd, munged, slurmctld and
# slurmd on localhost (loopback only, free ports), each started here by its own pid from a generated
# config (slurmdbd.conf next to $SLURM_CONF, where slurmdbd looks), and stopped on exit whatever
# happens. A batch job runs a loop with GoodputLog; it is requeued (scontrol requeue) while running,
# runs again and finishes. Then `sacct --duplicates --json` gives both records, and the test proves:
#   sacct lists two records of the job (the requeue and the finish);
#   the ledger's queue equals the hand calculation from sacct's Eligible, Start and End
#   (docs/goodput.md, "Slurm accounting"), and the labels sum to the wall time from the first
#   Eligible to the last End.
# Needs root, Debian's slurm-wlm, slurmdbd, munge and mariadb-server; exits 77 (skipped) without
# them. Usage: slurm_sacct_real_test.sh SDCPROBE PYTHON_PACKAGE_DIR
set -uo pipefail
sdcprobe="$(readlink -f "$1")"
package="$(readlink -f "$2")"
for tool in munged slurmctld slurmd slurmdbd sacct sacctmgr sbatch scontrol squeue mariadbd mariadb-install-db \
  mariadb python3; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/install-deps.sh --test)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: slurmd needs root"; exit 77; }

work="$(mktemp -d /tmp/sdcprobe-sacct.XXXXXX)"
chmod 755 "$work"
pids=()
source "$(dirname "$(readlink -f "$0")")/test_lib.sh"
stop_all() {
  stop_pids
  if [ "${failures:-1}" -ne 0 ]; then
    tail -n 15 "$work"/*.log 2>/dev/null
  fi
  rm -rf "$work"
}
trap stop_all EXIT
trap 'exit 1' INT TERM

failures=0

node="$(hostname -s)"
db_port="$(free_port)"
dbd_port="$(free_port)"
ctld_port="$(free_port)"
slurmd_port="$(free_port)"
export SLURM_CONF="$work/slurm.conf"
mkdir -p "$work/state" "$work/spool" "$work/job"

# MariaDB: a throw-away datadir, loopback TCP only, no grant tables (nothing but slurmdbd reaches it).
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

# With slurmdbd, AccountingStoragePass is the munge socket that clients (sacct, sacctmgr) use to reach it.
write_slurm_conf sdcprobe-sacct "AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
AccountingStoragePass=$work/munge.sock"

wait_for "munged" test -S "$work/munge.sock" || exit 1
wait_for "mariadb" mariadb --no-defaults --socket="$work/db.sock" -e 'select 1' >/dev/null 2>&1 || exit 1
slurmdbd -D >> "$work/slurmdbd.log" 2>&1 &
pids+=($!)
wait_for "slurmdbd" sacctmgr -i list cluster >/dev/null 2>&1 || exit 1
sacctmgr -i add cluster sdcprobe-sacct > "$work/sacctmgr.log" 2>&1
slurmctld -D -i -f "$SLURM_CONF" >> "$work/slurmctld.log" 2>&1 &
pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" >> "$work/slurmd.log" 2>&1 &
pids+=($!)
is_idle() { [ "$(sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]; }
wait_for "$node to register" is_idle || exit 1

# The job: a loop with GoodputLog. The first run logs steps and then waits in a step until it is
# requeued; the second (SLURM_RESTART_COUNT=1) restores, runs two steps and ends the job.
cat > "$work/job.sh" <<EOF2
#!/bin/bash
exec /usr/bin/python3 - <<'PY'
import os, sys, time
sys.path.insert(0, "$package")
from sdcprobe import GoodputLog
log = GoodputLog("$work/job/events.rank0.jsonl", rank=0)
attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
log.attempt(attempt)
if attempt == 0:
    for i in range(3):
        with log.step(i):
            time.sleep(0.1)
    with log.checkpoint(2):
        pass
    log.commit(2)
    open("$work/job/running", "w").close()
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
chmod 755 "$work/job.sh"
job=$(sbatch --parsable --requeue -N1 -w "$node" -o "$work/job/out.txt" "$work/job.sh")
wait_for "the first run" test -e "$work/job/running" || exit 1
scontrol requeue "$job"
# A requeued batch job waits (BeginTime) before it is eligible again; the operator's StartTime=now
# ends the wait so the test does not sleep. sacct records the new Eligible either way.
is_pending() { [ "$(squeue -h -j "$job" -o %T 2>/dev/null)" = PENDING ]; }
wait_for "the requeue" is_pending || exit 1
scontrol update JobId="$job" StartTime=now
is_done() { [ -z "$(squeue -h -j "$job" 2>/dev/null)" ]; }
wait_for "the job to finish" is_done || exit 1
has_two() {
  sacct -j "$job" --duplicates --json > "$work/sacct.json" 2>> "$work/sacct.log" &&
    python3 - "$work/sacct.json" <<'PY'
import json, sys
records = json.load(open(sys.argv[1]))["jobs"]
sys.exit(0 if len(records) == 2 and all(r["time"]["end"] for r in records) else 1)
PY
}
wait_for "both records in the accounting" has_two
check "sacct: two records, the requeued one and the finished one" 2 \
  "$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["jobs"]))' "$work/sacct.json")"

"$sdcprobe" goodput --json --sacct "$work/sacct.json" "$work/job/events.rank0.jsonl" > "$work/goodput.json" \
  2> "$work/goodput.log"
check "sdcprobe goodput --sacct exit" 0 "$?"
cat "$work/goodput.log"
# The hand calculation, from sacct's records (whole seconds) and the loop's log (docs/goodput.md,
# "Slurm accounting"): queue = (Start1 - Eligible1) + (Start2 - release1), where release1 is End1,
# or the loop's last event of that allocation when it lies in End1's second.
python3 - "$work/sacct.json" "$work/job/events.rank0.jsonl" "$work/goodput.json" <<'PY'
import json, sys
S = 10**9
records = sorted(json.load(open(sys.argv[1]))["jobs"], key=lambda r: r["time"]["start"])
events = [json.loads(line) for line in open(sys.argv[2])]
report = json.load(open(sys.argv[3]))
(e1, s1, n1), (e2, s2, n2) = [(r["time"]["eligible"] * S, r["time"]["start"] * S, r["time"]["end"] * S)
                              for r in records]
release1 = max([n1] + [e["t"] for e in events if e["t"] < s2])
queue = (s1 - e1) + (s2 - release1)
print("sacct: eligible %d start %d end %d; eligible %d start %d end %d (s)" % (
    e1 // S, s1 // S, n1 // S, e2 // S, s2 // S, n2 // S))
print("ledger queue %d ns, hand %d ns; sacct's whole seconds give %d s" % (
    report["categories"]["queue"]["ns"], queue, (s1 - e1 + s2 - n1) // S))
ok = report["categories"]["queue"]["ns"] == queue and report["wall_ns"] >= n2 - e1
ok = ok and report["wall_ns"] == report["productive_ns"] + sum(c["ns"] for c in report["categories"].values())
sys.exit(0 if ok else 1)
PY
check "queue from sacct equals the hand calculation" 0 "$?"
[ "$failures" -eq 0 ] && echo "PASS" || echo "$failures check(s) failed"
exit $((failures > 0))
