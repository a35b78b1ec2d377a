# sdcprobe's Slurm gate, sourced by prolog.sh and healthcheck.sh.
#
# Runs `sdcprobe qualify --level quick --format npd`. On a fault (exit 1) it drains this node with the
# verdict line as the reason, e.g. "SDC: GPU-5f1e… gemm.exact.bf16". When sdcprobe could not test
# (exit 2, or it could not start at all: 126, 127, a signal) it drains with "sdcprobe: could not test:
# <why>" once that has happened SDCPROBE_COULD_NOT_TEST_AFTER times in a row (the prolog: once), or,
# with SDCPROBE_COULD_NOT_TEST=keep, only logs it. scontrol is run from an argument vector, never
# through a shell or eval, and the reason is reduced to a safe character set, so nothing a device or
# driver reports can become a command. A reason another tool set (one not starting with "SDC:" or
# "sdcprobe:") is left untouched, and so is the node.
#
# Installed in /usr/lib/sdcprobe/ with prolog.sh and healthcheck.sh.
# Settings: environment variables, or /etc/default/sdcprobe (sourced when present; it wins).
#   SDCPROBE                          sdcprobe binary (default: /usr/bin/sdcprobe)
#   SDCPROBE_ARGS                     extra qualify arguments, split on spaces (e.g. --backend cuda)
#   SDCPROBE_LEVEL                    qualify level (default: quick, which fits Slurm's 60 s)
#   EXPECT_GPUS                       GPUs CUDA must show (qualify --expect-gpus); default: every GPU
#                                     on the PCI bus
#   SDCPROBE_COULD_NOT_TEST=drain     drain when sdcprobe could not test (default); keep: log only
#   SDCPROBE_COULD_NOT_TEST_AFTER=3   ... after this many could-not-tests in a row (the prolog: 1,
#                                     SDCPROBE_PROLOG_COULD_NOT_TEST_AFTER)
#   SDCPROBE_STATE_DIR                where the count is kept (default: /var/lib/sdcprobe)
#   SDCPROBE_DRY_RUN=1                print the scontrol command instead of running it
#   SCONTROL                          scontrol binary (default: scontrol on PATH)
#   NODE                              this node (default: $SLURMD_NODENAME, else `hostname -s`)
#   SDCPROBE_LOG_SOCKET               syslog socket for logger (default: the system's, /dev/log)
#
# slurmd discards a HealthCheckProgram's output, so every message also goes to syslog (the journal)
# through logger, tagged sdcprobe-gate.

if [ -r /etc/default/sdcprobe ]; then
  # shellcheck disable=SC1091
  . /etc/default/sdcprobe
fi

sdcprobe_log() {
  echo "sdcprobe-gate: $*" >&2
  logger ${SDCPROBE_LOG_SOCKET:+--socket "$SDCPROBE_LOG_SOCKET"} -t sdcprobe-gate -p daemon.warning -- "$*" \
    2>/dev/null || true
}

# Letters, digits and a little punctuation only, one line of at most 80 characters.
sdcprobe_safe_reason() {
  printf '%s' "$1" | LC_ALL=C tr -cd 'A-Za-z0-9 :._,+()/_-' | cut -c1-80
}

# Why sdcprobe could not test, from its exit code RC and its npd verdict VERDICT.
sdcprobe_could_not_test_why() {  # RC VERDICT
  case "$2" in
    "UNKNOWN: could not test: "*) printf '%s' "${2#UNKNOWN: could not test: }" ;;
    "UNKNOWN: "*) printf '%s' "${2#UNKNOWN: }" ;;
    *)
      case "$1" in
        126) printf 'exit 126, the binary cannot be run' ;;
        127) printf 'exit 127, the binary or a library it needs is missing' ;;
        *) if [ "$1" -gt 128 ]; then printf 'killed by signal %s' $(($1 - 128)); else printf 'exit %s' "$1"; fi ;;
      esac
      ;;
  esac
}

