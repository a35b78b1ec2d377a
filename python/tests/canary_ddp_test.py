"""CanaryCheck in a DDP job on the CPU: ranks are torch.multiprocessing processes over gloo.

Needs torch with gloo (/usr/bin/python3 with Debian's python3-torch).
"""

import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from sdcprobe import SDC_EXIT_STATUS, CanaryCheck, ReplicaCheck, SDCDetected  # noqa: E402
from sdcprobe.replica import attribute, decided, merge_group_verdicts, state_digest  # noqa: E402
from spawn_harness import (JobVerdictAssertions, init_gloo, read_events, run_job, run_log, sdc_loop,  # noqa: E402
                           write_outcome)

EVERY = 5
FAULT_ONSET = 21  # after the first check (which measures determinism), between two checks
FAULT_RATE = 0.25  # per forward call of the faulty layer: rare enough that training goes on


class ShuffledIndexAdd(torch.autograd.Function):
    """x.index_select(0, index) whose backward adds the rows in an order drawn from the OS's
    random source, as GPU atomics add them in whatever order the threads arrive: a genuinely
    non-deterministic kernel. (CPU index_add_ in torch 1.13 is deterministic, even with threads.)"""

    @staticmethod
    def forward(ctx, x, index):
        ctx.save_for_backward(index)
        ctx.rows = x.shape[0]
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        order = list(range(index.numel()))
        random.SystemRandom().shuffle(order)
        order = torch.tensor(order)
        out = torch.zeros(ctx.rows, *grad.shape[1:], dtype=grad.dtype)
        return out.index_add_(0, index[order], grad[order]), None


