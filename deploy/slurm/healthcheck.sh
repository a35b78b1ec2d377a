#!/usr/bin/env bash
# Slurm HealthCheckProgram (slurm.conf: HealthCheckProgram=/usr/lib/sdcprobe/healthcheck.sh,
# HealthCheckInterval=3600, HealthCheckNodeState=IDLE so it does not take GPUs from running jobs).
# Drains this node when sdcprobe finds a fault, or could not test 3 times in a row
# (SDCPROBE_COULD_NOT_TEST_AFTER); Slurm ignores the exit code, so it always exits 0.
# slurmd discards this program's output: the gate logs to syslog too (journalctl -t sdcprobe-gate).
# Settings: see sdcprobe-gate.sh.
set -uo pipefail
# shellcheck source=sdcprobe-gate.sh
. "$(dirname "$(readlink -f "$0")")/sdcprobe-gate.sh"
sdcprobe_gate healthcheck
exit 0
