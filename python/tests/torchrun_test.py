"""GoodputLog and ReplicaCheck under PyTorch's own launcher: torchrun (torch.distributed.run) with 3
gloo DDP ranks and elastic restarts. Attempt 0: rank 1 SIGKILLs itself in step 25. Attempt 1
resumes from the newest commit (20); rank 2's parameter is flipped after step 32 and the replica
check at step 35 names it. Attempt 2 resumes from the newest commit at or before the last step the
replicas agreed on (30) and finishes at step 50. A checkpoint every 10 steps, each checked before
it is committed. The merged breakdown must sum exactly and its productive time must equal a count
from the raw events.

    /usr/bin/python3 torchrun_test.py            the test (ctest sets SDCPROBE_BINARY, SDCPROBE_LIBRARY)
    torchrun ... torchrun_test.py --worker DIR   one rank (torchrun starts these)
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

STEPS = 50
SAVE_EVERY = 10
CHECK_EVERY = 5
KILL = (0, 1, 25)  # (attempt, rank, step): SIGKILL in the middle of the step
FLIP = (1, 2, 32)  # (attempt, rank, step): a parameter bit flipped after the step's update


def worker(out):
    import torch
    import torch.distributed as dist

    from sdcprobe import GoodputLog, ReplicaCheck

    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    log = GoodputLog(os.path.join(out, "events.rank{rank}.jsonl"), rank=rank)
    with log.attempt():
        with log.init():
            dist.init_process_group("gloo")
            torch.manual_seed(0)  # the same initial weights on every replica
            model = torch.nn.parallel.DistributedDataParallel(
                torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
            optim = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            check = ReplicaCheck(every=CHECK_EVERY, event_log=log)
        path = os.path.join(out, "checkpoint.pt")
        start = 0
        if os.path.exists(path):
            saved = torch.load(path)
            with log.restore(saved["step"]):
                model.module.load_state_dict(saved["model"])
                optim.load_state_dict(saved["optim"])
                start = saved["step"]
        data = torch.Generator().manual_seed(1000 * attempt + rank)
        for step in range(start + 1, STEPS + 1):
            with log.step(step):
                x = torch.randn(4, 8, generator=data)
                loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
                optim.zero_grad()
                if (attempt, rank, step) == KILL:
                    os.kill(os.getpid(), signal.SIGKILL)
                loss.backward()
                optim.step()
                if (attempt, rank, step) == FLIP:
                    with torch.no_grad():
                        next(model.parameters()).view(-1).view(torch.int32)[3] ^= 1 << 20
            state = [model.parameters(), optim.state_dict()]
            check.step(step, state)  # raises SDCDetected on a mismatch: the attempt's fault
            if step % SAVE_EVERY == 0:
                check.before_commit(step, state)
                with log.checkpoint(step):
                    if rank == 0:
                        torch.save({"model": model.module.state_dict(), "optim": optim.state_dict(), "step": step},
                                   path + ".tmp")
                        os.replace(path + ".tmp", path)
                    dist.barrier()
                log.commit(step)
        dist.barrier()
    if rank == 0:
        log.job_end()
    log.close()
    dist.destroy_process_group()


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rendezvous():
    """--standalone (port 29400), or the same c10d rendezvous on a free port when 29400 is taken."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", 29400))
            return ["--standalone"]
        except OSError:
            pass
    return ["--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % free_port(), "--rdzv_id",
            uuid.uuid4().hex]


