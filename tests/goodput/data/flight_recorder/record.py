#!/usr/bin/env python3
"""Records the flight-recorder dumps that tests/goodput/hang_test.cpp reads.

Run with torch 2.15 (CPU, gloo), e.g. build/release/torch2-venv/bin/python record.py OUTDIR [SCENARIO...].
Each scenario is a real torch.multiprocessing job of 4 gloo ranks with a 3 s collective timeout.
Every rank runs a side thread that waits for a key in the job's store; the first rank whose
collective fails sets it, and then every rank, the stuck one included, writes its own recorder
buffer with torch's _dump_fr_trace_file (pickle, no stack frames) to OUTDIR/SCENARIO/nccl_trace_rank_R,
and exits. A rank killed with SIGKILL or one that has left the job writes nothing. The scenario
"stop" also writes the JSON form (_dump_fr_trace_json) to OUTDIR/stop_json/nccl_trace_rank_R.json.
Each folder gets expected.json: what the attribution must say. "recorder_off" is one rank's dump
with the recorder turned off (TORCH_FR_BUFFER_SIZE=0), which the reader refuses.
"""
import datetime
import json
import os
import signal
import socket
import sys
import threading
import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 4
TIMEOUT = datetime.timedelta(seconds=3)

# name: (expected answer, what the job does)
SCENARIOS = {
    "clean": {"culprits": [], "no_dump": [], "verdict": "no_hang"},
    "stop": {"culprits": [2], "no_dump": [], "verdict": "culprit", "group": "0", "seq": 6},
    "sleep_in_step": {"culprits": [1], "no_dump": [], "verdict": "culprit", "group": "0", "seq": 6},
    "two_stuck": {"culprits": [1, 3], "no_dump": [], "verdict": "culprit", "group": "0", "seq": 5},
    "killed": {"culprits": [], "no_dump": [3], "verdict": "cannot_decide"},
    "sizes_differ": {"culprits": [2], "no_dump": [], "verdict": "culprit", "group": "0", "seq": 4},
    "skip": {"culprits": [], "no_dump": [2], "verdict": "cannot_decide"},
    "mesh_stop": {"culprits": [3], "no_dump": [], "verdict": "culprit", "group": "2", "seq": 3},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dump(rank, scenario, out):
    c10d._dump_fr_trace_file(rank, includeStackTraces=False)
    if scenario == "stop":
        path = os.path.join(out, "stop_json", "nccl_trace_rank_%d.json" % rank)
        data = c10d._dump_fr_trace_json()
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())


def dump_on_request(store, rank, scenario, out):
    """The side thread: dumps when any rank asks, then ends the process (the stuck one too).
    Rank 0 serves the store, so it leaves last: after every rank dumped, or 10 s."""
    while not store.check(["fr_dump"]):
        time.sleep(0.05)
    dump(rank, scenario, out)
    store.set("dumped/%d" % rank, "1")
    if rank == 0:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not store.check(["dumped/%d" % r for r in range(WORLD)]):
            time.sleep(0.05)
    sys.stdout.flush()
    os._exit(0)


def steps(rank, scenario):
    """The training loop: one all-reduce per step, or a tensor-parallel then a data-parallel one."""
    t = torch.ones(4)
    if scenario == "mesh_stop":
        # Every rank creates every group, in the same order (torch requires it); timeouts as the world's.
        tp = [dist.new_group([0, 1], timeout=TIMEOUT), dist.new_group([2, 3], timeout=TIMEOUT)][rank // 2]
        dp = [dist.new_group([0, 2], timeout=TIMEOUT), dist.new_group([1, 3], timeout=TIMEOUT)][rank % 2]
        for step in range(1, 6):
            if rank == 3 and step == 3:
                threading.Event().wait()       # stops before the tensor-parallel all-reduce
            dist.all_reduce(t, group=tp)
            dist.all_reduce(t, group=dp)
        return
    for seq in range(1, 9):
        if scenario == "stop" and rank == 2 and seq == 6:
            threading.Event().wait()           # a data-loader deadlock: never enters again
        if scenario == "two_stuck" and rank in (1, 3) and seq == 5:
            threading.Event().wait()
        if scenario == "sleep_in_step" and rank == 1 and seq == 6:
            time.sleep(60)                     # a stuck step: longer than the timeout
        if scenario == "killed" and rank == 3 and seq == 6:
            os.kill(os.getpid(), signal.SIGKILL)
        if scenario == "skip" and rank == 2 and seq == 4:
            continue                           # skips one collective, pairs shifted afterwards
        x = torch.ones(8) if (scenario == "sizes_differ" and rank == 2 and seq == 4) else t
        dist.all_reduce(x)


def worker(rank, scenario, port, out, world=WORLD):
    os.environ["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(out, scenario, "nccl_trace_rank_")
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=TIMEOUT)
    if scenario == "recorder_off":
        dist.all_reduce(torch.ones(4))
        dump(rank, scenario, out)
        return
    threading.Thread(target=dump_on_request, args=(store, rank, scenario, out), daemon=True).start()
    try:
        steps(rank, scenario)
        if scenario == "skip" and rank == 2:
            os._exit(0)                        # done with its loop: leaves without a dump
        dist.barrier()
        if scenario != "clean":
            raise RuntimeError("the scenario did not fail")
    except Exception as e:
        print("rank %d: %s: %s" % (rank, type(e).__name__, str(e).splitlines()[0]), flush=True)
    store.set("fr_dump", "1")
    threading.Event().wait()                   # the side thread dumps and exits


def recorder_off(out):
    """One gloo rank with TORCH_FR_BUFFER_SIZE=0, set before torch reads it (in a fresh process)."""
    os.makedirs(os.path.join(out, "recorder_off"), exist_ok=True)
    os.environ["TORCH_FR_BUFFER_SIZE"] = "0"
    ctx = mp.spawn(worker, args=("recorder_off", free_port(), out, 1), nprocs=1, join=False)
    ctx.processes[0].join(60)
    del os.environ["TORCH_FR_BUFFER_SIZE"]


def record(scenario, out):
    if scenario == "recorder_off":
        return recorder_off(out)
    os.makedirs(os.path.join(out, scenario), exist_ok=True)
    if scenario == "stop":
        os.makedirs(os.path.join(out, "stop_json"), exist_ok=True)
    ctx = mp.spawn(worker, args=(scenario, free_port(), out), nprocs=WORLD, join=False)
    for p in ctx.processes:
        p.join(60)
        if p.is_alive():
            p.kill()
    print(scenario, "exit codes", [p.exitcode for p in ctx.processes], flush=True)
    expected = dict(SCENARIOS[scenario], world_size=WORLD, torch=torch.__version__)
    with open(os.path.join(out, scenario, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
    if scenario == "stop":
        with open(os.path.join(out, "stop_json", "expected.json"), "w") as f:
            json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    out = os.path.abspath(sys.argv[1])
    for name in sys.argv[2:] or list(SCENARIOS) + ["recorder_off"]:
        record(name, out)
