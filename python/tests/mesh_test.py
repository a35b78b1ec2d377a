"""CanaryCheck and ReplicaCheck on a DeviceMesh: FSDP2 (fully_shard), HSDP and tensor parallelism
(parallelize_module) on CPU ranks over gloo, torch.multiprocessing processes.

Needs torch 2.6 or later (the torch2 venv, tests/python/torch_venv.sh): fully_shard and DeviceMesh.
Each job runs, in one process group, the layout with the checks and no fault, the same without the
checks, and the layout with the checks and a fault on one rank from FAULT_ONSET on.
"""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from sdcprobe import CanaryCheck, ReplicaCheck  # noqa: E402
from sdcprobe.replica import state_digest  # noqa: E402
from spawn_harness import init_gloo, read_events, run_job, write_outcome  # noqa: E402

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


def train(layout, mesh, checks, faulty_rank, tmp, tag):
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
    if checks:
        log = os.path.join(tmp, "events-%s-%d.jsonl" % (tag, rank))
        if layout == "hsdp":
            check = ReplicaCheck(mesh=mesh, dp_dims=(names[0],), every=EVERY, on_sdc=alarms.append, event_log=log)
        else:
            check = CanaryCheck(model, loss_fn, batch=(x, x.flip(1)), mesh=mesh, dp_dims=("dp",), every=EVERY,
                                on_sdc=alarms.append, event_log=log)
    for step in range(STEPS):
        faulty["on"] = step >= FAULT_ONSET
        xb = torch.randn(8, 8, generator=data)
        optim.zero_grad()
        loss_fn(model, (xb, xb.flip(1))).backward()
        optim.step()
        if layout == "hsdp" and rank == faulty_rank and faulty["on"]:
            with torch.no_grad():  # a wrong update of this rank's shard
                local = next(model.parameters()).to_local()
                local.copy_(flip(local))
        if check is None:
            continue
        if layout == "hsdp":
            v = check.step(step, [model.parameters(), optim.state_dict()])
        else:
            before = state_digest([[p.grad for p in model.parameters()], list(model.parameters())])
            v = check.step(step)
            untouched &= state_digest([[p.grad for p in model.parameters()], list(model.parameters())]) == before
        if v is not None:
            verdicts.append((step, v["verdict"]))
    if check is not None:
        check.close()
    return {"final": "%x,%x" % state_digest([model.parameters(), optim.state_dict()]), "verdicts": verdicts,
            "alarms": [{k: a[k] for k in ("verdict", "step", "last_good_step", "suspects")} for a in alarms],
            "untouched": untouched}


def worker(rank, world, tmp, layout, shape, faulty_rank):
    from torch.distributed.device_mesh import init_device_mesh
    torch.set_num_threads(1)
    init_gloo(tmp, rank, world)
    names = ("dp_replicate", "dp_shard") if layout == "hsdp" else ("dp", "tp")[:len(shape)]
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    outcome = {"rank": rank, "coordinate": mesh.get_coordinate()}
    if faulty_rank is None or layout != "tp2x2":
        outcome["clean"] = train(layout, mesh, True, None, tmp, "clean")
        outcome["without_checks"] = train(layout, mesh, False, None, tmp, "none")["final"]
    outcome["faulty"] = train(layout, mesh, True, faulty_rank, tmp, "faulty")
    write_outcome(tmp, rank, outcome)
    dist.destroy_process_group()


# A pipeline of two stages, each replicated three times: mesh ("pp", "dp") 2 x 3, rank = 3 * pp + dp.
PP_STEPS = 16
PP_ONSET = 7  # the faulty rank's products go wrong from this step on: the check at 10 sees it
STAGE_WIDTHS = ((8, 16), (16, 4))  # each stage's Linear: stage 0's output is stage 1's input


def stage_loss(module, batch):
    """The canary's loss of one stage on a fixed input of that stage: it needs neither the previous
    stage's activations nor the next stage's gradients."""
    return module(batch).pow(2).mean()


