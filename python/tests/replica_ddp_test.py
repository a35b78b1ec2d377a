"""ReplicaCheck in a DDP job on the CPU: ranks are torch.multiprocessing processes over gloo.

Needs torch with gloo (/usr/bin/python3 with Debian's python3-torch) and SDCPROBE_BINARY (the
sdcprobe CLI) for the goodput ledger.
"""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from sdcprobe import ReplicaCheck, SDCDetected  # noqa: E402
from spawn_harness import init_gloo, read_events, run_job, write_outcome  # noqa: E402

CKPT_EVERY = 10


class Log:
    """The training loop's own events (a stand-in for the goodput recorder), appended to the file
    the check writes too: one O_APPEND write per line, Unix nanoseconds."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, event, **fields):
        os.write(self.fd, (json.dumps(dict(t=time.time_ns(), event=event, **fields)) + "\n").encode())


def flip_bit(model):
    """One bit of the first weight's significand, as a memory fault would."""
    with torch.no_grad():
        next(model.parameters()).view(-1).view(torch.int32)[3] ^= 1 << 20


def worker(rank, world, tmp, steps, every, flip, probe_options, on_sdc, bind):
    torch.set_num_threads(1)
    init_gloo(tmp, rank, world)
    torch.manual_seed(0)  # the same initial weights on every replica
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
    optim = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)  # each replica its own batches
    path = os.path.join(tmp, "events-%d.jsonl" % rank)
    log = Log(path) if rank == 0 else (lambda *a, **k: None)
    log("alloc_granted")
    log("process_start", attempt=1)
    outcome = {"rank": rank, "verdicts": [], "detected": None}
    seen = []
    check = ReplicaCheck(every=every, event_log=path, probe_options=probe_options.get(rank),
                         on_sdc=seen.append if on_sdc == "callback" else on_sdc)
    try:
        for step in range(steps):
            log("step_begin", step=step)
            x = torch.randn(4, 8, generator=data)
            loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
            if flip is not None and (rank, step) == flip:
                flip_bit(model)
            log("step_end", step=step)
            verdict = check.step(step, [model.parameters(), optim.state_dict()])
            if verdict is not None:
                outcome["verdicts"].append({k: verdict[k] for k in ("step", "verdict", "every", "last_good_step")})
                outcome.setdefault("whys", []).append(verdict["why"])
            if seen:
                outcome["detected"] = seen[0]
                break
            if step % CKPT_EVERY == 0:
                if bind:  # check before commit: the save is committed only if the replicas agree
                    check.before_commit(step, [model.parameters(), optim.state_dict()])
                log("ckpt_begin", step=step)
                log("ckpt_end", step=step)
                log("ckpt_commit", step=step)
    except SDCDetected as e:
        outcome["detected"] = dict(check.verdict, message=str(e))
        log("teardown_end")
    check.close()
    write_outcome(tmp, rank, outcome)
    dist.destroy_process_group()


def run_replica_job(world, steps, every, flip=None, probe_options=None, on_sdc="raise", bind=False):
    return run_job(worker, world, steps, every, flip, probe_options or {}, on_sdc, bind, prefix="replica-")


class FourReplicasTest(unittest.TestCase):
    def test_clean_run_raises_no_alarm(self):
        tmp, outcomes = run_replica_job(4, 300, 10)
        for o in outcomes:
            self.assertIsNone(o["detected"])
            self.assertEqual([v["step"] for v in o["verdicts"]], list(range(0, 300, 10)))
            self.assertTrue(all(v["verdict"] == "pass" for v in o["verdicts"]))
            self.assertEqual(o["verdicts"][-1]["last_good_step"], 290)
        events = read_events(os.path.join(tmp, "events-0.jsonl"))
        self.assertFalse([e for e in events if e["event"] == "sdc_detected"])
        self.assertEqual(len([e for e in events if e["event"] == "probe_end"]), 30)

    def test_flip_on_rank_2_is_named_at_the_next_check(self):
        tmp, outcomes = run_replica_job(4, 300, 10, flip=(2, 137))
        for o in outcomes:
            d = o["detected"]
            self.assertIsNotNone(d, "rank %d saw no mismatch" % o["rank"])
            self.assertEqual(d["verdict"], "sdc")
            self.assertEqual(d["step"], 140)
            self.assertEqual(d["last_good_step"], 130)
            self.assertEqual([s["rank"] for s in d["suspects"]], [2])
            self.assertIn("rank 2", d["message"])
            self.assertNotIn("rank 0", d["message"])
            self.assertTrue(d["suspects"][0]["host"] and d["suspects"][0]["device"].startswith("CPU-"))
            self.assertTrue(d["suspects"][0]["pci_bus_id"].startswith("cpu:"))
        path = os.path.join(tmp, "events-0.jsonl")
        events = read_events(path)
        sdc = [e for e in events if e["event"] == "sdc_detected"]
        self.assertEqual(len(sdc), 1)
        self.assertEqual((sdc[0]["step"], sdc[0]["last_good_step"], sdc[0]["suspect_rank"]), (140, 130, 2))
        self.assert_ledger_matches_hand_calculation(path, events)

    def assert_ledger_matches_hand_calculation(self, path, events):
        """The docs/goodput.md rules applied by hand to this log's own times."""
        def t(event, step=None, last=False):
            hits = [e["t"] for e in events if e["event"] == event and (step is None or e.get("step") == step)]
            return hits[-1] if last else hits[0]

        probes = sum(t("probe_end", s) - t("probe_begin", s) for s in range(0, 141, 10))
        saves = sum(t("ckpt_end", s) - t("ckpt_begin", s) for s in range(0, 131, 10))
        # Rollback to the save of step 130 (the newest commit <= last_good_step): everything from its
        # end to the last progress (the end of the check at 140) is rework, except that check itself.
        rework = t("probe_begin", 140) - t("ckpt_end", 130)
        # From the last progress to the end of teardown.
        detection = t("teardown_end") - t("probe_end", 140)
        warmup = t("step_begin", 0) - t("alloc_granted")
        wall = t("teardown_end") - t("alloc_granted")
        binary = os.environ["SDCPROBE_BINARY"]
        out = subprocess.run([binary, "goodput", "--json", path], capture_output=True, text=True, check=True)
        ledger = json.loads(out.stdout)
        c = ledger["categories"]
        self.assertEqual(ledger["wall_ns"], wall)
        self.assertEqual(c["blocking_overhead"]["sdc_ns"], probes)
        self.assertEqual(c["blocking_overhead"]["ns"], probes + saves)
        self.assertEqual(c["rework"]["ns"], rework)
        self.assertEqual(c["rework"]["sdc_ns"], rework)
        self.assertEqual(c["detection_teardown"]["ns"], detection)
        self.assertEqual(c["detection_teardown"]["sdc_ns"], detection)
        self.assertEqual(c["restart_warmup"], {"ns": warmup, "sdc_ns": 0})
        self.assertEqual(ledger["sdc_lost_ns"], probes + rework + detection)
        self.assertEqual(ledger["productive_ns"], wall - warmup - probes - saves - rework - detection)


