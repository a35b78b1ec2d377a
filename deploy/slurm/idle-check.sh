#!/usr/bin/env bash
# The sweep's idle check (sdcprobe sweep --idle-check /usr/lib/sdcprobe/idle-check.sh): exit 0 only
# when no process runs on the node's GPUs (`sdcprobe idle`: NVML's process lists; a node without the
# NVIDIA driver has none) and, where Slurm runs (squeue on PATH, or /etc/slurm/slurm.conf), squeue
# answers and lists no running job on this node. An unanswered check means busy: a driver that does
# not answer, or a failing squeue (slurmctld down, no munge): a standard pass must never run beside
# a job.
set -uo pipefail
"${SDCPROBE:-/usr/bin/sdcprobe}" idle || exit 1
squeue="${SQUEUE:-squeue}"
if command -v "$squeue" >/dev/null || [ -e /etc/slurm/slurm.conf ]; then
  node="${NODE:-$(hostname -s)}"
  jobs="$("$squeue" -h -w "$node" -t running -o %i)" || exit 1
  [ -z "$jobs" ]
fi
