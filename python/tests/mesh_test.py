"""CanaryCheck and ReplicaCheck on a DeviceMesh: FSDP2 (fully_shard), HSDP and tensor parallelism
(parallelize_module) on CPU ranks over gloo, torch.multiprocessing processes.

Needs torch 2.6 or later (the torch2 venv, tests/python/torch_venv.sh): fully_shard and DeviceMesh.
Each job runs, in one process group, the layout with the checks and no fault, the same without the
checks, and the layout with the checks and a fault on one rank from FAULT_ONSET on: with on_sdc
"stop" and "raise" (every rank must end at the same check, the job's exit status 75), or recording
the alarms and going on.
"""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from sdcprobe import SDC_EXIT_STATUS, CanaryCheck, ReplicaCheck  # noqa: E402
from sdcprobe.replica import state_digest  # noqa: E402
from spawn_harness import (JobVerdictAssertions, init_gloo, read_events, run_job, run_log, sdc_loop,  # noqa: E402
                           write_outcome)

EVERY = 5
STEPS = 26
FAULT_ONSET = 12  # between two checks


def flip(t):
    """t with the sign and one significand bit of its first element flipped, as a faulty multiplier
    would (the sign too, so a ReLU after it cannot hide the fault)."""
    out = t.clone()
    out.view(-1)[:1].view(torch.int32).bitwise_xor_(-(1 << 31) | (1 << 20))
    return out


class FlipInBackward(torch.autograd.Function):
    """The identity whose backward flips a bit of the gradient: a wrong local weight gradient in the
    first layer that nothing reduces before the canary compares it (its input needs no gradient,
    so no tensor-parallel collective spreads it)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        # Added, not a flipped bit: the gradient is often 0 after the ReLU, and a flipped low bit
        # of 0 is a denormal that the weight gradient's sum rounds away.
        out = grad.clone()
        out.view(-1)[:1] += 1.0
        return out


def loss_fn(module, batch):
    x, y = batch
    return (module(x) - y).pow(2).mean()


def build(layout, mesh):
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)  # the same initial weights everywhere
    model = torch.nn.Sequential(torch.nn.Linear(8, 24), torch.nn.ReLU(), torch.nn.Linear(24, 8))
    if layout in ("fsdp_tp", "tp2x2"):
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
        fully_shard(model, mesh=mesh["dp"])
    else:  # fsdp4: a 1-D mesh; hsdp: replicate over the first dimension, shard over the second
        fully_shard(model, mesh=mesh)
    return model


def train(layout, mesh, checks, faulty_rank, tmp, tag, on_sdc=None):
    """One run of STEPS in sdc_loop; on_sdc None: the alarms are recorded and training goes on."""
    rank = dist.get_rank()
    model = build(layout, mesh)
    optim = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    names = mesh.mesh_dim_names
    # Each data-parallel coordinate its own batches; tensor-parallel peers the same.
    dp_coordinate = mesh.get_coordinate()[0]
    data = torch.Generator().manual_seed(100 + dp_coordinate)
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(3))
    alarms, verdicts, untouched = [], [], True
    faulty = {"on": False}
    if rank == faulty_rank and layout != "hsdp":
        hook = (lambda m, i, out: flip(out) if faulty["on"] else None) if layout == "fsdp4" else \
            (lambda m, i, out: FlipInBackward.apply(out) if faulty["on"] else None)
        model[0].register_forward_hook(hook)
    check = None
    log = run_log(tmp, tag, rank)
    if checks:
        if layout == "hsdp":
            check = ReplicaCheck(mesh=mesh, dp_dims=(names[0],), every=EVERY, on_sdc=on_sdc or alarms.append,
                                 event_log=log)
        else:
            check = CanaryCheck(model, loss_fn, batch=(x, x.flip(1)), mesh=mesh, dp_dims=("dp",), every=EVERY,
                                on_sdc=on_sdc or alarms.append, event_log=log)

    def train_step(step):
        faulty["on"] = step >= FAULT_ONSET
        xb = torch.randn(8, 8, generator=data)
        optim.zero_grad()
        loss_fn(model, (xb, xb.flip(1))).backward()
        optim.step()
        if layout == "hsdp" and rank == faulty_rank and faulty["on"]:
            with torch.no_grad():  # a wrong update of this rank's shard
                local = next(model.parameters()).to_local()
                local.copy_(flip(local))

    def check_step(step):
        nonlocal untouched
        if check is None:
            return False
        if layout == "hsdp":
            v = check.step(step, [model.parameters(), optim.state_dict()])
        else:
            before = state_digest([[p.grad for p in model.parameters()], list(model.parameters())])
            v = check.step(step)
            untouched &= state_digest([[p.grad for p in model.parameters()], list(model.parameters())]) == before
        if v is not None:
            verdicts.append((step, v["verdict"]))
        return check.should_stop

    ended = sdc_loop(log, STEPS, train_step, check_step)
    if check is not None:
        check.close()
    return {"final": "%x,%x" % state_digest([model.parameters(), optim.state_dict()]), "verdicts": verdicts,
            "alarms": [{k: a[k] for k in ("verdict", "step", "last_good_step", "suspects")} for a in alarms],
            "untouched": untouched, "ended": ended}


def layout_runs(layout, shape, faulty_rank, tmp):
    """This rank's outcome of one layout's runs; each run's logs are named after "<layout>-<run>"."""
    from torch.distributed.device_mesh import init_device_mesh
    names = ("dp_replicate", "dp_shard") if layout == "hsdp" else ("dp", "tp")[:len(shape)]
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    outcome = {"rank": dist.get_rank(), "coordinate": mesh.get_coordinate()}
    if layout != "tp2x2":
        outcome["clean"] = train(layout, mesh, True, None, tmp, layout + "-clean")
        outcome["without_checks"] = train(layout, mesh, False, None, tmp, layout + "-none")["final"]
    if layout in ("fsdp4", "tp2x2"):
        outcome["faulty"] = train(layout, mesh, True, faulty_rank, tmp, layout + "-faulty")
    else:  # as a user runs it: every rank raises, or stops
        for mode in ("raise", "stop"):
            run = train(layout, mesh, True, faulty_rank, tmp, layout + "-" + mode, on_sdc=mode)
            outcome[layout + "-" + mode], outcome[mode + "_verdicts"] = run["ended"], run["verdicts"]
    return outcome


