"""The inline probes' job agreement (sdcprobe.callback.JobAgreement) on 3 gloo ranks, each with a real
InlineProbe(backend="cpu"), rank 2's made to fail by fault injection: a failure on one rank is acted
on by every rank at the next agreement step, before a save, or at the end of training (a failure in
the final verdict: the probe is still open to log it); each rank that did not fail logs one
sdc_detected naming the failing rank; an error of one rank's probe is raised by every rank at the
next agreement; a job with no failure raises nothing. One process without a process group acts at
once. Exchange (sdcprobe._exchange): a collective that fails is not followed by another.

Needs torch with gloo (/usr/bin/python3 with Debian's python3-torch) and SDCPROBE_LIBRARY.
"""

import datetime
import json
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from sdcprobe import InlineProbe, SDCDetected, SDCProbeError  # noqa: E402
from sdcprobe._exchange import Exchange  # noqa: E402
from sdcprobe.callback import (JOB_AGREEMENT_EVERY, JobAgreement, before_save, final_probe,  # noqa: E402
                               step_probe)

WORLD = 3
FAILING_RANK = 2
STEPS = 30  # steps 0 to 29, each probed
# A collective a peer never joins fails after this long, instead of gloo's 30 minutes.
TIMEOUT = datetime.timedelta(seconds=60)


def wait_idle(probe, timeout=30.0):
    """Waits until no probe is in flight, so that every step is probed (a due step is skipped while
    the previous probe runs) and each probe's verdict is collected at the next step."""
    deadline = time.monotonic() + timeout
    while probe.verdict["in_flight"]:
        if time.monotonic() > deadline:
            raise AssertionError("a probe stayed in flight for %s s" % timeout)
        time.sleep(0.005)


def make_probe(log, fails_from=None):
    """A CPU probe of every step, whose probes fail from step `fails_from`'s on (the injection
    counts one per step probed)."""
    inject = "model=bitflip,mode=permanent,after=%d" % fails_from if fails_from is not None else None
    return InlineProbe(backend="cpu", every=1, probes="alu.int64", seed=1, event_log=log, inject=inject)


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def worker(rank, tmp, scenario):
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rendezvous"), rank=rank,
                            world_size=WORLD, timeout=TIMEOUT)
    # The failing rank's probe fails from step 13 ("steps", "save") or only in its final verdict
    # ("end"); "error": its probe is closed at step 13, so its step() raises.
    fails_from = {"steps": 13, "save": 13, "end": STEPS - 1}.get(scenario) if rank == FAILING_RANK else None
    probe, job = make_probe(os.path.join(tmp, "rank%d.inline.jsonl" % rank), fails_from), JobAgreement()
    outcome = {"rank": rank}
    step = 0
    try:
        for step in range(STEPS):
            if scenario == "error" and rank == FAILING_RANK and step == 13:
                probe.close()
            step_probe(probe, step, "raise", job, log=True)
            if scenario == "save" and step == 17:
                before_save(probe, step, "raise", job, log=True)
            wait_idle(probe)
        final_probe(probe, "raise", job, log=True)
        outcome["ended"] = "finished"
    except (SDCDetected, SDCProbeError) as e:
        outcome.update(ended=step, error=type(e).__name__, message=str(e))
    probe.close()
    with open(os.path.join(tmp, "rank%d.json" % rank), "w") as f:
        json.dump(outcome, f)
    dist.destroy_process_group()


