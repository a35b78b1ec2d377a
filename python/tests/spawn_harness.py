"""What the multi-rank tests share: a job of torch.multiprocessing ranks over gloo, each rank writing
its outcome as JSON, and the JSON Lines event logs the checks write.

    def worker(rank, world, tmp, *args):   # in a test module, so spawn can import it
        init_gloo(tmp, rank, world)
        ...
        write_outcome(tmp, rank, outcome)
        dist.destroy_process_group()

    tmp, outcomes = run_job(worker, world, *args, prefix="replica-")

A job whose every rank should stop for SDC (on_sdc="stop" or "raise") runs its loop through
sdc_loop, which records it in a goodput log per rank and run, and is checked by
JobVerdictAssertions.assert_job_stopped.
"""

import json
import os
import subprocess
import tempfile
import time

import torch.distributed as dist
import torch.multiprocessing as mp

from sdcprobe import GoodputLog, SDCDetected

# A job that stops for SDC (run_job's exit_status) ends within this, or its ranks are ended: the
# mesh jobs take under a minute, and a rank left waiting in a collective would wait for good.
JOB_DEADLINE_S = 300


def init_gloo(tmp, rank, world, **options):
    """This rank's default process group over gloo, met through a file in the job's folder."""
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rendezvous"), rank=rank,
                            world_size=world, **options)


def write_outcome(tmp, rank, outcome):
    with open(os.path.join(tmp, "outcome-%d.json" % rank), "w") as f:
        json.dump(outcome, f)


def run_job(target, world, *args, prefix="job-", exit_status=0):
    """(the job's folder, every rank's outcome in rank order) after target(rank, world, tmp, *args)
    ran on `world` spawned processes and each wrote its outcome. exit_status: the status every
    process must end with (SDC_EXIT_STATUS for a job that stops for SDC)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    if exit_status == 0:
        mp.start_processes(target, args=(world, tmp, *args), nprocs=world, join=True, start_method="spawn")
    else:
        spawn = mp.get_context("spawn")
        processes = [spawn.Process(target=target, args=(rank, world, tmp, *args)) for rank in range(world)]
        for p in processes:
            p.start()
        # As start_processes does: once a rank ends otherwise, the others (waiting for it in a
        # collective) are ended too; so are ranks that wait on each other past JOB_DEADLINE_S.
        deadline = time.monotonic() + JOB_DEADLINE_S
        while any(p.is_alive() for p in processes):
            if time.monotonic() > deadline or any(p.exitcode not in (None, exit_status) for p in processes):
                for p in processes:
                    p.terminate()
            time.sleep(0.1)
        codes = [p.exitcode for p in processes]
        if codes != [exit_status] * world:
            raise AssertionError("the ranks exited with %s, not %d each" % (codes, exit_status))
    outcomes = []
    for rank in range(world):
        with open(os.path.join(tmp, "outcome-%d.json" % rank)) as f:
            outcomes.append(json.load(f))
    return tmp, outcomes


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def sdc_loop(log, steps, train_step, check_step):
    """A training loop as a user writes it, in `log` (a GoodputLog): each step a span, the checks
    after it; on_sdc="stop" ends at the check that sets should_stop (check_step returns True),
    "raise" at SDCDetected, each logged as a fault of that name. Returns {"ended": the last step
    that ran, "how": "stop", "SDCDetected" or "done"}."""
    how, step = "done", None
    with log.attempt():
        try:
            for step in range(steps):
                with log.step(step):
                    train_step(step)
                if check_step(step):
                    how = "stop"
                    log.fault("SDCStop")
                    break
        except SDCDetected:
            how = "SDCDetected"
            log.fault("SDCDetected")
    log.close()
    return {"ended": step, "how": how}


def run_log(tmp, tag, rank):
    return GoodputLog(os.path.join(tmp, "events-%s-%d.jsonl" % (tag, rank)), rank=rank)


def goodput_report(pattern):
    out = subprocess.run([os.environ["SDCPROBE_BINARY"], "goodput", "--json", pattern], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise AssertionError("sdcprobe goodput failed (%d): %s" % (out.returncode, out.stderr))
    return json.loads(out.stdout)


class JobVerdictAssertions:
    """A unittest mixin: the checks of a job that stopped for SDC."""

    def assert_job_stopped(self, tmp, tag, outcomes, mode, step, suspect, attribution="persistent", check=None,
                           last_good_step=None):
        """Every rank of run `tag` (outcome[tag] from sdc_loop) ended at `step` as `mode` says, its log
        holds one sdc_detected naming `suspect` (rank, and its mesh coordinate where the outcomes
        carry "coordinate"), no other fault than the stop, no step after `step`; `sdcprobe goodput`
        over the files counts one incident, attributed to SDC."""
        for o in outcomes:
            self.assertEqual(o[tag], {"ended": step, "how": "stop" if mode == "stop" else "SDCDetected"},
                             "rank %d, %s" % (o["rank"], tag))
            events = read_events(os.path.join(tmp, "events-%s-%d.jsonl" % (tag, o["rank"])))
            sdc = [e for e in events if e["event"] == "sdc_detected"]
            self.assertEqual(len(sdc), 1, "rank %d, %s: %r" % (o["rank"], tag, sdc))
            e = sdc[0]
            self.assertEqual((e["step"], e["suspect_rank"], e["attribution"], [s["rank"] for s in e["suspects"]]),
                             (step, suspect, attribution, [suspect]), "rank %d, %s" % (o["rank"], tag))
            if check is not None:
                self.assertEqual(e["check"], check)
            if last_good_step is not None:
                self.assertEqual(e["last_good_step"], last_good_step)
            if "coordinate" in outcomes[suspect]:
                self.assertEqual(list(e["mesh"].values()), outcomes[suspect]["coordinate"])
            faults = [f["kind"] for f in events if f["event"] == "fault_detected"]
            self.assertEqual(faults, ["SDCStop" if mode == "stop" else "SDCDetected"], "rank %d" % o["rank"])
            self.assertEqual(max(f["step"] for f in events if f["event"] == "step_begin"), step)
        report = goodput_report(os.path.join(tmp, "events-%s-*.jsonl" % tag))
        self.assertEqual(report["measured"]["incidents"], 1, tag)
        teardown = report["categories"]["detection_teardown"]
        self.assertGreater(teardown["ns"], 0, tag)
        self.assertEqual(teardown["sdc_ns"], teardown["ns"], tag)
        rework = report["categories"]["rework"]
        self.assertEqual(rework["sdc_ns"], rework["ns"], tag)  # back to the last good step
