"""Live hangs named by `sdcprobe hang` (docs/goodput.md, "Hangs"): real jobs of 4 gloo ranks under
torch 2.x, instrumented with GoodputLog alone, one per way a job hangs, each checked against what
the attribution must say and against the job's goodput breakdown.

The scenarios (as tests/goodput/data/flight_recorder/record.py records them): a clean job, a rank
that stops entering collectives, one that sleeps inside a step past the timeout, two stuck ranks, a
rank killed with SIGKILL (no dump), sizes that differ at one sequence, a rank that skips one
collective and leaves (no dump), and a 2 x 2 mesh of tensor- and data-parallel groups whose
tensor-parallel rank 3 stops.

- Under torch.multiprocessing.spawn: 4 processes are spawned once, and each scenario's rank is a
  fork of its process (a fresh recorder and process group; torch is not imported again, which is
  most of a job's time on 2 cores), every scenario at once. Each scenario is its own job.
- Under torchrun: one job whose attempt N runs scenario N, the clean one last; torchrun's agent
  tears the stuck ranks down and restarts the job after each failed attempt, and `sdcprobe goodput`
  reads every attempt's dumps.

    python hang_jobs_test.py                       the tests (ctest sets SDCPROBE_BINARY)
    torchrun ... hang_jobs_test.py --worker DIR    one rank of the torchrun job
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from torchrun_test import free_port, rendezvous  # noqa: E402

WORLD = 4
TIMEOUT_S = 3
# name: what the attribution must say (verdict, culprits, ranks without a dump), the ranks that
# never end by themselves (the launcher ends them), and for a culprit the group and sequence.
SCENARIOS = {
    "stop": {"verdict": "culprit", "culprits": [2], "no_dump": [], "stuck": [2], "at": ("0", 6)},
    "sleep_in_step": {"verdict": "culprit", "culprits": [1], "no_dump": [], "stuck": [1], "at": ("0", 6)},
    "two_stuck": {"verdict": "culprit", "culprits": [1, 3], "no_dump": [], "stuck": [1, 3], "at": ("0", 5)},
    "killed": {"verdict": "cannot_decide", "culprits": [], "no_dump": [3], "stuck": []},
    "sizes_differ": {"verdict": "culprit", "culprits": [2], "no_dump": [], "stuck": [], "at": ("0", 4)},
    "skip": {"verdict": "cannot_decide", "culprits": [], "no_dump": [2], "stuck": []},
    "mesh_stop": {"verdict": "culprit", "culprits": [3], "no_dump": [], "stuck": [3], "at": ("2", 3)},
    "clean": {"verdict": "no_hang", "culprits": [], "no_dump": [], "stuck": []},
}
ORDER = list(SCENARIOS)  # the torchrun job's attempts; the clean one ends the job


def steps(log, rank, scenario):
    """The training loop: one all-reduce a step, or a tensor-parallel then a data-parallel one."""
    import torch
    import torch.distributed as dist

    t = torch.ones(4)
    if scenario == "mesh_stop":
        timeout = datetime.timedelta(seconds=TIMEOUT_S)
        # Every rank makes every group, in the same order (torch requires it).
        tp = [dist.new_group([0, 1], timeout=timeout), dist.new_group([2, 3], timeout=timeout)][rank // 2]
        dp = [dist.new_group([0, 2], timeout=timeout), dist.new_group([1, 3], timeout=timeout)][rank % 2]
        for step in range(1, 6):
            with log.step(step):
                if rank == 3 and step == 3:
                    threading.Event().wait()  # stops before the tensor-parallel all-reduce
                dist.all_reduce(t, group=tp)
                dist.all_reduce(t, group=dp)
        return
    for step in range(1, 9):
        with log.step(step):
            if scenario == "stop" and rank == 2 and step == 6:
                threading.Event().wait()  # a data-loader deadlock: never enters again
            if scenario == "two_stuck" and rank in (1, 3) and step == 5:
                threading.Event().wait()
            if scenario == "sleep_in_step" and rank == 1 and step == 6:
                time.sleep(120)  # a stuck step: far past the timeout
            if scenario == "killed" and rank == 3 and step == 6:
                os.kill(os.getpid(), signal.SIGKILL)
            if scenario == "skip" and rank == 2 and step == 4:
                continue  # skips one collective: its later ones pair with the others' earlier ones
            x = torch.ones(8) if (scenario == "sizes_differ" and rank == 2 and step == 4) else t
            dist.all_reduce(x)


def run_rank(scenario, rank, out, store=None, last=True):
    """One rank of one attempt, logged by GoodputLog into `out`; the process's exit status: 0 when
    the attempt ended, 1 when it failed. store: the job's store (else torchrun's environment)."""
    import torch
    import torch.distributed as dist

    from sdcprobe import GoodputLog

    torch.set_num_threads(1)
    log = GoodputLog(os.path.join(out, "events.rank{rank}.jsonl"), rank=rank)
    try:
        with log.attempt():
            with log.init():
                # Rendezvous with a long timeout (the ranks start apart), the collectives' after.
                dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                                        timeout=datetime.timedelta(seconds=60))
                dist.distributed_c10d.set_timeout(datetime.timedelta(seconds=TIMEOUT_S))
            steps(log, rank, scenario)
            if scenario == "skip" and rank == 2:
                pass  # done with its loop: leaves, and its attempt ends without a dump
            else:
                dist.barrier()
            if scenario == "clean":
                # Dumps of a clean job, asked for by rank 0 after the last collective: no hang.
                if rank == 0:
                    log.flight_recorder.request()
                else:
                    mine = os.path.join(log.flight_recorder.directory, "nccl_trace_rank_%d" % rank)
                    deadline = time.monotonic() + 30
                    while not os.path.exists(mine) and time.monotonic() < deadline:
                        time.sleep(0.05)
        if last and rank == 0:
            log.job_end()
        status = 0
    except Exception:
        status = 1
    log.close()
    return status


def pool_worker(rank, tmp, ports):
    """One spawned process: forks this rank of every scenario at once and reaps them. A scenario's
    rank that never ends by itself is ended (the launcher's part) once its other ranks ended, which
    is after the failing ranks' wait for every dump."""
    import torch.distributed as dist

    import sdcprobe  # noqa: F401  (imported once, before the forks)

    children = {}
    for scenario, port in zip(ORDER, ports):
        pid = os.fork()
        if pid == 0:
            out = os.path.join(tmp, scenario)
            store = dist.TCPStore("127.0.0.1", port, WORLD, rank == 0, timeout=datetime.timedelta(seconds=60))
            # Past gloo's teardown, which can hang at exit (replica_spawn_test.py says why).
            os._exit(run_rank(scenario, rank, out, store))
        children[pid] = scenario
    deadline = time.monotonic() + 120
    while children:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid in children:
            with open(os.path.join(tmp, children.pop(pid), "ended.%d" % rank), "w"):
                pass
            continue
        for pid, scenario in children.items():
            spec = SCENARIOS[scenario]
            others = [r for r in range(WORLD) if r not in spec["stuck"]]
            ended = all(os.path.exists(os.path.join(tmp, scenario, "ended.%d" % r)) for r in others)
            if (rank in spec["stuck"] and ended) or time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def sdcprobe(*args):
    return subprocess.run([os.environ["SDCPROBE_BINARY"]] + list(args), capture_output=True, text=True)


class Checks:
    def check_hang(self, scenario, folder, events, torn_down=False):
        """`sdcprobe hang` on a scenario's dumps says what SCENARIOS says, with each culprit's host.
        torn_down: the launcher may have ended other ranks before they dumped (torchrun's agent
        ends every rank as soon as one dies): those are undecided too, for want of a dump."""
        spec = SCENARIOS[scenario]
        dumped = sorted(os.listdir(folder))
        expected = ["nccl_trace_rank_%d" % r for r in range(WORLD) if r not in spec["no_dump"]]
        if torn_down:
            self.assertLessEqual(set(dumped), set(expected), scenario)
            no_dump = [r for r in range(WORLD) if "nccl_trace_rank_%d" % r not in dumped]
        else:
            self.assertEqual(dumped, expected, scenario)
            no_dump = spec["no_dump"]
        out = folder + ".json"
        r = sdcprobe("hang", folder, "--world-size", str(WORLD), "--events", events, "--json", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            report = json.load(f)
        self.assertEqual((report["verdict"], [c["rank"] for c in report["culprits"]]),
                         (spec["verdict"], spec["culprits"]), "%s: %s" % (scenario, r.stdout))
        self.assertEqual([c["host"] for c in report["culprits"]], [socket.gethostname()] * len(spec["culprits"]))
        if no_dump:
            # Not guessed: a rank without a dump is undecided, with why.
            undecided = {u["rank"]: u["why"] for u in report["undecided"]}
            for rank in no_dump:
                self.assertTrue(undecided[rank].startswith("no dump"), "%s: %s" % (scenario, undecided))
        else:
            self.assertEqual(report["undecided"], [], scenario)
        if "at" in spec:
            group, seq = spec["at"]
            found = [(g["group"], g["first_incomplete"]) for g in report["groups"] if g["missing"]]
            found += [(m["group"], m["seq"]) for m in report["mismatches"]]
            self.assertIn((group, seq), found, "%s: %s" % (scenario, r.stdout))
        return report

    def check_goodput(self, events):
        """The job's breakdown sums exactly; its hangs by attempt folder."""
        r = sdcprobe("goodput", events, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        summary = json.loads(r.stdout)
        self.assertEqual(summary["productive_ns"] + sum(c["ns"] for c in summary["categories"].values()),
                         summary["wall_ns"])
        return summary, {os.path.basename(h["folder"]): h for h in summary.get("hangs", [])}

    def check_incident(self, scenario, hang):
        """A hang's entry in the breakdown: the scenario's verdict and culprits, and its time,
        waiting then teardown, under detection & teardown."""
        spec = SCENARIOS[scenario]
        self.assertEqual((hang["verdict"], [c["rank"] for c in hang["culprits"]]), (spec["verdict"], spec["culprits"]),
                         scenario)
        self.assertEqual(hang["waited_ns"] + hang["teardown_ns"], hang["detection_teardown_ns"], scenario)
        if scenario == "clean":
            self.assertEqual(hang["detection_teardown_ns"], 0)
        else:
            self.assertGreater(hang["detection_teardown_ns"], 0, scenario)
        if spec["stuck"]:
            # Those that waited for a stuck rank waited for the timeout.
            self.assertEqual(hang["timeout_ms"], TIMEOUT_S * 1000, scenario)
            self.assertGreaterEqual(hang["waited_ns"], (TIMEOUT_S - 1) * 10**9, scenario)


@unittest.skipUnless(os.environ.get("SDCPROBE_BINARY"), "SDCPROBE_BINARY not set (ctest sets it)")
class SpawnHangs(unittest.TestCase, Checks):
    def test_every_scenario_under_spawn(self):
        import torch
        import torch.multiprocessing as mp

        if not hasattr(torch._C._distributed_c10d, "_dump_fr_trace"):
            self.skipTest("torch %s has no flight recorder" % torch.__version__)
        tmp = tempfile.mkdtemp(prefix="hang-spawn-")
        for scenario in ORDER:
            os.makedirs(os.path.join(tmp, scenario))
        mp.spawn(pool_worker, args=(tmp, [free_port() for _ in ORDER]), nprocs=WORLD)
        for scenario in ORDER:
            with self.subTest(scenario):
                events = os.path.join(tmp, scenario, "events.rank*.jsonl")
                self.check_hang(scenario, os.path.join(tmp, scenario, "flight_recorder", "attempt0"), events)
                summary, hangs = self.check_goodput(events)
                self.assertEqual(sorted(hangs), ["attempt0"], scenario)
                self.check_incident(scenario, hangs["attempt0"])
                # Each job's one incident is the hang's: all of detection & teardown.
                self.assertEqual(hangs["attempt0"]["detection_teardown_ns"],
                                 summary["categories"]["detection_teardown"]["ns"], scenario)


def worker(out):
    """One rank of the torchrun job: attempt N runs scenario N."""
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    os._exit(run_rank(ORDER[attempt], int(os.environ["RANK"]), out, last=attempt == len(ORDER) - 1))


@unittest.skipUnless(os.environ.get("SDCPROBE_BINARY"), "SDCPROBE_BINARY not set (ctest sets it)")
class TorchrunHangs(unittest.TestCase, Checks):
    def test_every_scenario_as_an_attempt_under_torchrun(self):
        import torch

        if not hasattr(torch._C._distributed_c10d, "_dump_fr_trace"):
            self.skipTest("torch %s has no flight recorder" % torch.__version__)
        out = tempfile.mkdtemp(prefix="hang-torchrun-")
        command = [sys.executable, "-m", "torch.distributed.run", *rendezvous(), "--nproc_per_node", str(WORLD),
                   "--max_restarts", str(len(ORDER) - 1), "--monitor_interval", "0.5", "--log_dir",
                   os.path.join(out, "torchrun-logs"), os.path.abspath(__file__), "--worker", out]
        # A fresh store for each attempt (torchrun_test.py says why).
        run = subprocess.run(command, capture_output=True, text=True, timeout=600,
                             env=dict(os.environ, OMP_NUM_THREADS="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1"))
        self.assertEqual(run.returncode, 0, run.stdout[-4000:] + run.stderr[-4000:])
        events = os.path.join(out, "events.rank*.jsonl")
        summary, hangs = self.check_goodput(events)
        for attempt, scenario in enumerate(ORDER):
            with self.subTest(scenario):
                folder = os.path.join(out, "flight_recorder", "attempt%d" % attempt)
                if scenario == "killed" and not (os.path.isdir(folder) and os.listdir(folder)):
                    # The agent ended every rank before one dumped: nothing to read, no hang named.
                    self.assertNotIn("attempt%d" % attempt, hangs)
                    continue
                self.check_hang(scenario, folder, events, torn_down=scenario == "killed")
                self.check_incident(scenario, hangs["attempt%d" % attempt])
        # The attempts' hangs are the job's whole detection & teardown (but an attempt no rank dumped).
        total = summary["categories"]["detection_teardown"]["ns"]
        if len(hangs) == len(ORDER):
            self.assertEqual(sum(h["detection_teardown_ns"] for h in hangs.values()), total)
        else:
            self.assertLess(sum(h["detection_teardown_ns"] for h in hangs.values()), total)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        unittest.main()
