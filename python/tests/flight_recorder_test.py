"""GoodputLog's flight-recorder dumps (sdcprobe.flight_recorder, docs/goodput.md "Hangs").

Under torch 2.x: a job of 4 gloo ranks under torch.multiprocessing.spawn, instrumented with
GoodputLog alone, in which rank 2 stops entering collectives at step 6 (and another in which it is
SIGKILLed there: no dump, "cannot decide"). The other ranks time out
(3 s), their attempts fail, and every rank's dump lands in flight_recorder/attempt0/ beside the
event logs, the stuck rank's included (its side thread answers the store); `sdcprobe hang` names
rank 2, and the event logs' breakdown still sums exactly. Under torch 1.13 (Debian's), which has no
flight recorder: GoodputLog says so once and goes on.

Needs SDCPROBE_BINARY (ctest sets it).
"""

import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from sdcprobe import GoodputLog  # noqa: E402

WORLD = 4
STUCK = 2
HAS_RECORDER = hasattr(torch._C._distributed_c10d, "_dump_fr_trace")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, tmp, port, scenario):
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, WORLD, rank == 0, timeout=datetime.timedelta(seconds=60))
    log = GoodputLog(os.path.join(tmp, "events.rank{rank}.jsonl"), rank=rank)
    try:
        with log.job(), log.attempt(attempt=0):
            with log.init():
                dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                                        timeout=datetime.timedelta(seconds=3))
            t = torch.ones(4)
            for step in range(1, 9):
                with log.step(step):
                    if rank == STUCK and step == 6 and scenario == "stop":
                        threading.Event().wait()  # a data-loader deadlock: never enters again
                    if rank == STUCK and step == 6 and scenario == "kill":
                        os.kill(os.getpid(), signal.SIGKILL)
                    dist.all_reduce(t)
    except Exception:
        pass
    # Past gloo's teardown, which can hang at exit (replica_spawn_test.py says why).
    os._exit(3)


def sdcprobe(*args):
    return subprocess.run([os.environ["SDCPROBE_BINARY"]] + list(args), capture_output=True, text=True)