# Counts could-not-tests in a row for GATE in the state directory; prints the new count, or nothing
# when it cannot be kept there. RESET (a test ran) starts again from 0.
sdcprobe_could_not_test_count() {  # GATE reset|add
  local dir="${SDCPROBE_STATE_DIR:-/var/lib/sdcprobe}"
  local file="$dir/could-not-test.$1"
  if [ "$2" = reset ]; then
    rm -f "$file" 2>/dev/null
    return 0
  fi
  local n=0
  [ -r "$file" ] && n="$(head -c 16 "$file" | tr -cd 0-9)"
  n=$((${n:-0} + 1))
  mkdir -p "$dir" 2>/dev/null
  { printf '%s\n' "$n" > "$file.tmp" && mv -f "$file.tmp" "$file"; } 2>/dev/null && echo "$n"
}

# Runs the gate as GATE (healthcheck | prolog; default healthcheck). Returns sdcprobe's exit code: 0
# pass, 1 fault (node drained unless another tool's reason is set), 2 could not test (drained when
# the setting and the count say so; 3 when it drained).
sdcprobe_gate() {
  local gate="${1:-healthcheck}"
  local node="${NODE:-${SLURMD_NODENAME:-$(hostname -s)}}"
  local scontrol="${SCONTROL:-scontrol}"
  local -a extra=()
  read -r -a extra <<< "${SDCPROBE_ARGS:-}"
  [ -n "${EXPECT_GPUS:-}" ] && extra+=(--expect-gpus "$EXPECT_GPUS")
  local out rc=0
  out="$("${SDCPROBE:-/usr/bin/sdcprobe}" qualify --level "${SDCPROBE_LEVEL:-quick}" --format npd "${extra[@]}" 2>/dev/null)" ||
    rc=$?
  local verdict="${out%%$'\n'*}"
  local reason
  case "$rc" in
    0)
      sdcprobe_could_not_test_count "$gate" reset
      return 0
      ;;
    1)
      sdcprobe_could_not_test_count "$gate" reset
      reason="$verdict"
      [[ "$reason" == "SDC: "* ]] || reason="SDC: fault found (see sdcprobe qualify --json)"
      ;;
    *)
      local why after count
      why="$(sdcprobe_could_not_test_why "$rc" "$verdict")"
      if [ "$gate" = prolog ]; then
        after="${SDCPROBE_PROLOG_COULD_NOT_TEST_AFTER:-1}"
      else
        after="${SDCPROBE_COULD_NOT_TEST_AFTER:-3}"
      fi
      if [ "${SDCPROBE_COULD_NOT_TEST:-drain}" = keep ]; then
        sdcprobe_log "could not test (exit $rc): $why; node kept (SDCPROBE_COULD_NOT_TEST=keep)"
        return 2
      fi
      count="$(sdcprobe_could_not_test_count "$gate" add)"
      if [ -z "$count" ]; then
        # Without a count a could-not-test would never drain: drain now, never stay silent.
        sdcprobe_log "cannot keep the count in ${SDCPROBE_STATE_DIR:-/var/lib/sdcprobe}: draining at once"
        count="$after"
      fi
      if [ "$count" -lt "$after" ]; then
        sdcprobe_log "could not test (exit $rc): $why; $count of $after in a row before $node is drained"
        return 2
      fi
      reason="sdcprobe: could not test: $why"
      rc=3
      ;;
  esac
  reason="$(sdcprobe_safe_reason "$reason")"

  local current
  current="$("$scontrol" -o show node "$node" 2>/dev/null | sed -n 's/.* Reason=\(.*\)$/\1/p')"
  if [ -n "$current" ] && [ "$current" != "(null)" ] && [[ "$current" != "SDC:"* ]] && [[ "$current" != "sdcprobe:"* ]]; then
    sdcprobe_log "$node already has a reason from another tool ('$current'); not changing it. sdcprobe: $reason"
    return "$rc"
  fi
  local -a drain=("$scontrol" update "NodeName=$node" "State=DRAIN" "Reason=$reason")
  if [ "${SDCPROBE_DRY_RUN:-0}" = 1 ]; then
    echo "sdcprobe-gate: dry run: would run:$(printf ' %q' "${drain[@]}")"
  else
    sdcprobe_log "draining $node: $reason"
    "${drain[@]}"
  fi
  return "$rc"
}
