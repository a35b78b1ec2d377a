"""The canary step on train_cuda.py's model: DDP ranks on one CUDA GPU over gloo, a clean run and
one with a corrupted matrix product on one rank, which the replica check cannot see.

    python3 python/examples/canary_cuda.py [--ranks 3] [--steps 120] [--every 10] [--onset 55]
                                           [--json result.json]

Every rank holds the same model (train_cuda.make_job), trains on its own data under bf16 autocast
and runs a CanaryCheck every `--every` steps, with deterministic algorithms and
CUBLAS_WORKSPACE_CONFIG set. The clean run must pass at every check. In the second run, a forward
hook on rank 1's first nn.Linear flips one significand bit of its output from step `--onset` on:
the canary must name rank 1 at the first check from then, call it persistent after its re-run, while
the replica check passes. Prints the figures as JSON (the canary's time, and its re-run's at the
alarm, as ratios of the mean step time). Exit 0 when all hold, 1 when not, 2 when no GPU is visible.
"""

import argparse
import copy
import json
import os
import sys
import tempfile
import time

# cuBLAS picks a fixed workspace only when this is set before it starts (docs/replica.md).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdcprobe import CanaryCheck, ReplicaCheck  # noqa: E402
from train_cuda import make_job, train_step  # noqa: E402


def canary_loss(module, batch):
    data, target = batch
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return torch.nn.functional.cross_entropy(module(data), target)


def flip_from(onset, clock):
    """A forward hook: from step `onset` on, one significand bit of one output element flips."""

    def hook(module, inputs, output):
        if clock["step"] < onset:
            return None
        out = output.clone()
        # A high significand bit (bf16 under autocast, else fp32): a change no rounding hides.
        bits = out.view(-1).view(torch.int16 if out.element_size() == 2 else torch.int32)
        bits[clock["step"] % bits.numel()] ^= 1 << (5 if out.element_size() == 2 else 21)
        return out

    return hook


def run(rank, args, tmp, model, optimizer, data, target, inject):
    """One training run; returns its figures."""
    clock = {"step": 0}
    handle = model.module[0].register_forward_hook(flip_from(args.onset, clock)) if inject and rank == 1 else None
    seen, replica_seen = [], []
    canary = CanaryCheck(model.module, canary_loss, every=args.every, on_sdc=seen.append,
                         event_log=os.path.join(tmp, "%s-rank%d.jsonl" % ("fault" if inject else "clean", rank)))
    replica = ReplicaCheck(every=args.every, on_sdc=replica_seen.append)
    verdicts, replica_verdicts, step_s, canary_s = [], [], [], []
    for step in range(args.steps):
        clock["step"] = step
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        train_step(model, optimizer, data, target)
        torch.cuda.synchronize()
        step_s.append(time.perf_counter() - t0)
        r = replica.step(step, [model.parameters()])
        if r is not None:
            replica_verdicts.append(r["verdict"])
        v = canary.step(step, (data, target))
        if v is not None:
            verdicts.append(v["verdict"])
            canary_s.append(v["seconds"])
            if v["verdict"] == "disabled":
                break
        if seen or replica_seen:
            break
    if handle is not None:
        handle.remove()
    canary.close()
    replica.close()
    first = seen[0] if seen else {}
    mean_step = sum(step_s) / len(step_s)
    # The steady check time: not the first check (it runs twice), nor the alarm's (it holds the
    # re-run). None when no check came between them (an alarm at the first check).
    alarm = verdicts and verdicts[-1] in ("sdc", "inconclusive", "not_hardware")
    steady = canary_s[1:-1] if alarm else canary_s[1:]
    mean_check = sum(steady) / len(steady) if steady else None
    rerun_s = first.get("rerun_seconds")
    return {"attribution": first.get("attribution"), "rerun_s": rerun_s,
            "rerun_over_step": rerun_s / mean_step if first else None,
            "rerun_over_check": rerun_s / mean_check if first and mean_check else None,
            "verdicts": verdicts, "replica_verdicts": replica_verdicts, "steps": step + 1,
            "detected_step": first.get("step"), "replica_detected_step": (replica_seen or [{}])[0].get("step"),
            "suspects": [s["rank"] for s in first.get("suspects", [])], "suspect": (first.get("suspects") or [{}])[0],
            "message": canary.verdict.get("message"),
            "canary_over_step": mean_check / mean_step if mean_check else None}


def worker(rank, args, tmp):
    torch.cuda.set_device(args.device)
    torch.use_deterministic_algorithms(True)  # what the canary needs (docs/replica.md)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rendezvous"), rank=rank,
                            world_size=args.ranks)
    device = torch.device("cuda", args.device)
    model, optimizer, _, _ = make_job(device)  # the same weights on every rank
    initial = copy.deepcopy(model.state_dict())
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.device])
    data_gen = torch.Generator(device=device).manual_seed(100 + rank)  # each rank its own batch
    data = torch.randn(512, 2048, device=device, generator=data_gen)
    target = torch.randint(0, 10, (512,), device=device, generator=data_gen)
    results = {"clean": run(rank, args, tmp, model, optimizer, data, target, inject=False)}
    model.module.load_state_dict(initial)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    results["fault"] = run(rank, args, tmp, model, optimizer, data, target, inject=True)
    with open(os.path.join(tmp, "result-%d.json" % rank), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--onset", type=int, default=55)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the figures as JSON to this file")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("canary_cuda: no CUDA device visible to torch", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="canary-cuda-")
    mp.start_processes(worker, args=(args, tmp), nprocs=args.ranks, join=True, start_method="spawn")
    results = []
    for rank in range(args.ranks):
        with open(os.path.join(tmp, "result-%d.json" % rank)) as f:
            results.append(json.load(f))
    clean, fault = results[0]["clean"], results[0]["fault"]
    expected_at = (args.onset + args.every - 1) // args.every * args.every
    ok = {
        "clean run passes every check": set(clean["verdicts"]) == {"pass"} and clean["detected_step"] is None
        and clean["replica_detected_step"] is None,
        "the canary names rank 1 alone at step %d" % expected_at: all(
            r["fault"]["suspects"] == [1] and r["fault"]["detected_step"] == expected_at for r in results),
        "the re-run calls it persistent": all(r["fault"]["attribution"] == "persistent" for r in results),
        "the replica check passed": set(fault["replica_verdicts"]) == {"pass"} and
        fault["replica_detected_step"] is None,
    }
    summary = {"ranks": args.ranks, "every": args.every, "onset": args.onset, "gpu": fault["suspect"].get("device"),
               "pci_bus_id": fault["suspect"].get("pci_bus_id"), "clean": clean, "fault": fault, "checks": ok,
               "events": tmp}
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