# A pipeline of two stages, each replicated three times: mesh ("pp", "dp") 2 x 3, rank = 3 * pp + dp.
PP_STEPS = 16
PP_ONSET = 7  # the faulty rank's products go wrong from this step on: the check at 10 sees it
STAGE_WIDTHS = ((8, 16), (16, 4))  # each stage's Linear: stage 0's output is stage 1's input


def stage_loss(module, batch):
    """The canary's loss of one stage on a fixed input of that stage: it needs neither the previous
    stage's activations nor the next stage's gradients."""
    return module(batch).pow(2).mean()


def pipeline_train(mesh, faulty_rank, tmp, tag, on_sdc=None):
    """Manual stage split: each pp rank owns its stage (a Linear and a ReLU), sends its activations
    to the next stage and receives their gradient back; each stage's gradients are averaged over its
    dp peers. A CanaryCheck and a ReplicaCheck per stage, over mesh ("pp", "dp") with dp_dims dp;
    on_sdc None: the alarms are recorded and training goes on."""
    rank, (pp, dp) = dist.get_rank(), mesh.get_coordinate()
    width_in, width_out = STAGE_WIDTHS[pp]
    torch.manual_seed(pp)  # the stage's weights: the same on its dp peers, another stage's elsewhere
    stage = torch.nn.Sequential(torch.nn.Linear(width_in, width_out), torch.nn.ReLU())
    optim = torch.optim.SGD(stage.parameters(), lr=0.05, momentum=0.9)
    dp_group = mesh["dp"].get_group()
    faulty = {"on": False}
    if rank == faulty_rank:
        stage[0].register_forward_hook(lambda m, i, out: flip(out) if faulty["on"] else None)
    alarms = []
    log = run_log(tmp, tag, rank)
    fixed = torch.randn(4, width_in, generator=torch.Generator().manual_seed(7 + pp))
    canary = CanaryCheck(stage, stage_loss, batch=fixed, mesh=mesh, dp_dims=("dp",), every=EVERY,
                         on_sdc=on_sdc or alarms.append, event_log=log)
    replica = ReplicaCheck(mesh=mesh, dp_dims=("dp",), every=EVERY, on_sdc=on_sdc or alarms.append, event_log=log)
    data = torch.Generator().manual_seed(100 + dp)  # each dp coordinate its own batches
    verdicts = []

    def train_step(step):
        faulty["on"] = step >= PP_ONSET
        optim.zero_grad()
        if pp == 0:
            x = torch.randn(4, 8, generator=data)
            out = stage(x)
            dist.send(out.detach(), rank + 3)
            grad = torch.empty_like(out)
            dist.recv(grad, rank + 3)
            out.backward(grad)
        else:
            x = torch.empty(4, 16)
            dist.recv(x, rank - 3)
            x.requires_grad_()
            stage(x).sum(1).sub(1).pow(2).mean().backward()
            dist.send(x.grad, rank - 3)
        for p in stage.parameters():
            dist.all_reduce(p.grad, group=dp_group)
            p.grad /= 3
        optim.step()

    def check_step(step):
        for name, v in (("canary", canary.step(step)), ("replica", replica.step(step, [stage.parameters(),
                                                                                         optim.state_dict()]))):
            if v is not None:
                verdicts.append((name, step, v["verdict"]))
        return canary.should_stop or replica.should_stop

    ended = sdc_loop(log, PP_STEPS, train_step, check_step)
    canary.close()
    replica.close()
    return {"verdicts": verdicts, "log": log.path, "ended": ended,
            "alarms": [{k: a[k] for k in ("verdict", "step", "suspects")} for a in alarms]}


