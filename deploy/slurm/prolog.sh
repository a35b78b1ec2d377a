#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=/usr/lib/sdcprobe/prolog.sh, PrologFlags=Alloc).
# Gates each job's allocation: on a fault it drains this node with an "SDC: UUID probe" reason and
# exits 1. What users see then (Slurm 22.05): an interactive `srun` is cancelled ("srun: Prolog
# failure on node ..."), and a batch job is requeued but *held* (squeue: PENDING, "launch failed
# requeued held") until someone runs `scontrol release JOBID`; with
# SchedulerParameters=nohold_on_prolog_fail in slurm.conf it is requeued without the hold and starts
# on another node. Slurm may add its own prolog-failure reason.
# Could not test (sdcprobe exit 2, or a binary that cannot start) drains at once with "sdcprobe: could
# not test: <why>" and fails the job too (SDCPROBE_PROLOG_COULD_NOT_TEST_AFTER=1), unless
# SDCPROBE_COULD_NOT_TEST=keep. SDCPROBE_PROLOG_FAIL_JOB=0 lets the job start anyway after draining.
# Other settings: see sdcprobe-gate.sh.
set -uo pipefail
# shellcheck source=sdcprobe-gate.sh
. "$(dirname "$(readlink -f "$0")")/sdcprobe-gate.sh"
rc=0
sdcprobe_gate prolog || rc=$?
# 1: a fault, 3: could not test and drained.
if [ "$rc" = 1 ] || [ "$rc" = 3 ]; then
  [ "${SDCPROBE_PROLOG_FAIL_JOB:-1}" = 1 ] && exit 1
fi
exit 0