def pipeline_train(mesh, faulty_rank, tmp, tag):
    """Manual stage split: each pp rank owns its stage (a Linear and a ReLU), sends its activations
    to the next stage and receives their gradient back; each stage's gradients are averaged over its
    dp peers. A CanaryCheck and a ReplicaCheck per stage, over mesh ("pp", "dp") with dp_dims dp."""
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
    log = os.path.join(tmp, "events-%s-%d.jsonl" % (tag, rank))
    fixed = torch.randn(4, width_in, generator=torch.Generator().manual_seed(7 + pp))
    canary = CanaryCheck(stage, stage_loss, batch=fixed, mesh=mesh, dp_dims=("dp",), every=EVERY, on_sdc=alarms.append,
                         event_log=log)
    replica = ReplicaCheck(mesh=mesh, dp_dims=("dp",), every=EVERY, on_sdc=alarms.append, event_log=log)
    data = torch.Generator().manual_seed(100 + dp)  # each dp coordinate its own batches
    verdicts = []
    for step in range(PP_STEPS):
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
        for name, v in (("canary", canary.step(step)), ("replica", replica.step(step, [stage.parameters(),
                                                                                         optim.state_dict()]))):
            if v is not None:
                verdicts.append((name, step, v["verdict"]))
    canary.close()
    replica.close()
    return {"verdicts": verdicts, "log": log,
            "alarms": [{k: a[k] for k in ("verdict", "step", "suspects")} for a in alarms]}


def pipeline_worker(rank, world, tmp, faulty_rank):
    from torch.distributed.device_mesh import init_device_mesh
    torch.set_num_threads(1)
    init_gloo(tmp, rank, world)
    mesh = init_device_mesh("cpu", (2, 3), mesh_dim_names=("pp", "dp"))
    outcome = {"rank": rank, "coordinate": mesh.get_coordinate(), "clean": pipeline_train(mesh, None, tmp, "clean"),
               "faulty": pipeline_train(mesh, faulty_rank, tmp, "faulty")}
    write_outcome(tmp, rank, outcome)
    dist.destroy_process_group()


def failure_worker(rank, world, tmp, failing_rank):
    """Checks on mesh ("tp", "dp") 2 x 2 whose first check fails on one rank: a ReplicaCheck given a
    tensor it cannot digest there, then a CanaryCheck whose vote group is not made of replicas.
    Every rank must end each check with an error; a hang ends the job at the process group's timeout."""
    from datetime import timedelta
    from torch.distributed.device_mesh import init_device_mesh
    torch.set_num_threads(1)
    init_gloo(tmp, rank, world, timeout=timedelta(seconds=60))
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
    write_outcome(tmp, rank, outcome)
    dist.destroy_process_group()


def run_mesh_job(layout, shape, faulty_rank):
    world = 1
    for n in shape:
        world *= n
    return run_job(worker, world, layout, shape, faulty_rank, prefix="mesh-")


