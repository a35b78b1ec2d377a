#!/usr/bin/env bash
# Slurm epilog (slurm.conf: Epilog=/usr/lib/sdcprobe/goodput-epilog.sh, on the node where the job's
# logs are; or EpilogSlurmctld where they are on shared storage): computes the finished job's goodput
# ledger where its logs are and drops it into a spool directory, so that `sdcprobe fleet goodput
# --sacct sacct.json SPOOL` only sums summaries (docs/goodput.md, "Cluster").
# Settings (environment, or /etc/default/sdcprobe):
#   SDCPROBE_GOODPUT_LOGS   the job's event logs, {job_id} replaced (default
#                           /shared/goodput/{job_id}/events.rank*.jsonl)
#   SDCPROBE_GOODPUT_SPOOL  where summaries go, one JOBID.json each (default /var/spool/sdcprobe/goodput)
#   SDCPROBE                the binary (default: sdcprobe on PATH)
# A job without logs writes nothing: `fleet goodput` counts it from the accounting alone. The summary
# is written atomically (a temporary file renamed), so the summer never reads half of one. Never
# fails the job: errors go to syslog (journalctl -t sdcprobe-goodput) and the exit code is 0.
set -uo pipefail
[ -r /etc/default/sdcprobe ] && . /etc/default/sdcprobe
job="${SLURM_JOB_ID:-}"
[[ "$job" =~ ^[0-9]+$ ]] || exit 0
logs="${SDCPROBE_GOODPUT_LOGS:-/shared/goodput/{job_id\}/events.rank*.jsonl}"
spool="${SDCPROBE_GOODPUT_SPOOL:-/var/spool/sdcprobe/goodput}"
sdcprobe="${SDCPROBE:-sdcprobe}"
pattern="${logs//\{job_id\}/$job}"
say() { logger -t sdcprobe-goodput -- "$*" 2>/dev/null; echo "sdcprobe-goodput: $*" >&2; }
compgen -G "$pattern" >/dev/null || exit 0
mkdir -p "$spool" || { say "job $job: cannot create $spool"; exit 0; }
args=(goodput --json --job-id "$job")
# Slurm's records give the queue; at epilog time the last record may not have its end yet, which the
# ledger reads as still running.
acct="$(mktemp "$spool/.$job.sacct.XXXXXX")"
tmp="$(mktemp "$spool/.$job.json.XXXXXX")"
trap 'rm -f "$acct" "$tmp"' EXIT
if sacct -j "$job" --duplicates --json > "$acct" 2>/dev/null; then
  args+=(--sacct "$acct")
fi
if "$sdcprobe" "${args[@]}" "$pattern" > "$tmp" 2> "$tmp.err" || \
   { [ "${#args[@]}" -gt 4 ] && "$sdcprobe" goodput --json --job-id "$job" "$pattern" > "$tmp" 2> "$tmp.err"; }; then
  chmod 644 "$tmp" && mv -f "$tmp" "$spool/$job.json"
else
  say "job $job: $(head -c 500 "$tmp.err")"
fi
rm -f "$tmp.err"
exit 0
