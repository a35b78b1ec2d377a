"""The inline probes' job agreement (sdcprobe.callback.JobAgreement) on 3 gloo ranks, with stand-in
probes whose verdicts the test sets (a probe's own behaviour is test_inline.py's): a failure on one
rank is acted on by every rank at the next agreement step, before a save, or at the end of
training; each rank that did not fail logs one sdc_detected naming the failing rank; a job with no
failure raises nothing. One process without a process group acts at once.

Needs torch with gloo (/usr/bin/python3 with Debian's python3-torch).
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from sdcprobe import SDCDetected  # noqa: E402
from sdcprobe.callback import (JOB_AGREEMENT_EVERY, JobAgreement, before_save, final_probe,  # noqa: E402
                               step_probe)

WORLD = 3
FAILING_RANK = 2


class StandInProbe:
    """What the agreement asks of an InlineProbe: step(), verdict, log_event(), close()."""

    backend = "cpu"

    def __init__(self, rank, fails_from):
        self.rank, self.fails_from = rank, fails_from
        self.last_step, self.logged = -1, []

    def step(self, step, stream=None):
        self.last_step = step

    @property
    def verdict(self):
        failed = self.fails_from is not None and self.last_step >= self.fails_from
        return {"verdict": "fail" if failed else "pass", "device": "CPU-rank%d" % self.rank,
                "last_good_step": self.fails_from - 1 if failed else self.last_step, "last_step": self.last_step}

    def log_event(self, event, **fields):
        self.logged.append(dict(fields, event=event))

    def close(self):
        pass


def worker(rank, tmp, scenario):
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rendezvous"), rank=rank,
                            world_size=WORLD)
    # The failing rank's probe fails from step 13 ("steps", "save") or only in its final verdict ("end").
    fails_from = {"steps": 13, "save": 13, "end": 29, "clean": None}[scenario] if rank == FAILING_RANK else None
    probe, job = StandInProbe(rank, fails_from), JobAgreement()
    outcome = {"rank": rank}
    try:
        for step in range(29):
            step_probe(probe, step, "raise", job, log=True)
            if scenario == "save" and step == 17:
                before_save(probe, step, "raise", job, log=True)
        probe.last_step = 29  # the probe in flight at the end
        final_probe(probe, "raise", job, log=True)
        outcome["ended"] = "finished"
    except SDCDetected as e:
        outcome.update(ended=probe.last_step, message=str(e))
    outcome["logged"] = probe.logged
    with open(os.path.join(tmp, "rank%d.json" % rank), "w") as f:
        json.dump(outcome, f)
    dist.destroy_process_group()


class JobAgreementTest(unittest.TestCase):
    def run_job(self, scenario):
        tmp = tempfile.mkdtemp(prefix="job-agreement-")
        self.addCleanup(shutil.rmtree, tmp)
        mp.spawn(worker, args=(tmp, scenario), nprocs=WORLD)
        outcomes = []
        for rank in range(WORLD):
            with open(os.path.join(tmp, "rank%d.json" % rank)) as f:
                outcomes.append(json.load(f))
        return outcomes

    def assert_every_rank_acted_at(self, outcomes, step):
        for o in outcomes:
            self.assertEqual(o["ended"], step, o)
            self.assertIn("the inline probe failed on rank %d, CPU-rank%d (last good step 12)"
                          % (FAILING_RANK, FAILING_RANK) if step != 29 else "on rank %d" % FAILING_RANK,
                          o["message"])
            if o["rank"] == FAILING_RANK:
                self.assertEqual(o["logged"], [])  # its probe logged its own sdc_detected
            else:
                self.assertEqual(len(o["logged"]), 1, o)
                e = o["logged"][0]
                self.assertEqual((e["event"], e["suspect_rank"], e["device"]),
                                 ("sdc_detected", FAILING_RANK, "CPU-rank%d" % FAILING_RANK))

    def test_a_failure_is_acted_on_by_every_rank_at_the_next_agreement(self):
        self.assertEqual(JOB_AGREEMENT_EVERY, 10)
        self.assert_every_rank_acted_at(self.run_job("steps"), 20)

    def test_a_save_after_a_failure_is_refused_on_every_rank(self):
        self.assert_every_rank_acted_at(self.run_job("save"), 17)

    def test_a_failure_in_the_final_verdict_is_acted_on_at_the_end(self):
        self.assert_every_rank_acted_at(self.run_job("end"), 29)

    def test_a_clean_job_raises_nothing(self):
        for o in self.run_job("clean"):
            self.assertEqual((o["ended"], o["logged"]), ("finished", []), o)

    def test_one_process_acts_at_once(self):
        probe, job = StandInProbe(0, 3), JobAgreement()
        with self.assertRaises(SDCDetected):
            for step in range(10):
                step_probe(probe, step, "raise", job)
        self.assertEqual(probe.last_step, 3)


if __name__ == "__main__":
    unittest.main()