class Embedded(torch.nn.Module):
    """A table lookup (through ShuffledIndexAdd) before a small MLP."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(32, 8))
        self.mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, x):
        index = (x.abs() * 97).long().flatten() % 32
        rows = ShuffledIndexAdd.apply(self.table, index).view(x.shape[0], -1, 8).mean(1)
        return self.mlp(rows)


def make_model(kind):
    torch.manual_seed(0)  # the same initial weights on every replica
    if kind == "nondeterministic":
        return Embedded()
    # Batch norm (running statistics the canary must leave alone) and dropout (a random mask the
    # canary must neither vary nor take from the training's generator).
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                               torch.nn.Dropout(0.1), torch.nn.Linear(16, 1))


def loss_fn(module, batch):
    x, y = batch
    return (module(x) - y).pow(2).mean()


class FaultyMatmul:
    """A forward hook on one nn.Linear: from `onset` on, each call flips one bit of one output
    element with probability `rate` (seeded), as a faulty multiplier would."""

    def __init__(self, onset, rate, seed):
        self.onset, self.rate = onset, rate
        self.random = random.Random(seed)
        self.step = 0
        self.fired_in_training = 0
        self.in_canary = False

    def __call__(self, module, inputs, output):
        if self.step < self.onset or self.random.random() >= self.rate:
            return None
        self.fired_in_training += not self.in_canary
        out = output.clone()
        flat = out.view(-1).view(torch.int32)
        flat[self.random.randrange(flat.numel())] ^= 1 << self.random.randrange(10, 23)
        return out


def train(rank, steps, kind, faulty_rank, tmp, with_canary=True):
    """One DDP run; returns what the test checks."""
    model = torch.nn.parallel.DistributedDataParallel(make_model(kind))
    optim = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)  # each replica its own batches
    torch.manual_seed(1000 + rank)  # per-rank dropout masks, as a real job has
    fault = None
    if rank == faulty_rank:
        fault = FaultyMatmul(FAULT_ONSET, FAULT_RATE, seed=7)
        model.module[0].register_forward_hook(fault)
    outcome = {"rank": rank, "verdicts": [], "replica": [], "detected": None, "untouched": True}
    replica = ReplicaCheck(every=EVERY)
    canary = None
    if with_canary:
        def canary_loss(module, batch):
            if fault is not None:
                fault.in_canary = True
            try:
                return loss_fn(module, batch)
            finally:
                if fault is not None:
                    fault.in_canary = False

        canary = CanaryCheck(model.module, canary_loss, every=EVERY,
                             event_log=os.path.join(tmp, "events-%d.jsonl" % rank))
    try:
        for step in range(steps):
            if fault is not None:
                fault.step = step
            x = torch.randn(16, 8, generator=data)
            batch = (x, x.sum(1, keepdim=True))
            optim.zero_grad()
            loss_fn(model, batch).backward()
            optim.step()
            r = replica.step(step, [model.parameters(), optim.state_dict()])
            if r is not None:
                outcome["replica"].append(r["verdict"])
            if canary is None:
                continue
            before = state_digest([[p.grad for p in model.parameters()], list(model.buffers())])
            verdict = canary.step(step, batch)
            if state_digest([[p.grad for p in model.parameters()], list(model.buffers())]) != before:
                outcome["untouched"] = False
            if verdict is not None:
                outcome["verdicts"].append({k: verdict[k] for k in ("step", "verdict", "last_good_step")})
                outcome["disabled"] = verdict.get("message")
    except SDCDetected as e:
        outcome["detected"] = dict(canary.verdict, message=str(e))
    outcome["steps_run"] = step + 1
    outcome["fired_in_training"] = fault.fired_in_training if fault is not None else 0
    outcome["final"] = "%x,%x" % state_digest(list(model.parameters()))
    if canary is not None:
        canary.close()
    return outcome


def worker(rank, world, tmp, steps, kind, faulty_rank):
    torch.set_num_threads(1)
    init_gloo(tmp, rank, world)
    outcome = train(rank, steps, kind, faulty_rank, tmp)
    if kind == "clean":
        # The same loop without the canary ends with the same parameters: the canary changed nothing.
        outcome["final_without_canary"] = train(rank, steps, kind, None, tmp, with_canary=False)["final"]
    write_outcome(tmp, rank, outcome)
    dist.destroy_process_group()


def commit_worker(rank, world, tmp, steps, kind, faulty_rank):
    """Checks before two saves, the second after rank 1's products went wrong."""
    torch.set_num_threads(1)
    init_gloo(tmp, rank, world)
    model = make_model("clean")
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(3))
    alarms = []
    canary = CanaryCheck(model, loss_fn, batch=(x, x.sum(1, keepdim=True)), every=1000, on_sdc=alarms.append,
                         event_log=os.path.join(tmp, "events-%d.jsonl" % rank))
    outcome = {"rank": rank, "first": canary.before_commit(5)["verdict"]}
    if rank == faulty_rank:
        model[0].register_forward_hook(FaultyMatmul(onset=0, rate=1.0, seed=7))
    second = canary.before_commit(10)
    outcome.update(second={k: second[k] for k in ("verdict", "step", "last_good_step", "suspects")}, alarms=len(alarms),
                   parameters="%x,%x" % state_digest(list(model.parameters())))
    canary.close()
    write_outcome(tmp, rank, outcome)
    dist.destroy_process_group()


def run_canary_job(steps, kind, faulty_rank=None, world=3, target=worker):
    return run_job(target, world, steps, kind, faulty_rank, prefix="canary-")


