#!/usr/bin/env python3
"""Records a job instrumented with GoodputLog alone whose rank 2 hangs it, for the cluster tests.

Run with torch 2.15 (CPU, gloo) from the repository's root:
    build/release/torch2-venv/bin/python tests/goodput/data/goodput_hang/record.py tests/goodput/data/goodput_hang

4 gloo ranks under torch.multiprocessing.spawn, each with GoodputLog("OUT/events.rank{rank}.jsonl"),
a 3 s collective timeout, one all-reduce per step; rank 2 stops entering collectives at step 6 (a
data-loader deadlock). The other ranks time out, log the fault and ask every rank to dump: the four
flight-recorder dumps land in OUT/flight_recorder/attempt0/, and the stuck rank is killed after
(the launcher's part). Each process_start holds the rank's record: this host, and "cpu" (no CUDA).
"""
import datetime
import os
import shutil
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))

from sdcprobe import GoodputLog  # noqa: E402

WORLD = 4
STUCK = 2


def worker(rank, out, port):
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, WORLD, rank == 0, timeout=datetime.timedelta(seconds=60))
    log = GoodputLog(os.path.join(out, "events.rank{rank}.jsonl"), rank=rank)
    try:
        with log.job(), log.attempt(attempt=0):
            with log.init():
                dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                                        timeout=datetime.timedelta(seconds=3))
            t = torch.ones(4)
            for step in range(1, 9):
                with log.step(step):
                    if rank == STUCK and step == 6:
                        threading.Event().wait()
                    dist.all_reduce(t)
                    time.sleep(0.2)
    except Exception:
        pass
    os._exit(3)  # past gloo's teardown, which can hang at exit


def main():
    out = os.path.abspath(sys.argv[1])
    for name in os.listdir(out):
        if name.startswith("events.") or name == "flight_recorder":
            path = os.path.join(out, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.spawn(worker, args=(out, port), nprocs=WORLD, join=False)
    for rank, p in enumerate(ctx.processes):
        if rank != STUCK:
            p.join(120)
    ctx.processes[STUCK].kill()
    for p in ctx.processes:
        p.join(10)


if __name__ == "__main__":
    main()
