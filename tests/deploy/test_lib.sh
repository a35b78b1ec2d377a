# Helpers shared by the deploy tests that start real daemons: sourced, never run. The sourcing
# script keeps `pids` (the daemons it started, by pid) for stop_pids, and sets failures=0 once its
# daemons are up (until then an unset count means "show the logs").

check() {  # NAME EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1"
    echo "  expected: $(printf '%q' "$2")"
    echo "  actual:   $(printf '%q' "$3")"
    failures=$((failures + 1))
  else
    echo "ok: $1"
  fi
}

# Polls until COMMAND succeeds; a generous limit only ends a broken run (no timing is asserted).
wait_for() {  # WHAT COMMAND...
  local what="$1"
  shift
  for _ in $(seq 600); do
    "$@" && return 0
    sleep 0.5
  done
  echo "FAIL: gave up waiting for $what"
  failures=$((failures + 1))
  return 1
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Stops every pid in `pids`: TERM, up to 10 s to exit, then KILL.
stop_pids() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null
  done
  wait 2>/dev/null
}

# The Slurm tests' daemons, on localhost only, in $work (the caller's scratch directory).

# munged with its own key and socket ($work/munge.sock); its pid joins `pids`.
start_munged() {
  dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
  chmod 400 "$work/munge.key"
  munged -F -f --key-file="$work/munge.key" --socket="$work/munge.sock" --pid-file="$work/munged.pid" \
    --log-file="$work/munged.log" --seed-file="$work/munged.seed" 2>> "$work/munged.log" &
  pids+=($!)
}

# Writes $SLURM_CONF for one node ($node) on $ctld_port and $slurmd_port: root daemons, munge, no
# cgroups, state and logs in $work; EXTRA (accounting, gates) goes before the node and partition.
write_slurm_conf() {  # CLUSTER EXTRA
  cat > "$SLURM_CONF" <<EOF2
ClusterName=$1
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge.sock
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/linear
MpiDefault=none
ReturnToService=2
$2
NodeName=$node NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF2
}