def pipeline_runs(faulty_rank, tmp):
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (2, 3), mesh_dim_names=("pp", "dp"))
    outcome = {"rank": dist.get_rank(), "coordinate": mesh.get_coordinate(),
               "clean": pipeline_train(mesh, None, tmp, "pipeline-clean")}
    for mode in ("raise", "stop"):
        run = pipeline_train(mesh, faulty_rank, tmp, "pipeline-" + mode, on_sdc=mode)
        outcome["pipeline-" + mode], outcome[mode + "_verdicts"] = run["ended"], run["verdicts"]
    return outcome


def failure_runs(failing_rank):
    """Checks on mesh ("tp", "dp") 2 x 2 whose first check fails on one rank: a ReplicaCheck given a
    tensor it cannot digest there, then a CanaryCheck whose vote group is not made of replicas.
    Every rank must end each check with an error; a hang ends the job at the process group's timeout."""
    from torch.distributed.device_mesh import init_device_mesh
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("tp", "dp"))
    outcome = {"rank": rank}
    check = ReplicaCheck(mesh=mesh, dp_dims=("dp",), every=1)
    tensors = [torch.ones(4, device="meta" if rank == failing_rank else "cpu")]
    try:
        check.step(0, tensors)
    except Exception as e:
        outcome["replica"] = "%s: %s" % (type(e).__name__, e)
    torch.manual_seed(1 if rank == failing_rank else 0)  # its parameters differ from its dp peer's
    model = torch.nn.Linear(4, 1)
    canary = CanaryCheck(model, lambda m, b: m(b).sum(), batch=torch.ones(2, 4), mesh=mesh, dp_dims=("dp",), every=1)
    try:
        canary.step(0)
    except Exception as e:
        outcome["canary"] = "%s: %s" % (type(e).__name__, e)
    return outcome


def job_worker(rank, world, tmp, layouts):
    """The layouts' runs one after another in one process group (a gloo timeout of 60 s, so a hang
    fails the test): starting the interpreters is most of a job's time. The process exits as a
    job stopped for SDC does, with SDC_EXIT_STATUS, when its last run stopped."""
    from datetime import timedelta
    torch.set_num_threads(1)
    init_gloo(tmp, rank, world, timeout=timedelta(seconds=60))
    outcome = {"rank": rank}
    for layout, shape, faulty_rank in layouts:
        if layout == "pipeline":
            outcome[layout] = pipeline_runs(faulty_rank, tmp)
        elif layout == "error":
            outcome[layout] = failure_runs(faulty_rank)
        else:
            outcome[layout] = layout_runs(layout, shape, faulty_rank, tmp)
    write_outcome(tmp, rank, outcome)
    dist.destroy_process_group()
    last = outcome[layouts[-1][0]]
    sys.exit(SDC_EXIT_STATUS if last.get(layouts[-1][0] + "-stop", {}).get("how") == "stop" else 0)