class CheckBeforeCommitTest(unittest.TestCase):
    """Saves every 10 steps, a check every 25, a flip on rank 2 after step 137's update."""

    def commits_and_detection(self, bind):
        tmp, outcomes = run_replica_job(3, 160, 25, flip=(2, 137), bind=bind)
        events = read_events(os.path.join(tmp, "events-0.jsonl"))
        commits = [e["step"] for e in events if e["event"] == "ckpt_commit"]
        sdc = [e for e in events if e["event"] == "sdc_detected"]
        self.assertEqual(len(sdc), 1)
        self.assertEqual([s["rank"] for s in outcomes[0]["detected"]["suspects"]], [2])
        return commits, sdc[0]

    def test_unbound_cadence_commits_a_tainted_checkpoint(self):
        commits, sdc = self.commits_and_detection(bind=False)
        # Checks at 125 and 150: the save of step 140 was committed after the flip.
        self.assertEqual((sdc["step"], sdc["last_good_step"]), (150, 125))
        self.assertEqual(commits[-1], 140)
        self.assertGreater(commits[-1], sdc["last_good_step"])

    def test_check_before_commit_leaves_no_tainted_commit(self):
        commits, sdc = self.commits_and_detection(bind=True)
        # The check before step 140's commit fails: that save is never committed, and the newest
        # commit (130) is the last step the replicas agreed on.
        self.assertEqual((sdc["step"], sdc["last_good_step"]), (140, 130))
        self.assertEqual(commits, list(range(0, 131, 10)))


class TwoReplicasTest(unittest.TestCase):
    def test_flip_between_two_replicas_is_inconclusive(self):
        tmp, outcomes = run_replica_job(2, 40, 5, flip=(1, 12), on_sdc="callback")
        for o in outcomes:
            d = o["detected"]
            self.assertEqual((d["verdict"], d["step"], d["last_good_step"]), ("inconclusive", 15, 10))
            self.assertEqual(sorted(s["rank"] for s in d["suspects"]), [0, 1])
            self.assertEqual(d["probe_failures"], [])
        # An undecided vote names no single suspect: no suspect_rank or device in the event.
        for rank in range(2):
            sdc = [e for e in read_events(os.path.join(tmp, "events-%d.jsonl" % rank)) if e["event"] == "sdc_detected"]
            self.assertEqual(len(sdc), 1)
            self.assertEqual(sdc[0]["verdict"], "inconclusive")
            self.assertNotIn("suspect_rank", sdc[0])
            self.assertNotIn("device", sdc[0])
            self.assertEqual(sorted(s["rank"] for s in sdc[0]["suspects"]), [0, 1])

    def test_probe_catalogue_breaks_the_tie(self):
        # Rank 1's device fails the probe catalogue (an injected fault); rank 0's passes.
        faulty = {1: {"probes": "alu.int64", "inject": "model=bitflip,mode=permanent", "seed": 3}}
        tmp, outcomes = run_replica_job(2, 40, 5, flip=(1, 12), probe_options=faulty, on_sdc="callback")
        for o in outcomes:
            d = o["detected"]
            self.assertEqual((d["verdict"], d["step"]), ("sdc", 15))
            self.assertEqual([s["rank"] for s in d["suspects"]], [1])
            self.assertEqual(d["probe_failures"], [1])
        sdc = [e for e in read_events(os.path.join(tmp, "events-0.jsonl")) if e["event"] == "sdc_detected"]
        self.assertEqual([(e["verdict"], e["suspect_rank"]) for e in sdc], [("sdc", 1)])

    def test_auto_cadence_is_the_same_on_every_replica(self):
        _, outcomes = run_replica_job(2, 60, "auto")
        a, b = outcomes
        self.assertIsNone(a["detected"])
        self.assertEqual(a["verdicts"], b["verdicts"])
        # The first check at step 0, the next after the calibration steps, then the planner's.
        self.assertEqual([v["step"] for v in a["verdicts"]][:2], [0, 5])
        self.assertGreaterEqual(a["verdicts"][1]["every"], 1)
        # The auto choice explains itself: the step time, check cost, SDC rate and budget behind it.
        self.assertIn("calibrating", a["whys"][0])
        self.assertRegex(a["whys"][-1],
                         r"every \d+ steps proposed by rank 0: step .* s \(median of \d+\), check .* s")


if __name__ == "__main__":
    unittest.main()
