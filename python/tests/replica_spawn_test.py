"""Processes that use ReplicaCheck under torch.multiprocessing.spawn exit: 30 consecutive jobs of two
gloo ranks (SDC_SPAWN_RUNS of them where set), each job given a time limit; every other job ends
right after the check is made, so its last exchange is the check's exchange of who each replica
is. A tensor handed to a collective and freed by gloo's worker thread needs the GIL, which the
main thread holds while it joins that thread at exit (~ProcessGroupGloo): such a process never
exits.

Needs torch with gloo (/usr/bin/python3 with Debian's python3-torch).
"""

import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from sdcprobe import ReplicaCheck  # noqa: E402

RUNS = int(os.environ.get("SDC_SPAWN_RUNS", "30"))
WORLD = 2
LIMIT_S = 60  # one job: two interpreters that import torch, a few steps, and their exit


def worker(rank, tmp, at_once):
    # One core for the whole process (as under a CPU quota): gloo's thread, once it wakes the main
    # thread from its wait, is then often preempted by it, so the last exchange's tensors are
    # freed and the process group destroyed before gloo's thread drops its references.
    os.sched_setaffinity(0, {rank % os.cpu_count()})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rendezvous"), rank=rank,
                            world_size=WORLD)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    check = ReplicaCheck(every=1)
    if at_once:  # seen hanging on torch 1.13 when that exchange was dist.all_gather_object's
        dist.destroy_process_group()
        return
    for step in range(4):
        optim.zero_grad()
        model(torch.ones(2, 4)).sum().backward()
        optim.step()
        assert check.step(step, model.parameters())["verdict"] == "pass"
    # The job ends as a training script does, right after its last step; the check is left to
    # the garbage collector.
    dist.destroy_process_group()


class SpawnExitTest(unittest.TestCase):
    def test_consecutive_spawn_jobs_all_exit(self):
        for run in range(RUNS):
            tmp = tempfile.mkdtemp(prefix="replica-spawn-")
            context = mp.spawn(worker, args=(tmp, run % 2 == 1), nprocs=WORLD, join=False)
            deadline = time.monotonic() + LIMIT_S
            while not context.join(timeout=max(0.0, deadline - time.monotonic())):
                if time.monotonic() >= deadline:
                    alive = [p.pid for p in context.processes if p.is_alive()]
                    for p in context.processes:
                        p.kill()
                    self.fail("job %d of %d: processes %s still running after %d s" % (run + 1, RUNS, alive,
                                                                                       LIMIT_S))
            self.assertEqual([p.exitcode for p in context.processes], [0] * WORLD)
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
