"""A PyTorch training loop on a CUDA GPU with an inline SDC probe, and the job events goodput reads.

    python3 python/examples/train_cuda.py [--steps 300] [--every 25] [--events events.jsonl]
                                          [--inject SPEC] [--json result.json]

Runs the loop twice on the same model: first without the probe (the baseline step time), then with
a probe every `--every` steps on the training stream. It logs job, step and checkpoint events into
the probe's event log, so `sdcprobe goodput EVENTS` can attribute the time an SDC costs. With
`--inject` (docs/injection.md), the probe must catch the fault: exit 0 when it did, 1 when not.
Without it the verdict must be "pass". Prints the probe overhead both as the probes' share of the
training time (from the event log) and as the change in mean step time against the baseline.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sdcprobe import InlineProbe  # noqa: E402
from sdcprobe.goodput_log import device_fields  # noqa: E402

CHECKPOINT_EVERY = 20


def make_job(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 2048),
                                torch.nn.GELU(), torch.nn.Linear(2048, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randn(512, 2048, device=device)
    target = torch.randint(0, 10, (512,), device=device)
    return model, optimizer, data, target


def train_step(model, optimizer, data, target):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(data), target)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def wait_idle(probe, timeout=60.0):
    deadline = time.monotonic() + timeout
    while probe.verdict["in_flight"]:
        if time.monotonic() > deadline:
            raise RuntimeError("a probe stayed in flight for %s s" % timeout)
        time.sleep(0.005)


def probe_seconds(events):
    total, begun = 0.0, {}
    for e in events:
        if e["event"] == "probe_begin":
            begun[e["probe"]] = e["t"]
        elif e["event"] == "probe_end" and e["probe"] in begun:
            total += (e["t"] - begun.pop(e["probe"])) / 1e9
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--events", default=os.path.join(tempfile.mkdtemp(), "events.jsonl"))
    parser.add_argument("--inject", default=None)
    parser.add_argument("--json", default=None, help="write the figures as JSON to this file")
    args = parser.parse_args()

    if not torch.cuda.is_available():
        print("train_cuda: no CUDA device visible to torch", file=sys.stderr)
        return 2
    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    model, optimizer, data, target = make_job(device)

    # Baseline: the same loop, no probe. Warm up first (kernels, allocator, autocast caches).
    for _ in range(20):
        train_step(model, optimizer, data, target)
    torch.cuda.synchronize()
    start = time.monotonic()
    for _ in range(args.steps):
        train_step(model, optimizer, data, target)
    torch.cuda.synchronize()
    baseline_s = time.monotonic() - start

    stream = torch.cuda.current_stream()
    probe = InlineProbe(device=args.device, every=args.every, backend="cuda", event_log=args.events, seed=11,
                        inject=args.inject)
    probe.log_event("job_eligible")
    probe.log_event("alloc_granted")
    # Where this rank ran (the GPU's UUID and PCI bus id), as GoodputLog.attempt() logs it.
    probe.log_event("process_start", attempt=1, **device_fields(device))
    caught_at = None
    start = time.monotonic()
    for step in range(args.steps):
        probe.log_event("step_begin", step=step)
        loss = train_step(model, optimizer, data, target)
        probe.log_event("step_end", step=step)
        if step % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
            probe.log_event("ckpt_begin", step=step)
            probe.log_event("ckpt_end", step=step)
            probe.log_event("ckpt_commit", step=step)
        probe.step(step, stream)
        if caught_at is None and probe.verdict["verdict"] == "fail":
            caught_at = step  # a real job stops here and restarts from its last good checkpoint
            break
    torch.cuda.synchronize()
    probed_s = time.monotonic() - start
    steps_run = step + 1
    wait_idle(probe)
    probe.step(steps_run, stream)  # collects the last probe's verdict
    verdict = probe.verdict
    probe.log_event("teardown_end")
    probe.log_event("job_end")
    probe.close()

    with open(args.events) as f:
        events = [json.loads(line) for line in f]
    probe_s = probe_seconds(events)
    result = {
        "steps": steps_run,
        "every": args.every,
        "baseline_step_ms": 1e3 * baseline_s / args.steps,
        "probed_step_ms": 1e3 * probed_s / steps_run,
        "probe_share": probe_s / probed_s,
        "step_time_ratio": (probed_s / steps_run) / (baseline_s / args.steps),
        "verdict": verdict["verdict"],
        "probes_run": verdict["probes_run"],
        "probes_skipped_busy": verdict["probes_skipped_busy"],
        "device": verdict.get("device"),
        "caught_at_step": caught_at,
        "sdc_detected_events": sum(1 for e in events if e["event"] == "sdc_detected"),
        "loss": float(loss.item()),
        "events": args.events,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if args.inject:
        return 0 if verdict["verdict"] == "fail" and result["sdc_detected_events"] > 0 else 1
    return 0 if verdict["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