class ThreeReplicasTest(unittest.TestCase):
    def test_corrupted_matmul_on_rank_1_is_named_by_the_canary_only(self):
        tmp, outcomes = run_canary_job(200, "clean", faulty_rank=1)
        detected_at = outcomes[0]["detected"]["step"]
        self.assertGreater(detected_at, FAULT_ONSET)
        for o in outcomes:
            d = o["detected"]
            self.assertIsNotNone(d, "rank %d saw nothing" % o["rank"])
            self.assertEqual((d["verdict"], d["step"], d["last_good_step"]), ("sdc", detected_at, detected_at - EVERY))
            self.assertEqual([(s["rank"], s["cause"]) for s in d["suspects"]], [(1, "compute")])
            self.assertTrue(d["suspects"][0]["device"].startswith("CPU-") and d["suspects"][0]["host"])
            self.assertTrue(d["suspects"][0]["pci_bus_id"].startswith("cpu:"))
            self.assertIn("rank 1 (", d["message"])
            self.assertNotIn("rank 0", d["message"])
            # The replica check saw nothing: the all-reduce gave every replica the same wrong gradient.
            self.assertEqual(o["replica"], ["pass"] * (detected_at // EVERY + 1))
            self.assertTrue(o["untouched"])
        self.assertGreater(outcomes[1]["fired_in_training"], 0, "the fault never corrupted a training step")
        events = read_events(os.path.join(tmp, "events-0.jsonl"))
        sdc = [e for e in events if e["event"] == "sdc_detected"]
        self.assertEqual(len(sdc), 1)
        self.assertEqual((sdc[0]["check"], sdc[0]["suspect_rank"], sdc[0]["step"], sdc[0]["last_good_step"]),
                         ("canary", 1, detected_at, detected_at - EVERY))
        begins = [e for e in events if e["event"] == "probe_begin"]
        self.assertTrue(begins and all(e["probe"] == "canary" and e["blocking"] is True for e in begins))

    def test_clean_run_raises_nothing_and_changes_nothing(self):
        tmp, outcomes = run_canary_job(100, "clean")
        for o in outcomes:
            self.assertIsNone(o["detected"])
            self.assertEqual([v["step"] for v in o["verdicts"]], list(range(0, 100, EVERY)))
            self.assertEqual({v["verdict"] for v in o["verdicts"]}, {"pass"})
            self.assertEqual(o["verdicts"][-1]["last_good_step"], 95)
            self.assertTrue(o["untouched"], "the canary changed .grad or a buffer")
            self.assertEqual(o["final"], o["final_without_canary"])
        self.assertFalse([e for e in read_events(os.path.join(tmp, "events-0.jsonl")) if e["event"] == "sdc_detected"])

    def test_nondeterministic_model_disables_the_canary_without_alarm(self):
        # The op really is non-deterministic: two backward passes differ.
        torch.manual_seed(0)
        model, x = Embedded(), torch.randn(64, 8)
        grads = [torch.autograd.grad(model(x).sum(), [model.table])[0] for _ in range(2)]
        self.assertFalse(torch.equal(grads[0], grads[1]))

        tmp, outcomes = run_canary_job(30, "nondeterministic")
        for o in outcomes:
            self.assertIsNone(o["detected"])
            self.assertEqual(o["verdicts"], [{"step": 0, "verdict": "disabled", "last_good_step": -1}])
            self.assertEqual(o["steps_run"], 30)
            message = o["disabled"]
            self.assertIn("gradient of table", message)
            self.assertIn("torch.use_deterministic_algorithms(True)", message)
            self.assertIn("CUBLAS_WORKSPACE_CONFIG", message)
        events = read_events(os.path.join(tmp, "events-0.jsonl"))
        self.assertFalse([e for e in events if e["event"] == "sdc_detected"])
        self.assertEqual([e["verdict"] for e in events if e["event"] == "probe_end"], ["disabled"])

    def test_check_before_commit_runs_the_canary(self):
        # The replicas' parameters stay equal (a replica-style comparison would pass); only the
        # canary's gradients show rank 1's wrong products.
        tmp, outcomes = run_canary_job(0, "clean", faulty_rank=1, target=commit_worker)
        self.assertEqual(len({o["parameters"] for o in outcomes}), 1)
        for o in outcomes:
            self.assertEqual(o["first"], "pass")
            second = o["second"]
            self.assertEqual((second["verdict"], second["step"], second["last_good_step"]), ("sdc", 10, 5))
            self.assertEqual([(s["rank"], s["cause"]) for s in second["suspects"]], [(1, "compute")])
            self.assertEqual(o["alarms"], 1)
        for rank in range(3):
            events = read_events(os.path.join(tmp, "events-%d.jsonl" % rank))
            self.assertEqual([e["step"] for e in events if e["event"] == "probe_begin" and e["probe"] == "canary"],
                             [5, 10])
            sdc = [e for e in events if e["event"] == "sdc_detected"]
            self.assertEqual([(e["check"], e["step"], e["suspect_rank"], e["cause"]) for e in sdc],
                             [("canary", 10, 1, "compute")])


# The job-verdict runs: checks at 0, 5 and 10; the fault from step 7 on, in the canary's runs only.
VERDICT_STEPS = 13
VERDICT_ONSET = 7


def verdict_run(rank, tmp, tag, fault, on_sdc, transient="stop", faulty_rank=1):
    """One DDP run of VERDICT_STEPS with a CanaryCheck acting as `on_sdc` says, in the loop of
    sdc_loop. `fault`: "persistent" (rank 1's products wrong in every canary run from the onset),
    "intermittent" (in the first canary run after the onset only) or "noise" (a nondeterministic op
    on every rank: each canary run after the onset adds noise drawn from the OS)."""
    model = torch.nn.parallel.DistributedDataParallel(make_model("clean"))
    optim = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)
    state = {"step": 0, "in_canary": False, "fired": 0}

    def hook(module, inputs, output):
        if not state["in_canary"] or state["step"] < VERDICT_ONSET:
            return None
        if fault == "noise":
            return output + 1e-3 * torch.randn(output.shape, generator=torch.Generator().manual_seed(
                random.SystemRandom().getrandbits(63)))
        if rank != faulty_rank or (fault == "intermittent" and state["fired"]):
            return None
        state["fired"] += 1
        out = output.clone()
        out.view(-1)[:1].view(torch.int32).bitwise_xor_(1 << 20)
        return out

    model.module[0].register_forward_hook(hook)

    def canary_loss(module, batch):
        state["in_canary"] = True
        try:
            return loss_fn(module, batch)
        finally:
            state["in_canary"] = False

    log = run_log(tmp, tag, rank)
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(3))
    canary = CanaryCheck(model.module, canary_loss, batch=(x, x.sum(1, keepdim=True)), every=EVERY, on_sdc=on_sdc,
                         event_log=log, transient=transient)

    def train_step(step):
        state["step"] = step
        xb = torch.randn(16, 8, generator=data)
        optim.zero_grad()
        loss_fn(model, (xb, xb.sum(1, keepdim=True))).backward()
        optim.step()

    ended = sdc_loop(log, VERDICT_STEPS, train_step, lambda step: canary.step(step) is not None and canary.should_stop)
    v = canary.verdict
    return ended, {"verdict": v["verdict"], "attribution": v.get("attribution"), "disabled": canary.disabled,
                   "rerun_seconds": v.get("rerun_seconds"), "seconds": v["seconds"],
                   "should_restore": canary.should_restore}


