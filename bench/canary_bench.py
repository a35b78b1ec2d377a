"""The canary step in a CPU DDP loop (gloo, torch.multiprocessing ranks): its overhead at
every="auto" within a 1% budget, and its detection latency in steps over a seeded campaign of
injected compute faults, against the planner's prediction, beside the replica check's for memory
faults. Prints only; nothing is asserted (docs/coverage.md quotes it).

    /usr/bin/python3 bench/canary_bench.py overhead [--ranks 2] [--steps 1500]
    build/release/torch2-venv/bin/python bench/canary_bench.py overhead --layout fsdp2|fsdp2_tp|hsdp [--ranks 4]
    /usr/bin/python3 bench/canary_bench.py campaign [--ranks 3] [--trials 40] [--seed 2026]

overhead: the same loop three times in one run: without the canary, with it at the planner's
cadence for the default SDC rate, and at a high SDC rate where the 1% budget sets the cadence. It
prints the canary's share of the loop's time (its own measured seconds), the step-time ratio
against the loop without it, and the interval chosen.

--layout (torch 2.2 or later) runs the overhead loop on a DeviceMesh instead of DDP: fsdp2
(fully_shard over all ranks, the canary over "dp"), fsdp2_tp (a ranks/2 x 2 mesh, the first two
layers column- then row-parallel over "tp", fully_shard over "dp", the canary over "dp") or hsdp
(ranks/2 replicas of 2 shards, the canary over both dimensions).

campaign: each trial builds a new canary (its first check measures determinism), then a fault
starts at a seeded step on a seeded rank: a forward hook on one of the model's nn.Linear layers
flips a random bit of a random output element on every call ("permanent") or on each call with
probability 1/2 ("intermittent"). Latency is the step of detection minus the first faulty step.
The planner's model (docs/goodput.md) puts the latency of a check every P steps at about P/2:
(P - 1) / 2 for a fault first seen at a uniform step when every check sees it. When a check sees
an active fault with probability q (an intermittent fault; a low significand bit that later
rounding hides), P (1 - q) / q more; q is measured as detections over the checks run while the
fault was active. The replica check's rows flip one bit of a parameter instead.
"""

import argparse
import copy
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from sdcprobe import CanaryCheck, ReplicaCheck  # noqa: E402

HIGH_SDC_RATE = 1e5  # per device-day: far above any fleet's, so that the budget binds


def make_model(width):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(), torch.nn.Linear(2 * width, width),
                               torch.nn.GELU(), torch.nn.Linear(width, 1))


def loss_fn(module, batch):
    x, y = batch
    return (module(x) - y).pow(2).mean()


def setup(rank, world, tmp):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rendezvous"), rank=rank,
                            world_size=world)