class TorchrunTest(unittest.TestCase):
    def test_kill_sdc_and_restarts_under_torchrun(self):
        binary = os.environ.get("SDCPROBE_BINARY")
        if not binary or not os.environ.get("SDCPROBE_LIBRARY"):
            self.skipTest("SDCPROBE_BINARY and SDCPROBE_LIBRARY not set (ctest sets them)")
        out = tempfile.mkdtemp(prefix="torchrun-")
        # Debian's torch 1.13 torchrun crashes with its default --redirects 0 --tee 0.
        command = [sys.executable, "-m", "torch.distributed.run", *rendezvous(), "--nproc_per_node", "3",
                   "--max_restarts", "3", "--monitor_interval", "1", "--redirects", "1", "--tee", "2",
                   "--log_dir", os.path.join(out, "torchrun-logs"), os.path.abspath(__file__), "--worker", out]
        # TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: torchrun 2.x's agent otherwise serves every attempt
        # from one TCPStore, without a prefix per attempt, so after a restart init_process_group reads
        # the dead attempt's gloo addresses and connectFullMesh is refused or hangs (torch 2.15). With
        # it, each attempt's rank 0 serves a fresh store, as on torch 1.13. Torch 1.13 ignores it.
        run = subprocess.run(command, capture_output=True, text=True, timeout=900,
                             env=dict(os.environ, OMP_NUM_THREADS="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1"))
        self.assertEqual(run.returncode, 0, run.stdout[-4000:] + run.stderr[-4000:])

        events = read_events(os.path.join(out, "events.rank0.jsonl"))
        starts = [i for i, e in enumerate(events) if e["event"] == "process_start"]
        self.assertEqual([events[i]["attempt"] for i in starts], [0, 1, 2])
        attempts = [events[a:b] for a, b in zip(starts, starts[1:] + [len(events)])]
        # The restores follow the ledger's rules: after the kill the newest commit; after the SDC the
        # newest commit at or before the last step the replicas agreed on.
        sdc = [e for e in events if e["event"] == "sdc_detected"]
        self.assertEqual(len(sdc), 1)
        self.assertEqual((sdc[0]["step"], sdc[0]["last_good_step"], sdc[0]["suspect_rank"]), (35, 30, 2))
        commits = [[e["step"] for e in a if e["event"] == "ckpt_commit"] for a in attempts]
        self.assertEqual(commits, [[10, 20], [30], [40, 50]])
        restores = [[e["step"] for e in a if e["event"] == "restore_end"] for a in attempts]
        self.assertEqual(restores, [[], [20], [30]])
        self.assertEqual(events[-1]["event"], "job_end")

        report = json.loads(subprocess.run([binary, "goodput", "--json", os.path.join(out, "events.rank*.jsonl")],
                                           capture_output=True, text=True, check=True).stdout)
        c = report["categories"]
        self.assertEqual(report["wall_ns"], report["productive_ns"] + sum(v["ns"] for v in c.values()))
        self.assertEqual(report["wall_ns"], events[-1]["t"] - events[0]["t"])
        self.assertEqual(report["diagnostics"]["rollbacks"], 2)
        self.assertGreater(c["rework"]["sdc_ns"], 0)
        self.assertGreater(c["rework"]["ns"], c["rework"]["sdc_ns"])  # the kill's rework is not SDC's

        # GoodputLog's flight-recorder dumps (torch 2.x): the killed rank left none, so attempt 0's
        # hang is not decided; the SDC stopped every rank after the same collective: no hang.
        import torch
        if hasattr(torch._C._distributed_c10d, "_dump_fr_trace"):
            hangs = {os.path.basename(h["folder"]): h for h in report["hangs"]}
            self.assertEqual(sorted(hangs), ["attempt0", "attempt1"])
            self.assertEqual((hangs["attempt0"]["verdict"], hangs["attempt0"]["culprits"]), ("cannot_decide", []))
            # A survivor that failed inside the collective the killed rank left is undecided too.
            undecided = {u["rank"]: u["why"] for u in hangs["attempt0"]["undecided"]}
            self.assertTrue(undecided[KILL[1]].startswith("no dump"), undecided)
            # Every rank stopped after the same collective: no hang, or, where torchrun's agent ended
            # a rank before its dump was written, undecided for that rank alone, never a culprit.
            self.assertEqual(hangs["attempt1"]["culprits"], [])
            self.assertIn(hangs["attempt1"]["verdict"], ("no_hang", "cannot_decide"))
            for u in hangs["attempt1"]["undecided"]:
                self.assertTrue(u["why"].startswith("no dump"), u)
        else:
            self.assertNotIn("hangs", report)

        # Productive by hand: in each attempt, from its first step to where the lineage was cut (the
        # end of the save the next attempt restored; the job's end for the last), less the blocking
        # spans (saves and checks) in that window.
        def end_of_save(attempt, step):
            return next(e["t"] for e in attempt if e["event"] == "ckpt_end" and e["step"] == step)

        productive = 0
        for i, attempt in enumerate(attempts):
            begin = next(e["t"] for e in attempt if e["event"] == "step_begin")
            end = end_of_save(attempt, restores[i + 1][0]) if i + 1 < len(attempts) else attempt[-1]["t"]
            blocking, opened = 0, {}
            for e in attempt:
                kind = e["event"].rsplit("_", 1)[0]
                if kind in ("ckpt", "probe") and e["event"].endswith("_begin"):
                    opened[kind] = e["t"]
                elif kind in ("ckpt", "probe") and e["event"].endswith("_end") and kind in opened:
                    a, b = max(opened.pop(kind), begin), min(e["t"], end)
                    blocking += max(0, b - a)
            productive += end - begin - blocking
        self.assertEqual(report["productive_ns"], productive)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        unittest.main()
