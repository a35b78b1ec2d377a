# sdcprobe's Slurm gate, sourced by prolog.sh and healthcheck.sh.
#
# Runs `sdcprobe qualify --level quick --format npd`. On a fault (exit 1) it drains this node with the
# verdict line as the reason, e.g. "SDC: GPU-5f1e… gemm.exact.bf16". scontrol is run from an argument
# vector, never through a shell or eval, and the reason is reduced to a safe character set, so
# nothing a device or driver reports can become a command. A reason another tool set (one not
# starting with "SDC:") is left untouched, and so is the node.
#
# Installed in /usr/lib/sdcprobe/ with prolog.sh and healthcheck.sh.
# Settings: environment variables, or /etc/default/sdcprobe (sourced when present; it wins).
#   SDCPROBE                          sdcprobe binary (default: /usr/bin/sdcprobe)
#   SDCPROBE_ARGS                     extra qualify arguments, split on spaces (e.g. --backend cuda)
#   SDCPROBE_LEVEL                    qualify level (default: quick, which fits Slurm's 60 s)
#   SDCPROBE_DRY_RUN=1                print the scontrol command instead of running it
#   SDCPROBE_DRAIN_ON_COULD_NOT_TEST=1  also drain when sdcprobe could not test (exit 2); default: log only
#   SCONTROL                          scontrol binary (default: scontrol on PATH)
#   NODE                              this node (default: $SLURMD_NODENAME, else `hostname -s`)
#   SDCPROBE_LOG_SOCKET               syslog socket for logger (default: the system's, /dev/log)
#
# slurmd discards a HealthCheckProgram's output, so every message also goes to syslog (the journal)
# through logger, tagged sdcprobe-gate: "could not test" (e.g. a missing binary, exit 127) is never
# silent.

if [ -r /etc/default/sdcprobe ]; then
  # shellcheck disable=SC1091
  . /etc/default/sdcprobe
fi

sdcprobe_log() {
  echo "sdcprobe-gate: $*" >&2
  logger ${SDCPROBE_LOG_SOCKET:+--socket "$SDCPROBE_LOG_SOCKET"} -t sdcprobe-gate -p daemon.warning -- "$*" \
    2>/dev/null || true
}

# Returns sdcprobe's exit code: 0 pass, 1 fault (node drained unless another tool's reason is set),
# 2 could not test.
sdcprobe_gate() {
  local node="${NODE:-${SLURMD_NODENAME:-$(hostname -s)}}"
  local scontrol="${SCONTROL:-scontrol}"
  local -a extra=()
  read -r -a extra <<< "${SDCPROBE_ARGS:-}"
  local out rc=0
  out="$("${SDCPROBE:-/usr/bin/sdcprobe}" qualify --level "${SDCPROBE_LEVEL:-quick}" --format npd "${extra[@]}" 2>/dev/null)" ||
    rc=$?
  local verdict="${out%%$'\n'*}"
  local reason
  case "$rc" in
    0) return 0 ;;
    1)
      reason="$verdict"
      [[ "$reason" == "SDC: "* ]] || reason="SDC: fault found (see sdcprobe qualify --json)"
      ;;
    *)
      if [ "${SDCPROBE_DRAIN_ON_COULD_NOT_TEST:-0}" != 1 ]; then
        sdcprobe_log "could not test (exit $rc): ${verdict:-no verdict}; node left as it is"
        return 2
      fi
      reason="SDC: could not test (exit $rc)"
      ;;
  esac
  # Letters, digits and a little punctuation only; Slurm shows reasons in one line.
  reason="$(printf '%s' "$reason" | LC_ALL=C tr -cd 'A-Za-z0-9 :._,+()/-' | cut -c1-80)"

  local current
  current="$("$scontrol" -o show node "$node" 2>/dev/null | sed -n 's/.* Reason=\(.*\)$/\1/p')"
  if [ -n "$current" ] && [ "$current" != "(null)" ] && [[ "$current" != "SDC:"* ]]; then
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