class MeshTest(unittest.TestCase):
    def assert_clean(self, outcomes, check_steps):
        for o in outcomes:
            clean = o["clean"]
            self.assertEqual(clean["alarms"], [], "rank %d" % o["rank"])
            self.assertEqual(clean["verdicts"], [[s, "pass"] for s in check_steps], "rank %d" % o["rank"])
            self.assertTrue(clean["untouched"], "the canary changed .grad or a parameter on rank %d" % o["rank"])
            self.assertEqual(clean["final"], o["without_checks"], "rank %d ends elsewhere with the checks" % o["rank"])

    def assert_named_alone(self, tmp, outcomes, faulty_rank, voters, check):
        """Every rank of `voters` (the faulty rank's vote group) names the faulty rank alone, within
        two intervals of the onset; every other rank passes every check."""
        for o in outcomes:
            alarms = o["faulty"]["alarms"]
            if o["rank"] not in voters:
                self.assertEqual(alarms, [], "rank %d outside the faulty group" % o["rank"])
                self.assertEqual({v for _, v in o["faulty"]["verdicts"]}, {"pass"})
                continue
            self.assertEqual(len(alarms), 1, "rank %d: %r" % (o["rank"], alarms))
            a = alarms[0]
            self.assertEqual(a["verdict"], "sdc")
            self.assertTrue(FAULT_ONSET < a["step"] <= FAULT_ONSET + 2 * EVERY, a)
            self.assertEqual([s["rank"] for s in a["suspects"]], [faulty_rank])
            s = a["suspects"][0]
            self.assertEqual(list(s["mesh"].values()), outcomes[faulty_rank]["coordinate"])
            self.assertTrue(s["host"] and s["device"].startswith("CPU-") and s["pci_bus_id"].startswith("cpu:"))
            sdc = [e for e in read_events(os.path.join(tmp, "events-faulty-%d.jsonl" % o["rank"]))
                   if e["event"] == "sdc_detected"]
            self.assertEqual([(e["check"], e["suspect_rank"]) for e in sdc], [(check, faulty_rank)])

    def test_fsdp2_on_4_ranks(self):
        tmp, outcomes = run_mesh_job("fsdp4", (4,), faulty_rank=2)
        self.assert_clean(outcomes, range(0, STEPS, EVERY))
        self.assert_named_alone(tmp, outcomes, 2, {0, 1, 2, 3}, "canary")

    def test_fsdp2_with_tp_on_3x2(self):
        tmp, outcomes = run_mesh_job("fsdp_tp", (3, 2), faulty_rank=2)  # dp 1, tp 0: votes with ranks 0 and 4
        self.assert_clean(outcomes, range(0, STEPS, EVERY))
        self.assert_named_alone(tmp, outcomes, 2, {0, 2, 4}, "canary")

    def test_hsdp_3_replicas_of_2_shards(self):
        tmp, outcomes = run_mesh_job("hsdp", (3, 2), faulty_rank=3)  # replica 1, shard 1: votes with ranks 1 and 5
        self.assert_clean(outcomes, range(0, STEPS, EVERY))
        self.assert_named_alone(tmp, outcomes, 3, {1, 3, 5}, "replica")

    def test_two_members_per_vote_is_inconclusive(self):
        tmp, outcomes = run_mesh_job("tp2x2", (2, 2), faulty_rank=2)  # dp 1, tp 0: votes with rank 0 alone
        for o in outcomes:
            alarms = o["faulty"]["alarms"]
            if o["rank"] in (1, 3):
                self.assertEqual(alarms, [])
                continue
            self.assertEqual([a["verdict"] for a in alarms], ["inconclusive"])
            self.assertEqual(sorted(s["rank"] for s in alarms[0]["suspects"]), [0, 2])
            sdc = [e for e in read_events(os.path.join(tmp, "events-faulty-%d.jsonl" % o["rank"]))
                   if e["event"] == "sdc_detected"]
            self.assertEqual(len(sdc), 1)
            self.assertNotIn("suspect_rank", sdc[0])
            self.assertNotIn("device", sdc[0])

    def test_pipeline_stages_vote_among_their_dp_peers(self):
        tmp, outcomes = run_job(pipeline_worker, 6, 4, prefix="mesh-pp-")  # rank 4: pp 1, dp 1
        checks = [(name, s) for s in range(0, PP_STEPS, EVERY) for name in ("canary", "replica")]
        for o in outcomes:
            self.assertEqual(o["clean"]["alarms"], [], "rank %d" % o["rank"])
            self.assertEqual(o["clean"]["verdicts"], [[n, s, "pass"] for n, s in checks], "rank %d" % o["rank"])
            faulty = o["faulty"]
            # The replica check passes throughout: the dp all-reduce gives every peer the wrong gradient.
            self.assertEqual({v for n, _, v in faulty["verdicts"] if n == "replica"}, {"pass"})
            sdc = [e for e in read_events(faulty["log"]) if e["event"] == "sdc_detected"]
            if o["coordinate"][0] == 0:  # stage 0's group (ranks 0, 1, 2): every check passes
                self.assertEqual(faulty["alarms"], [], "rank %d" % o["rank"])
                self.assertEqual(sdc, [])
                continue
            self.assertEqual(len(faulty["alarms"]), 1, "rank %d: %r" % (o["rank"], faulty["alarms"]))
            a = faulty["alarms"][0]
            self.assertEqual((a["verdict"], a["step"]), ("sdc", 10))
            self.assertEqual([(s["rank"], s["mesh"], s["cause"]) for s in a["suspects"]],
                             [(4, {"pp": 1, "dp": 1}, "compute")])
            self.assertEqual([(e["check"], e["suspect_rank"]) for e in sdc], [("canary", 4)])

    def test_an_error_on_one_rank_ends_every_rank(self):
        _, outcomes = run_job(failure_worker, 4, 3, prefix="mesh-error-")  # rank 3: tp 1, dp 1
        for o in outcomes:
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
