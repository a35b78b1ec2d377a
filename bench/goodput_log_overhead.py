"""GoodputLog's cost per step (a step_begin and a step_end line) and per committed checkpoint
(two lines and an fsync), next to one training step of a small PyTorch model on the CPU when torch
is importable. Prints only; nothing is asserted.

    python3 bench/goodput_log_overhead.py [--steps 20000]
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from sdcprobe import GoodputLog  # noqa: E402


def per_call(fn, n):
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - t0) / n


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        log = GoodputLog(os.path.join(d, "events.rank{rank}.jsonl"), rank=0)

        def step(i):
            with log.step(i):
                pass

        def save(i):
            with log.checkpoint(i):
                pass
            log.commit(i)

        step_s = per_call(step, args.steps)
        save_s = per_call(save, max(1, args.steps // 100))
        log.close()
    print("GoodputLog: %.1f us per step (2 lines), %.1f us per checkpoint + commit (3 lines, fsync)"
          % (step_s * 1e6, save_s * 1e6))
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 512)

    def train(_):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), x).backward()
        opt.step()

    train_s = per_call(train, 200)
    print("a CPU step of a 1M-parameter MLP, batch 64: %.1f us; GoodputLog adds %.2f%%"
          % (train_s * 1e6, 100 * step_s / train_s))


if __name__ == "__main__":
    main()