def run_mesh_job(world, layouts, exit_status=0):
    """{layout: every rank's outcome of it} and the job's folder."""
    tmp, outcomes = run_job(job_worker, world, layouts, prefix="mesh-%d-" % world, exit_status=exit_status)
    return tmp, {layout: [o[layout] for o in outcomes] for layout, _, _ in layouts}


class MeshChecks(JobVerdictAssertions):
    def assert_clean(self, outcomes, check_steps):
        for o in outcomes:
            clean = o["clean"]
            self.assertEqual(clean["alarms"], [], "rank %d" % o["rank"])
            self.assertEqual(clean["verdicts"], [[s, "pass"] for s in check_steps], "rank %d" % o["rank"])
            self.assertTrue(clean["untouched"], "the canary changed .grad or a parameter on rank %d" % o["rank"])
            self.assertEqual(clean["final"], o["without_checks"], "rank %d ends elsewhere with the checks" % o["rank"])

    def assert_job_stops_at_one_check(self, layout, outcomes, faulty_rank, check, step):
        """With on_sdc "raise" and "stop", every rank of the mesh, of the faulty rank's vote group
        or another, ends at the check at `step` naming the faulty rank."""
        for mode in ("raise", "stop"):
            self.assert_job_stopped(self.tmp, layout + "-" + mode, outcomes, mode, step=step, suspect=faulty_rank,
                                    check=check, last_good_step=step - EVERY)
        for o in outcomes:  # "raise" returned no verdict at that check; "stop" returned the job's
            self.assertEqual(o["stop_verdicts"][-1][-1], "sdc", "rank %d" % o["rank"])


class FourRanksTest(unittest.TestCase, MeshChecks):
    """FSDP2 on 4 ranks, FSDP2 + TP on 2 x 2 and a failing first check, in one job of 4 ranks."""

    @classmethod
    def setUpClass(cls):
        cls.tmp, cls.layouts = run_mesh_job(4, [("fsdp4", (4,), 2), ("tp2x2", (2, 2), 2), ("error", (2, 2), 3)])

    def test_fsdp2_on_4_ranks(self):
        outcomes = self.layouts["fsdp4"]
        self.assert_clean(outcomes, range(0, STEPS, EVERY))
        for o in outcomes:  # one vote group: every rank names rank 2 once, and training goes on
            alarms = o["faulty"]["alarms"]
            self.assertEqual([(a["verdict"], a["step"], [s["rank"] for s in a["suspects"]]) for a in alarms],
                             [("sdc", 15, [2])], "rank %d" % o["rank"])
            self.assertEqual(list(alarms[0]["suspects"][0]["mesh"].values()), outcomes[2]["coordinate"])
            self.assertEqual(o["faulty"]["ended"], {"ended": STEPS - 1, "how": "done"})

    def test_two_members_per_vote_is_inconclusive(self):
        for o in self.layouts["tp2x2"]:  # rank 2 (dp 1, tp 0) votes with rank 0 alone
            alarms = o["faulty"]["alarms"]  # every rank, of either vote group, has the job's verdict
            self.assertEqual([a["verdict"] for a in alarms], ["inconclusive"], "rank %d" % o["rank"])
            self.assertEqual(sorted(s["rank"] for s in alarms[0]["suspects"]), [0, 2])
            sdc = [e for e in read_events(os.path.join(self.tmp, "events-tp2x2-faulty-%d.jsonl" % o["rank"]))
                   if e["event"] == "sdc_detected"]
            self.assertEqual(len(sdc), 1)
            self.assertNotIn("suspect_rank", sdc[0])
            self.assertNotIn("device", sdc[0])

    def test_an_error_on_one_rank_ends_every_rank(self):
        for o in self.layouts["error"]:  # rank 3: tp 1, dp 1
            if o["rank"] == 3:
                self.assertEqual(o["replica"], "SDCProbeError: tensor on meta: ReplicaCheck digests CPU and CUDA "
                                               "tensors")
            else:
                self.assertEqual(o["replica"], "SDCProbeError: the replica check at step 0 failed on rank 3 (its own "
                                               "error says why): every rank stops with it")
            if o["rank"] in (2, 3):  # the vote group whose members differ
                self.assertRegex(o["canary"], r"^SDCProbeError: CanaryCheck: the replicas' parameters or canary "
                                              r"batch differ at the first check \(rank [23]\)")
            else:
                self.assertEqual(o["canary"], "SDCProbeError: the canary check at step 0 failed on rank 3 (its own "
                                              "error says why): every rank stops with it")


