#!/usr/bin/env bash
# The sweep's idle check on a Slurm node (sdcprobe sweep --idle-check /usr/lib/sdcprobe/idle-check.sh):
# exit 0 only when squeue answers and lists no running job on this node. A failing squeue (slurmctld
# down, no munge, no binary) means busy: a standard pass must never run beside a job.
set -uo pipefail
node="${NODE:-$(hostname -s)}"
jobs="$("${SQUEUE:-squeue}" -h -w "$node" -t running -o %i)" || exit 1
[ -z "$jobs" ]
