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
