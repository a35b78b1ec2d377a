"""A small PyTorch training loop on the CPU with an inline SDC probe at the "auto" cadence.

    python3 python/examples/train_cpu.py [--steps 600] [--events events.jsonl]

Prints the probe overhead: the probes' wall time over the training loop's wall time, measured from
the event log the probe writes.
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--events", default=os.path.join(tempfile.mkdtemp(), "events.jsonl"))
    parser.add_argument("--sdc-rate", type=float, default=None,
                        help="SDC events per device-day for the cadence (default: the library's fleet figure)")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(64, 512)
    target = torch.randint(0, 10, (64,))

    probe = InlineProbe(every="auto", budget=0.01, backend="cpu", event_log=args.events, seed=1, sdc_rate=args.sdc_rate)
    start = time.monotonic()
    for step in range(args.steps):
        loss = torch.nn.functional.cross_entropy(model(data), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        probe.step(step)
    wall = time.monotonic() - start
    verdict = probe.verdict
    probe.close()

    probe_s = 0.0
    begun = {}
    with open(args.events) as f:
        for line in f:
            e = json.loads(line)
            if e["event"] == "probe_begin":
                begun[e["probe"]] = e["t"]
            elif e["event"] == "probe_end":
                probe_s += (e["t"] - begun.pop(e["probe"])) / 1e9
    print("steps %d, %.3f s, step %.2f ms, loss %.4f" % (args.steps, wall, 1e3 * wall / args.steps, loss.item()))
    print("cadence: %s" % verdict["cadence"])
    print("verdict %s, probes run %d, probe overhead %.4f of training time" %
          (verdict["verdict"], verdict["probes_run"], probe_s / wall))
    return 0 if verdict["verdict"] == "pass" and probe_s / wall <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