class Job:
    """One replica's model (DDP, or a layout on a DeviceMesh), optimizer and data."""

    def __init__(self, rank, width, batch, layout="ddp"):
        self.layout, self.mesh, self.dp_dims = layout, None, None
        if layout == "ddp":
            self.model = torch.nn.parallel.DistributedDataParallel(make_model(width))
            self.module = self.model.module
        else:
            self.model = self.module = self._on_mesh(layout, make_model(width))
            rank = self.mesh.get_coordinate()[0]  # tensor-parallel peers share their batches
        self.optim = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.data = torch.Generator().manual_seed(100 + rank)
        self.width, self.batch = width, batch

    def _on_mesh(self, layout, model):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        world = dist.get_world_size()
        if layout == "fsdp2":
            self.mesh, self.dp_dims = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",)), ("dp",)
            fully_shard(model, mesh=self.mesh)
        elif layout == "hsdp":
            self.mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp_replicate", "dp_shard"))
            self.dp_dims = ("dp_replicate", "dp_shard")
            fully_shard(model, mesh=self.mesh)
        else:
            from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
            self.mesh, self.dp_dims = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp")), ("dp",)
            parallelize_module(model, self.mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
            fully_shard(model, mesh=self.mesh["dp"])
        return model

    def canary(self, **options):
        if self.mesh is not None:
            options.update(mesh=self.mesh, dp_dims=self.dp_dims)
        return CanaryCheck(self.module, loss_fn, **options)

    def step(self):
        x = torch.randn(self.batch, self.width, generator=self.data)
        batch = (x, x.mean(1, keepdim=True))
        self.optim.zero_grad()
        loss_fn(self.model, batch).backward()
        self.optim.step()
        return batch


# ---- overhead ---------------------------------------------------------------------------------


def overhead_worker(rank, world, tmp, steps, width, batch, layout):
    setup(rank, world, tmp)
    job = Job(rank, width, batch, layout)
    for _ in range(50):  # warm-up: allocator, gloo buffers
        job.step()
    results = {}
    for name, sdc_rate in (("baseline", None), ("auto, default SDC rate", 0), ("auto, budget-bound", HIGH_SDC_RATE)):
        canary = None if sdc_rate is None else job.canary(every="auto", budget=0.01, sdc_rate=sdc_rate or None)
        checks, canary_s, steady_s, steady_start = 0, 0.0, 0.0, None
        dist.barrier()
        start = time.perf_counter()
        for step in range(steps):
            batch = job.step()
            if canary is not None:
                v = canary.step(step, batch)
                if v is not None:
                    checks += 1
                    canary_s += v["seconds"]
                    if checks == 3:  # the first two checks calibrate; the planner's cadence from here
                        steady_start = time.perf_counter()
                    elif checks > 3:
                        steady_s += v["seconds"]
        loop_s = time.perf_counter() - start
        results[name] = {"loop_s": loop_s, "checks": checks, "canary_s": canary_s, "every": canary.every if canary else None,
                         "steady_share": steady_s / (time.perf_counter() - steady_start) if steady_start else None}
    if rank == 0:
        with open(os.path.join(tmp, "overhead.json"), "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def overhead(args):
    tmp = tempfile.mkdtemp(prefix="canary-bench-")
    mp.start_processes(overhead_worker, args=(args.ranks, tmp, args.steps, args.width, args.batch, args.layout),
                       nprocs=args.ranks,
                       join=True, start_method="spawn")
    with open(os.path.join(tmp, "overhead.json")) as f:
        results = json.load(f)
    base = results["baseline"]["loop_s"]
    print("canary overhead: %s on %d ranks (gloo, 1 thread each), MLP width %d, batch %d, %d steps, budget 1%%"
          % (args.layout, args.ranks, args.width, args.batch, args.steps))
    print("| cadence | checks | final every | canary share of the loop | steady share (after calibration) "
          "| step time / without canary |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        if name == "baseline":
            continue
        steady = "%.3f%%" % (100 * r["steady_share"]) if r["steady_share"] is not None else "no check after calibration"
        print("| %s | %d | %d | %.3f%% | %s | %.3f |" % (name, r["checks"], r["every"], 100 * r["canary_s"] / r["loop_s"],
                                                      steady, r["loop_s"] / base))


# ---- latency campaign -------------------------------------------------------------------------


class LinearFault:
    """A forward hook flipping one random bit of the significand of one random output element, on
    each call with probability `rate`, while `active` (training goes on: no infinities)."""

    def __init__(self, rate, seed):
        self.rate, self.random, self.active = rate, random.Random(seed), False

    def __call__(self, module, inputs, output):
        if not self.active or self.random.random() >= self.rate:
            return None
        out = output.clone()
        flat = out.view(-1).view(torch.int32)
        flat[self.random.randrange(flat.numel())] ^= 1 << self.random.randrange(23)  # the significand
        return out


def campaign_worker(rank, world, tmp, trials, seed, width, batch, cadences):
    setup(rank, world, tmp)
    job = Job(rank, width, batch)
    linears = [m for m in job.model.module if isinstance(m, torch.nn.Linear)]
    rows = []
    step = 0
    for check_name, model, rate in (("canary", "permanent", 1.0), ("canary", "intermittent", 0.5),
                                    ("replica", "bit flip in a parameter", None)):
        for every in cadences:
            for trial in range(trials):
                plan = random.Random("%d/%s/%s/%d/%d" % (seed, check_name, model, every, trial))  # alike on all ranks
                faulty = plan.randrange(world)
                onset_after = plan.randrange(1, 2 * every + 1)
                fault_seed, layer = plan.randrange(2**32), plan.choice(linears)
                fault = None
                if check_name == "canary" and rank == faulty:
                    fault = LinearFault(rate, fault_seed)
                    handle = layer.register_forward_hook(fault)
                saved = copy.deepcopy(job.model.state_dict())
                seen = []
                step = (step // every + 1) * every  # each trial starts on a check
                if check_name == "canary":
                    check = CanaryCheck(job.model.module, loss_fn, every=every, on_sdc=seen.append)
                else:
                    check = ReplicaCheck(every=every, on_sdc=seen.append)
                onset = step + onset_after
                false_alarm, active_checks = False, 0
                while not seen and step < onset + 50 * every:
                    if fault is not None:
                        fault.active = step >= onset
                    b = job.step()
                    if check_name == "replica" and rank == faulty and step == onset:
                        with torch.no_grad():
                            p = plan.choice(list(job.model.parameters())).view(-1)
                            p.view(torch.int32)[plan.randrange(p.numel())] ^= 1 << plan.randrange(23)
                    if check_name == "canary":
                        verdict = check.step(step, b)
                    else:
                        verdict = check.step(step, [job.model.parameters()])
                    active_checks += verdict is not None and step >= onset
                    if seen and step < onset:
                        false_alarm = True
                    step += 1
                if fault is not None:
                    handle.remove()
                check.close()
                rows.append({"check": check_name, "model": model, "every": every, "rate": rate, "onset": onset,
                             "detected": seen[0]["step"] if seen else None, "faulty": faulty,
                             "named": [s["rank"] for s in seen[0]["suspects"]] if seen else [],
                             "false_alarm": false_alarm, "active_checks": active_checks})
                job.model.load_state_dict(saved)  # every trial starts from the same healthy replicas
    if rank == 0:
        with open(os.path.join(tmp, "campaign.json"), "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def predicted(every, q):
    return (every - 1) / 2 + every * (1 - q) / q


def campaign(args):
    tmp = tempfile.mkdtemp(prefix="canary-campaign-")
    cadences = [int(c) for c in args.cadences.split(",")]
    start = time.perf_counter()
    mp.start_processes(campaign_worker, args=(args.ranks, tmp, args.trials, args.seed, args.width, args.batch, cadences),
                       nprocs=args.ranks, join=True, start_method="spawn")
    with open(os.path.join(tmp, "campaign.json")) as f:
        rows = json.load(f)
    print("detection latency: %d DDP ranks (gloo), seed %d, %d trials per row, %.0f s"
          % (args.ranks, args.seed, args.trials, time.perf_counter() - start))
    print("| check | injected fault | every | detected | named the faulty rank alone | false alarms "
          "| latency in steps: mean [min, max] | prediction, every check sees it | checks that saw it, q "
          "| prediction for q |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    keys = []
    for r in rows:
        key = (r["check"], r["model"], r["every"], r["rate"])
        if key not in keys:
            keys.append(key)
    for check, model, every, rate in keys:
        group = [r for r in rows if (r["check"], r["model"], r["every"], r["rate"]) == (check, model, every, rate)]
        latencies = [r["detected"] - r["onset"] for r in group if r["detected"] is not None]
        spread = "%.1f [%d, %d]" % (statistics.mean(latencies), min(latencies), max(latencies)) if latencies else "-"
        q = len(latencies) / max(1, sum(r["active_checks"] for r in group))
        print("| %s | %s | %d | %d / %d | %d | %d | %s | %.1f | %.2f | %.1f |"
              % (check, model, every, len(latencies), len(group), sum(r["named"] == [r["faulty"]] for r in group),
                 sum(r["false_alarm"] for r in group), spread, predicted(every, 1.0), q, predicted(every, q)))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--ranks", type=int, default=2)
    o.add_argument("--steps", type=int, default=1500)
    o.add_argument("--width", type=int, default=256)
    o.add_argument("--batch", type=int, default=64)
    o.add_argument("--layout", choices=("ddp", "fsdp2", "fsdp2_tp", "hsdp"), default="ddp")
    c = sub.add_parser("campaign")
    c.add_argument("--ranks", type=int, default=3)
    c.add_argument("--trials", type=int, default=40)
    c.add_argument("--seed", type=int, default=2026)
    c.add_argument("--cadences", default="4,16")
    c.add_argument("--width", type=int, default=32)
    c.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    overhead(args) if args.what == "overhead" else campaign(args)


if __name__ == "__main__":
    main()