@unittest.skipUnless(os.environ.get("SDCPROBE_BINARY"), "SDCPROBE_BINARY not set (ctest sets it)")
class FlightRecorder(unittest.TestCase):
    @unittest.skipUnless(HAS_RECORDER, "torch %s has no flight recorder" % torch.__version__)
    def test_every_rank_dumps_and_the_stuck_rank_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            ctx = mp.spawn(worker, args=(tmp, free_port(), "stop"), nprocs=WORLD, join=False)
            deadline = time.monotonic() + 120
            for rank, p in enumerate(ctx.processes):
                if rank != STUCK:
                    p.join(max(1, deadline - time.monotonic()))
            ctx.processes[STUCK].kill()  # the launcher's part: the stuck rank never ends by itself
            for p in ctx.processes:
                p.join(10)
            folder = os.path.join(tmp, "flight_recorder", "attempt0")
            self.assertEqual(sorted(os.listdir(folder)), ["nccl_trace_rank_%d" % r for r in range(WORLD)])
            out = os.path.join(tmp, "hang.json")
            r = sdcprobe("hang", folder, "--json", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                report = json.load(f)
            self.assertEqual(report["verdict"], "culprit")
            self.assertEqual([c["rank"] for c in report["culprits"]], [STUCK])
            self.assertEqual(report["undecided"], [])
            self.assertEqual(report["groups"][0]["first_incomplete"], 6)
            # With the event logs: where the culprit ran, from its process_start (a CPU job here).
            r = sdcprobe("hang", folder, "--events", os.path.join(tmp, "events.rank*.jsonl"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("culprit rank 2 (%s, cpu): never enqueued collective 6" % socket.gethostname(), r.stdout)

            # The ranks that timed out logged the fault; the breakdown still sums exactly.
            faults = []
            for rank in range(WORLD):
                with open(os.path.join(tmp, "events.rank%d.jsonl" % rank)) as f:
                    faults += [json.loads(line)["rank"] for line in f if '"fault_detected"' in line]
            self.assertEqual(sorted(faults), [r for r in range(WORLD) if r != STUCK])
            r = sdcprobe("goodput", os.path.join(tmp, "events.rank*.jsonl"), "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            summary = json.loads(r.stdout)
            self.assertEqual(summary["productive_ns"] + sum(c["ns"] for c in summary["categories"].values()),
                             summary["wall_ns"])
            # The stop: from the last progress to the fault, the wait for the timeout.
            self.assertGreaterEqual(summary["categories"]["detection_teardown"]["ns"], 2_000_000_000)
            # ... and the incident's cause: the hang, its culprit and host, the timeout it waited.
            hang, = summary["hangs"]
            self.assertEqual((hang["cause"], hang["verdict"], hang["timeout_ms"]), ("hang", "culprit", 3000))
            self.assertEqual([(c["rank"], c["host"], c["device"], c["pci_bus_id"]) for c in hang["culprits"]],
                             [(STUCK, socket.gethostname(), "cpu", "")])
            # Its time is the attempt's detection & teardown: the wait for the timeout, then the teardown.
            self.assertEqual(hang["detection_teardown_ns"], summary["categories"]["detection_teardown"]["ns"])
            self.assertEqual(hang["waited_ns"] + hang["teardown_ns"], hang["detection_teardown_ns"])
            self.assertGreaterEqual(hang["waited_ns"], 2_000_000_000)
            r = sdcprobe("goodput", os.path.join(tmp, "events.rank*.jsonl"))
            self.assertIn("Hang (%s, timeout 3 s): rank 2 on %s (cpu)\n  detection & teardown " %
                          (folder, socket.gethostname()), r.stdout)

    @unittest.skipUnless(HAS_RECORDER, "torch %s has no flight recorder" % torch.__version__)
    def test_a_killed_rank_has_no_dump_and_is_not_guessed(self):
        with tempfile.TemporaryDirectory() as tmp:
            ctx = mp.spawn(worker, args=(tmp, free_port(), "kill"), nprocs=WORLD, join=False)
            for p in ctx.processes:
                p.join(120)
            self.assertEqual(ctx.processes[STUCK].exitcode, -signal.SIGKILL)
            folder = os.path.join(tmp, "flight_recorder", "attempt0")
            self.assertEqual(sorted(os.listdir(folder)), ["nccl_trace_rank_%d" % r for r in range(WORLD) if r != STUCK])
            out = os.path.join(tmp, "hang.json")
            r = sdcprobe("hang", folder, "--json", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                report = json.load(f)
            self.assertEqual((report["verdict"], report["culprits"]), ("cannot_decide", []))
            self.assertEqual([u["rank"] for u in report["undecided"]], [STUCK])
            self.assertTrue(report["undecided"][0]["why"].startswith("no dump"), report["undecided"][0]["why"])

    @unittest.skipIf(HAS_RECORDER, "torch %s has a flight recorder" % torch.__version__)
    def test_without_a_recorder_the_log_says_so_and_goes_on(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = dist.TCPStore("127.0.0.1", free_port(), 1, True)
            dist.init_process_group("gloo", store=store, rank=0, world_size=1)
            try:
                log = GoodputLog(os.path.join(tmp, "events.rank{rank}.jsonl"))
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    with log.job(), log.attempt(attempt=0):
                        for step in range(3):
                            with log.step(step):
                                dist.all_reduce(torch.ones(2))
                messages = [str(w.message) for w in caught]
                self.assertEqual(len(messages), 1, messages)
                self.assertIn("has no flight recorder", messages[0])
                self.assertFalse(os.path.exists(os.path.join(tmp, "flight_recorder")))
                with open(os.path.join(tmp, "events.rank0.jsonl")) as f:
                    events = [json.loads(line)["event"] for line in f]
                self.assertEqual(events.count("step_end"), 3)
                self.assertEqual(events[-1], "job_end")
            finally:
                dist.destroy_process_group()


if __name__ == "__main__":
    unittest.main()