def verdict_worker(rank, world, tmp):
    """The job-verdict runs in one process group; the process ends as a stopped job does, with
    SDC_EXIT_STATUS, after the last run."""
    torch.set_num_threads(1)
    init_gloo(tmp, rank, world)
    outcome = {"rank": rank}
    for tag, fault, on_sdc, transient in (("raise", "persistent", "raise", "stop"),
                                          ("intermittent", "intermittent", "raise", "stop"),
                                          ("continue", "intermittent", "raise", "continue"),
                                          ("nondeterministic", "noise", "stop", "stop"),
                                          ("stop", "persistent", "stop", "stop")):
        outcome[tag], outcome[tag + "_verdict"] = verdict_run(rank, tmp, tag, fault, on_sdc, transient)
    write_outcome(tmp, rank, outcome)
    dist.destroy_process_group()
    sys.exit(SDC_EXIT_STATUS if outcome["stop"]["how"] == "stop" else 0)


def two_replicas_worker(rank, world, tmp):
    """The job-verdict runs of a vote of two: an intermittent fault on rank 1 with
    transient="continue", then a persistent one."""
    torch.set_num_threads(1)
    init_gloo(tmp, rank, world)
    outcome = {"rank": rank}
    for tag, fault, transient in (("two-continue", "intermittent", "continue"),
                                  ("two-persistent", "persistent", "stop")):
        outcome[tag], outcome[tag + "_verdict"] = verdict_run(rank, tmp, tag, fault, "stop", transient)
    write_outcome(tmp, rank, outcome)
    dist.destroy_process_group()