class SixRanksTest(unittest.TestCase, MeshChecks):
    """FSDP2 + TP 3 x 2, HSDP 3 x 2 and pipeline stages 2 x 3 in one job of 6 ranks, each clean, without
    the checks, and with a fault on one rank under on_sdc "raise" and "stop"; the job exits with 75."""

    @classmethod
    def setUpClass(cls):
        cls.tmp, cls.layouts = run_mesh_job(6, [("fsdp_tp", (3, 2), 2), ("hsdp", (3, 2), 3), ("pipeline", (2, 3), 4)],
                                            exit_status=SDC_EXIT_STATUS)

    def test_fsdp2_with_tp_on_3x2(self):
        # Rank 2 (dp 1, tp 0) votes with ranks 0 and 4; ranks 1, 3 and 5 vote at tp 1 and must stop too.
        outcomes = self.layouts["fsdp_tp"]
        self.assert_clean(outcomes, range(0, STEPS, EVERY))
        self.assert_job_stops_at_one_check("fsdp_tp", outcomes, 2, "canary", 15)

    def test_hsdp_3_replicas_of_2_shards(self):
        # Rank 3 (replica 1, shard 1) votes with ranks 1 and 5.
        outcomes = self.layouts["hsdp"]
        self.assert_clean(outcomes, range(0, STEPS, EVERY))
        self.assert_job_stops_at_one_check("hsdp", outcomes, 3, "replica", 15)

    def test_pipeline_stages_vote_among_their_dp_peers(self):
        outcomes = self.layouts["pipeline"]
        checks = [(name, s) for s in range(0, PP_STEPS, EVERY) for name in ("canary", "replica")]
        for o in outcomes:
            self.assertEqual(o["clean"]["alarms"], [], "rank %d" % o["rank"])
            self.assertEqual(o["clean"]["verdicts"], [[n, s, "pass"] for n, s in checks], "rank %d" % o["rank"])
            # Stopping, the replica check passes at 10 (the dp all-reduce gave every peer the same wrong
            # gradient), and the canary names rank 4 (pp 1, dp 1) on every rank, stage 0's too.
            self.assertEqual(o["stop_verdicts"][-2:], [["canary", 10, "sdc"], ["replica", 10, "pass"]])
        for mode in ("raise", "stop"):
            self.assert_job_stopped(self.tmp, "pipeline-" + mode, outcomes, mode, step=10, suspect=4, check="canary",
                                    last_good_step=5)
        sdc = [e for e in read_events(os.path.join(self.tmp, "events-pipeline-stop-0.jsonl"))
               if e["event"] == "sdc_detected"][0]
        self.assertEqual([(s["rank"], s["mesh"], s["cause"]) for s in sdc["suspects"]],
                         [(4, {"pp": 1, "dp": 1}, "compute")])


class MeshArgumentsTest(unittest.TestCase):
    """On one rank, on any torch (Debian's 1.13 has no DeviceMesh): bad mesh arguments are clear errors."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mesh-args-")
        init_gloo(cls.tmp, 0, 1)

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()

    def test_a_mesh_must_be_a_device_mesh_with_names(self):
        from sdcprobe import SDCProbeError
        with self.assertRaisesRegex(SDCProbeError, "DeviceMesh with mesh_dim_names"):
            ReplicaCheck(mesh="dp", dp_dims=("dp",))
        with self.assertRaisesRegex(ValueError, "dp_dims needs mesh="):
            ReplicaCheck(dp_dims=("dp",))

    @unittest.skipUnless(hasattr(dist, "device_mesh"), "no DeviceMesh in torch %s" % torch.__version__)
    def test_dp_dims_must_name_mesh_dimensions(self):
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("dp",))
        for dims in ("dp", (), ("tp",)):
            with self.assertRaisesRegex(ValueError, r"dp_dims must name dimensions of the mesh \['dp'\]"):
                ReplicaCheck(mesh=mesh, dp_dims=dims)
        with self.assertRaisesRegex(ValueError, "not both"):
            ReplicaCheck(group=dist.group.WORLD, mesh=mesh, dp_dims=("dp",))
        check = ReplicaCheck(mesh=mesh, dp_dims=("dp",), every=1)
        self.assertEqual(check.members[0]["mesh"], {"dp": 0})


if __name__ == "__main__":
    unittest.main()