class JobAgreementTest(unittest.TestCase):
    def run_job(self, scenario):
        tmp = tempfile.mkdtemp(prefix="job-agreement-")
        self.addCleanup(shutil.rmtree, tmp)
        mp.spawn(worker, args=(tmp, scenario), nprocs=WORLD)
        outcomes, logs = [], []
        for rank in range(WORLD):
            with open(os.path.join(tmp, "rank%d.json" % rank)) as f:
                outcomes.append(json.load(f))
            logs.append([e for e in read_events(os.path.join(tmp, "rank%d.inline.jsonl" % rank))
                         if e["event"] == "sdc_detected"])
        return outcomes, logs

    def assert_every_rank_acted_at(self, scenario, step, last_good_step):
        outcomes, logs = self.run_job(scenario)
        # The failing rank's probe logged its own sdc_detected, at the first failing probe.
        own, = logs[FAILING_RANK]
        self.assertNotIn("suspect_rank", own)
        self.assertEqual(own["last_good_step"], last_good_step)
        for o in outcomes:
            self.assertEqual((o["ended"], o["error"]), (step, "SDCDetected"), o)
            self.assertIn("the inline probe failed on rank %d, %s (last good step %d)"
                          % (FAILING_RANK, own["device"], last_good_step), o["message"])
            if o["rank"] != FAILING_RANK:
                e, = logs[o["rank"]]
                self.assertEqual((e["suspect_rank"], e["device"], e["last_good_step"]),
                                 (FAILING_RANK, own["device"], last_good_step))

    def test_a_failure_is_acted_on_by_every_rank_at_the_next_agreement(self):
        self.assertEqual(JOB_AGREEMENT_EVERY, 10)
        self.assert_every_rank_acted_at("steps", 20, 12)

    def test_a_save_after_a_failure_is_refused_on_every_rank(self):
        self.assert_every_rank_acted_at("save", 17, 12)

    def test_a_failure_in_the_final_verdict_is_acted_on_at_the_end(self):
        # The probe of the last step fails: its verdict comes from final_probe, whose agreement
        # logs on every rank's probe before closing it.
        self.assert_every_rank_acted_at("end", STEPS - 1, STEPS - 2)

    def test_an_error_of_one_ranks_probe_is_raised_by_every_rank_at_the_next_agreement(self):
        outcomes, logs = self.run_job("error")
        for o in outcomes:
            self.assertEqual((o["ended"], o["error"]), (20, "SDCProbeError"), o)
            self.assertIn("the inline probe of rank %d failed: the probe is closed" % FAILING_RANK, o["message"])
        self.assertEqual(logs, [[]] * WORLD)

    def test_a_clean_job_raises_nothing(self):
        outcomes, logs = self.run_job("clean")
        for o in outcomes:
            self.assertEqual(o["ended"], "finished", o)
        self.assertEqual(logs, [[]] * WORLD)


class OneProcessTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="job-agreement-")
        self.addCleanup(shutil.rmtree, self.dir)

    def test_one_process_acts_at_once(self):
        # The probe of step 3 fails; its verdict is collected at step 4.
        with make_probe(os.path.join(self.dir, "inline.jsonl"), fails_from=3) as probe:
            job = JobAgreement()
            with self.assertRaisesRegex(SDCDetected, "last good step 2"):
                for step in range(10):
                    step_probe(probe, step, "raise", job)
                    wait_idle(probe)
            self.assertEqual(step, 4)

    def test_one_process_raises_an_error_at_once(self):
        probe, job = make_probe(None), JobAgreement()
        probe.close()
        with self.assertRaisesRegex(SDCProbeError, "the probe is closed"):
            step_probe(probe, 1, "raise", job)


class ExchangeTest(unittest.TestCase):
    def test_a_failed_collective_is_not_followed_by_another(self):
        """A collective that fails (an NCCL error, here raised by a stand-in of torch.distributed's
        collectives over a real gloo group) raises; a second, different collective would leave
        this rank one collective ahead of its peers."""
        tmp = tempfile.mkdtemp(prefix="exchange-")
        self.addCleanup(shutil.rmtree, tmp)
        dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rendezvous"), rank=0,
                                world_size=1)
        self.addCleanup(dist.destroy_process_group)
        issued = []

        class FailingCollectives:
            def __getattr__(self, name):
                return getattr(dist, name)

            def all_gather_into_tensor(self, *args, **kwargs):
                issued.append("all_gather_into_tensor")
                raise RuntimeError("NCCL error: remote process exited or there was a network error")

            def all_gather(self, *args, **kwargs):
                issued.append("all_gather")
                raise RuntimeError("NCCL error: remote process exited or there was a network error")

        self.assertEqual(Exchange(dist).gather([7, 8]), [[7, 8]])
        with self.assertRaisesRegex(RuntimeError, "NCCL error"):
            Exchange(FailingCollectives()).gather([7, 8])
        self.assertEqual(len(issued), 1, issued)


if __name__ == "__main__":
    unittest.main()