class JobVerdictTest(unittest.TestCase, JobVerdictAssertions):
    """One job of 3 DDP ranks: every rank stops (status 75) or raises at the same check, the re-run
    attributes the fault (persistent, transient, not hardware); and one of 2, a vote of two."""

    def test_every_rank_acts_on_one_verdict_after_a_rerun(self):
        tmp, outcomes = run_job(verdict_worker, 3, prefix="canary-verdict-", exit_status=SDC_EXIT_STATUS)
        for tag, mode in (("stop", "stop"), ("raise", "raise")):
            self.assert_job_stopped(tmp, tag, outcomes, mode, step=10, suspect=1, attribution="persistent",
                                    check="canary", last_good_step=5)
        self.assert_job_stopped(tmp, "intermittent", outcomes, "raise", step=10, suspect=1, attribution="transient",
                                check="canary", last_good_step=5)
        for o in outcomes:
            self.assertEqual(o["stop_verdict"]["attribution"], "persistent")
            self.assertGreater(o["stop_verdict"]["rerun_seconds"], 0)
            # Noise on every rank: no rank to blame, no stop; the canary turns itself off.
            self.assertEqual(o["nondeterministic"], {"ended": VERDICT_STEPS - 1, "how": "done"})
            self.assertEqual((o["nondeterministic_verdict"]["verdict"], o["nondeterministic_verdict"]["attribution"]),
                             ("not_hardware", "not_hardware"))
            self.assertIn("not hardware", o["nondeterministic_verdict"]["disabled"])
            events = read_events(os.path.join(tmp, "events-nondeterministic-%d.jsonl" % o["rank"]))
            self.assertEqual([e["event"] for e in events if e["event"] in ("sdc_detected", "fault_detected")], [])
            self.assertEqual([e["verdict"] for e in events if e["event"] == "probe_end"],
                             ["pass", "pass", "not_hardware"])
            # transient="continue": the transient fault is logged and training goes back to the last
            # good step instead of raising (should_restore; this loop just goes on).
            self.assertEqual(o["continue"], {"ended": VERDICT_STEPS - 1, "how": "done"})
            self.assertTrue(o["continue_verdict"]["should_restore"])
            events = read_events(os.path.join(tmp, "events-continue-%d.jsonl" % o["rank"]))
            self.assertEqual([(e["event"], e.get("attribution"), e.get("last_good_step")) for e in events
                              if e["event"] in ("sdc_detected", "fault_detected")], [("sdc_detected", "transient", 5)])
        print("re-run at detection: %.4f s, the check itself %.4f s"
              % (outcomes[0]["stop_verdict"]["rerun_seconds"], outcomes[0]["stop_verdict"]["seconds"]))

    def test_a_vote_of_two_is_decided_by_the_rerun(self):
        tmp, outcomes = run_job(two_replicas_worker, 2, prefix="canary-two-")
        for o in outcomes:
            # The re-runs agree on rank 0's answer: rank 1 is named, transient, and training goes
            # back to the last good step.
            self.assertEqual(o["two-continue"], {"ended": VERDICT_STEPS - 1, "how": "done"})
            self.assertEqual((o["two-continue_verdict"]["verdict"], o["two-continue_verdict"]["attribution"]),
                             ("sdc", "transient"))
            self.assertTrue(o["two-continue_verdict"]["should_restore"])
            events = read_events(os.path.join(tmp, "events-two-continue-%d.jsonl" % o["rank"]))
            self.assertEqual([(e["suspect_rank"], e["attribution"], [s["rank"] for s in e["suspects"]]) for e in events
                              if e["event"] == "sdc_detected"], [(1, "transient", [1])])
            # Rank 1 wrong again on its re-run: the re-runs split as the vote did, no one is named.
            self.assertEqual(o["two-persistent"], {"ended": 10, "how": "stop"})
            self.assertEqual((o["two-persistent_verdict"]["verdict"], o["two-persistent_verdict"]["attribution"]),
                             ("inconclusive", "persistent"))
            events = read_events(os.path.join(tmp, "events-two-persistent-%d.jsonl" % o["rank"]))
            sdc = [e for e in events if e["event"] == "sdc_detected"]
            self.assertEqual([sorted(s["rank"] for s in e["suspects"]) for e in sdc], [[0, 1]])
            self.assertNotIn("suspect_rank", sdc[0])


