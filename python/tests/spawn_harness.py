"""What the multi-rank tests share: a job of torch.multiprocessing ranks over gloo, each rank writing
its outcome as JSON, and the JSON Lines event logs the checks write.

    def worker(rank, world, tmp, *args):   # in a test module, so spawn can import it
        init_gloo(tmp, rank, world)
        ...
        write_outcome(tmp, rank, outcome)
        dist.destroy_process_group()

    tmp, outcomes = run_job(worker, world, *args, prefix="replica-")
"""

import json
import os
import tempfile

import torch.distributed as dist
import torch.multiprocessing as mp


def init_gloo(tmp, rank, world, **options):
    """This rank's default process group over gloo, met through a file in the job's folder."""
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rendezvous"), rank=rank,
                            world_size=world, **options)


def write_outcome(tmp, rank, outcome):
    with open(os.path.join(tmp, "outcome-%d.json" % rank), "w") as f:
        json.dump(outcome, f)


def run_job(target, world, *args, prefix="job-"):
    """(the job's folder, every rank's outcome in rank order) after target(rank, world, tmp, *args)
    ran on `world` spawned processes and each wrote its outcome."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    mp.start_processes(target, args=(world, tmp, *args), nprocs=world, join=True, start_method="spawn")
    outcomes = []
    for rank in range(world):
        with open(os.path.join(tmp, "outcome-%d.json" % rank)) as f:
            outcomes.append(json.load(f))
    return tmp, outcomes


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]