class OneRankTest(unittest.TestCase):
    """One process, a one-rank gloo group: the canary's own behaviour, without peers."""

    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.tmp = tempfile.mkdtemp(prefix="canary-1-")
        init_gloo(cls.tmp, 0, 1)

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()

    def test_first_batch_is_kept_and_training_state_untouched(self):
        model = make_model("clean")
        seen = []

        def recording_loss(module, batch):
            seen.append(batch[0].clone())
            return loss_fn(module, batch)

        canary = CanaryCheck(model, recording_loss, every=2, samples=4)
        first, other = torch.randn(16, 8), torch.randn(16, 8)
        stats = [b.clone() for b in model.buffers()]
        rng = torch.get_rng_state()
        self.assertEqual(canary.step(0, (first, first.sum(1, keepdim=True)))["verdict"], "unchecked")
        self.assertIsNone(canary.step(1, (other, other)))
        self.assertEqual(canary.step(2, (other, other))["verdict"], "unchecked")
        self.assertEqual(len(seen), 3)  # two runs at the first check, one at step 2
        for batch in seen:
            self.assertTrue(torch.equal(batch, first[:4]))
        self.assertTrue(all(p.grad is None for p in model.parameters()))
        for before, after in zip(stats, model.buffers()):
            self.assertTrue(torch.equal(before, after))
        self.assertTrue(torch.equal(rng, torch.get_rng_state()))
        self.assertEqual(canary.last_good_step, -1)  # a replica compared with nobody is never healthy

    def test_auto_cadence_is_aligned_to_multiples_of_the_interval(self):
        x = torch.randn(8, 8)
        batch = (x, x.sum(1, keepdim=True))
        model = make_model("clean")
        # A high SDC rate and the whole step as budget: the planner checks often.
        canary = CanaryCheck(model, loss_fn, batch=batch, every="auto", budget=1.0, sdc_rate=1e9)
        steps, intervals = [], []
        for step in range(3, 2000):
            loss_fn(model, batch).backward()  # a step's work between the calls
            if canary.step(step) is not None:
                steps.append(step)
                intervals.append(canary.every)
        # The first call, then the calibration interval: every multiple of 5 until the interval is
        # chosen, then multiples at least one interval apart.
        self.assertEqual(steps[:2], [3, 5])
        self.assertGreater(len(steps), 2, (steps, intervals))
        for last, step, every in zip(steps[1:], steps[2:], intervals[1:]):
            self.assertEqual(step % every, 0)
            self.assertGreaterEqual(step - last, every)

    def test_attribution_of_a_rerun(self):
        # Three replicas, rank 2 the suspect; each replica's first digest and its re-run's.
        self.assertEqual(attribute([1, 1, 2], [1, 1, 2], [2]), {2: "persistent"})
        self.assertEqual(attribute([1, 1, 2], [1, 1, 3], [2]), {2: "persistent"})  # wrong again, otherwise
        self.assertEqual(attribute([1, 1, 2], [1, 1, 1], [2]), {2: "transient"})
        self.assertEqual(attribute([1, 1, 2], [4, 1, 1], [2]), {2: "not_hardware"})  # a healthy peer differs
        # No majority: two that do not reproduce themselves are a nondeterministic op.
        self.assertEqual(attribute([1, 2, 3], [4, 5, 3], [0, 1, 2]), {0: "not_hardware", 1: "not_hardware",
                                                                     2: "not_hardware"})
        self.assertEqual(attribute([1, 2], [3, 2], [0, 1]), {0: "transient", 1: "persistent"})
        # Within equivalence classes: the suspect's peers are its own class's.
        self.assertEqual(attribute([1, 1, 2, 9], [1, 1, 1, 8], [2], classes=["a", "a", "a", "b"]), {2: "transient"})

    def test_the_job_verdict_names_a_suspect_of_a_decided_group(self):
        # On a mesh, one group's vote of two stays undecided (ranks 0 and 2) while another's names
        # rank 5: the job's verdict is "sdc" and its first suspect, the one named, is rank 5.
        def group(verdict, ranks, last_good):
            return {"verdict": verdict, "suspects": [{"rank": r} for r in ranks], "last_good_step": last_good}
        undecided, decided_group = group("inconclusive", [0, 2], 10), group("sdc", [5], 20)
        merged = merge_group_verdicts(dict(undecided, step=30),
                                      [undecided, None, undecided, None, decided_group, decided_group])
        self.assertEqual(merged["verdict"], "sdc")
        self.assertEqual([s["rank"] for s in merged["suspects"]], [5, 0, 2])
        self.assertEqual(merged["last_good_step"], 10)
        self.assertEqual(merged["groups"], 2)
        merged = merge_group_verdicts(dict(undecided, step=30), [undecided, None, undecided])
        self.assertEqual(merged["verdict"], "inconclusive")

    def test_with_no_majority_the_reruns_decide(self):
        # Two replicas (a vote of two), every one a suspect. A transient fault on A: the re-runs
        # agree on B's answer, so B is cleared and A is transient, and the vote is decided.
        self.assertEqual(attribute([1, 2], [2, 2], [0, 1]), {0: "transient"})
        self.assertEqual(decided("inconclusive", [0, 1], {0: "transient"}), ("sdc", [0]))
        # A persistent fault on A, the same wrong answer or another: the re-runs split as the vote
        # did, nothing is decided and no one is named.
        self.assertEqual(attribute([1, 2], [1, 2], [0, 1]), {0: "persistent", 1: "persistent"})
        self.assertEqual(decided("inconclusive", [0, 1], {0: "transient", 1: "persistent"}),
                         ("inconclusive", [0, 1]))
        # A 2-2 split: the re-runs' majority (3 of 4) clears A and B; C gave it on its re-run, D not.
        self.assertEqual(attribute([1, 1, 2, 2], [1, 1, 1, 2], [0, 1, 2, 3]), {2: "transient", 3: "persistent"})
        self.assertEqual(decided("inconclusive", [0, 1, 2, 3], {2: "transient", 3: "persistent"}), ("sdc", [2, 3]))
        # ... stable re-runs (2 against 2): undecided; two that do not reproduce themselves: not hardware.
        self.assertEqual(attribute([1, 1, 2, 2], [1, 1, 2, 2], [0, 1, 2, 3]), dict.fromkeys(range(4), "persistent"))
        self.assertEqual(attribute([1, 1, 2, 2], [1, 1, 1, 1], [0, 1, 2, 3]), dict.fromkeys(range(4), "not_hardware"))
        # Per class: the re-runs decide class a, not class b, so the vote stays inconclusive.
        classes = ["a", "a", "b", "b"]
        found = attribute([1, 2, 3, 4], [2, 2, 3, 4], [0, 1, 2, 3], classes)
        self.assertEqual(found, {0: "transient", 2: "persistent", 3: "persistent"})
        self.assertEqual(decided("inconclusive", [0, 1, 2, 3], found, classes), ("inconclusive", [0, 2, 3]))
        self.assertEqual(decided("inconclusive", [0, 1], {0: "transient"}, classes), ("sdc", [0]))
        # A peer outside the suspects (a probe failure broke the tie) is the right answer, as before.
        self.assertEqual(attribute([1, 2], [1, 2], [1]), {1: "persistent"})

    def test_vote_is_within_equivalence_classes(self):
        canary = CanaryCheck(make_model("clean"), loss_fn, batch=(torch.ones(2, 8), torch.ones(2, 1)))
        a, b = {"device": "A"}, {"device": "B"}
        canary.classes = [a, a, a, b]
        self.assertEqual(canary._vote_by_class([1, 1, 2, 3]), ("sdc", [2], [], [3]))
        canary.classes = [a, a, b, b]
        self.assertEqual(canary._vote_by_class([1, 1, 2, 2]), ("pass", [], [], []))
        canary.classes = [a, b]
        self.assertEqual(canary._vote_by_class([1, 2]), ("unchecked", [], [], [0, 1]))

    def test_checks_on_every_multiple_and_at_once_after_a_restore(self):
        x = torch.randn(8, 8)
        batch = (x, x.sum(1, keepdim=True))
        # A process resumed after step 20: the first call checks the restored state at once, then
        # every multiple of 5 (25 too, though only 4 steps after the first check).
        canary = CanaryCheck(make_model("clean"), loss_fn, batch=batch, every=5)
        self.assertEqual([s for s in range(21, 37) if canary.step(s) is not None], [21, 25, 30, 35])
        # A restore within the process (the step goes back): checked at once, then on multiples.
        self.assertEqual([s for s in range(20, 32) if canary.step(s) is not None], [20, 25, 30])
        # A check already made at a step is not repeated, by the cadence or before a save.
        self.assertIsNone(canary.step(30))
        checks = canary.checks
        self.assertEqual(canary.before_commit(30)["step"], 30)
        self.assertEqual(canary.checks, checks)
        self.assertEqual(canary.before_commit(33)["step"], 33)
        self.assertEqual(canary.checks, checks + 1)

    def test_cudnn_autotuning_is_off_inside_the_canary_only(self):
        seen = []

        def recording_loss(module, batch):
            seen.append(torch.backends.cudnn.benchmark)
            return loss_fn(module, batch)

        x = torch.randn(4, 8)
        canary = CanaryCheck(make_model("clean"), recording_loss, batch=(x, x.sum(1, keepdim=True)), every=1)
        torch.backends.cudnn.benchmark = True
        try:
            canary.step(0)
            self.assertTrue(torch.backends.cudnn.benchmark)
        finally:
            torch.backends.cudnn.benchmark = False
        self.assertEqual(seen, [False, False])

    def test_bad_loss_and_missing_batch_are_clear_errors(self):
        from sdcprobe import SDCProbeError

        canary = CanaryCheck(make_model("clean"), lambda module, batch: module(batch[0]), batch=(torch.ones(4, 8),))
        with self.assertRaisesRegex(SDCProbeError, r"scalar tensor.*shape \[4, 1\]"):
            canary.step(0)
        with self.assertRaisesRegex(SDCProbeError, "has no batch"):
            CanaryCheck(make_model("clean"), loss_fn).step(0)
        with self.assertRaisesRegex(TypeError, "loss_fn must be callable"):
            CanaryCheck(make_model("clean"), None)


if __name__ == "__main__":
    unittest.main()
