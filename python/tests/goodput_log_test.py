"""GoodputLog and GoodputCallback against `sdcprobe goodput`: exact breakdowns with an injected
clock, a SIGKILLed writer, per-rank files merged, the callback under a stand-in trainer.

Needs SDCPROBE_BINARY (the ledger) and, for the probe case, SDCPROBE_LIBRARY; ctest sets both."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sdcprobe import SDC_EXIT_STATUS, GoodputCallback, GoodputLog, InlineProbe, SDCStop  # noqa: E402

T0 = 1798761600 * 10**9  # 2027-01-01T00:00:00Z
S = 10**9


class Clock:
    """Seconds after T0, set by the test; every event takes the current value."""

    def __init__(self):
        self.s = 0

    def __call__(self):
        return T0 + self.s * S


class FakeTorch:
    """What device_fields reads of torch: CUDA devices 0 to 2 (the current one 1), or no CUDA."""

    class device:
        def __init__(self, kind, index=None):
            if isinstance(kind, FakeTorch.device):
                kind, index = kind.type, kind.index
            elif ":" in kind:
                kind, index = kind.split(":")[0], int(kind.split(":")[1])
            self.type, self.index = kind, index

    def __init__(self, cuda, initialized=True):
        def props(i):
            return types.SimpleNamespace(uuid="8f2c0d1a-7b3e-4c5d-9e6f-0a1b2c3d4e5f", pci_domain_id=0,
                                         pci_bus_id=0x19 + i, pci_device_id=0)

        self.cuda = types.SimpleNamespace(is_available=lambda: cuda, is_initialized=lambda: initialized,
                                          current_device=lambda: 1, get_device_properties=props)


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def goodput(*paths):
    binary = os.environ.get("SDCPROBE_BINARY")
    if not binary:
        raise unittest.SkipTest("SDCPROBE_BINARY not set (ctest sets it)")
    out = subprocess.run([binary, "goodput", "--json", *paths], capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError("sdcprobe goodput failed (%d): %s" % (out.returncode, out.stderr))
    return json.loads(out.stdout)


def seconds(report):
    """{"productive": s, "queue": s, ...} in whole seconds, checking the exact balance first."""
    cats = report["categories"]
    assert report["wall_ns"] == report["productive_ns"] + sum(c["ns"] for c in cats.values())
    out = {name: c["ns"] / S for name, c in cats.items()}
    out["productive"] = report["productive_ns"] / S
    out["wall"] = report["wall_ns"] / S
    return out


def steps(log, clock, first, last, length=10):
    for i in range(first, last + 1):
        with log.step(i):
            clock.s += length


class CrashAndRestartTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "events.rank{rank}.jsonl")

    def tearDown(self):
        self.dir.cleanup()

    def test_crash_and_restart_give_the_exact_breakdown(self):
        clock = Clock()
        # Attempt 0: init 0-2, steps 0-2 (10 s each) with step 1 saved 22-24, step 3 crashes at 40.
        log = GoodputLog(self.path, rank=0, clock=clock)
        with self.assertRaises(RuntimeError):
            with log.job(), log.attempt(0):
                with log.init():
                    clock.s = 2
                steps(log, clock, 0, 1)
                with log.checkpoint(1):
                    clock.s = 24
                log.commit(1)
                steps(log, clock, 2, 2)
                with log.step(3):
                    clock.s = 40
                    raise RuntimeError("the process dies")
        log.close()
        # Attempt 1, a new process at 50: restore step 1 (50-53), steps 2-3, eval 73-75, data wait
        # 75-76, step 4, job_end at 86.
        clock.s = 50
        log = GoodputLog(self.path, rank=0, clock=clock)
        with log.job(), log.attempt(1):
            with log.restore(1):
                clock.s = 53
            steps(log, clock, 2, 3)
            with log.eval():
                clock.s = 75
            with log.data_wait():
                clock.s = 76
            steps(log, clock, 4, 4)
        log.close()
        path = self.path.format(rank=0)
        kinds = [e["event"] for e in read_events(path)]
        self.assertEqual(kinds.count("fault_detected"), 1)
        self.assertEqual(kinds[-1], "job_end")
        got = seconds(goodput(path))
        # By hand, in seconds:
        #   restart & warm-up: 0-2 (init before the first step) + 50-53 (the restore) = 5
        #   rework: step 2 (24-34, after step 1's save) + the in-flight step 3 from 34 for
        #     min(median step 10, to the fault 6) = 10 + 6 = 16
        #   detection & teardown: 40 (the in-flight allowance ends) to 50 (process_start) = 10
        #   blocking overhead: the save (2), the eval (2), the data wait (1) = 5
        #   productive: steps 0, 1, 2, 3, 4 kept, 10 s each = 50
        #   wall: 0-86 = 86 = 5 + 16 + 10 + 5 + 50
        self.assertEqual(got, {"wall": 86, "productive": 50, "queue": 0, "restart_warmup": 5, "rework": 16,
                               "detection_teardown": 10, "blocking_overhead": 5})

    def test_bad_arguments_are_refused(self):
        clock = Clock()
        log = GoodputLog(self.path, rank=3, clock=clock)
        self.assertTrue(log.path.endswith("events.rank3.jsonl"))
        with self.assertRaises(TypeError):
            log.step(1.5)
        with self.assertRaises(ValueError):
            log.step(-1)
        with self.assertRaises(ValueError):
            log.step(2**63)
        with self.assertRaises(ValueError):
            log.commit(4)  # no checkpoint(4) finished
        with self.assertRaises(ValueError):
            log.fault("")
        with self.assertRaises(ValueError):
            log.fault("oom", t=5)  # the log sets t
        with self.assertRaises(ValueError):
            with log.step(1):
                with log.step(2):
                    pass
        clock.s = -1
        with self.assertRaises(ValueError):
            log.fault("oom")  # the clock went backwards
        log.close()
        with self.assertRaises(ValueError):
            log.fault("oom")  # closed
        with self.assertRaises(TypeError):
            GoodputLog(self.path, rank="0")
        with self.assertRaises(TypeError):
            GoodputLog(self.path, clock=5)
        # Refused calls wrote nothing: only the outer step's begin (it ended by an exception).
        events = read_events(log.path)
        self.assertEqual([e["event"] for e in events], ["step_begin"])

    def test_rank_comes_from_the_environment(self):
        old = os.environ.get("RANK")
        os.environ["RANK"] = "5"
        try:
            log = GoodputLog(self.path, clock=Clock())
            self.assertEqual(log.rank, 5)
            log.close()
            os.environ["RANK"] = "x"
            with self.assertRaises(ValueError):
                GoodputLog(self.path)
        finally:
            if old is None:
                os.environ.pop("RANK")
            else:
                os.environ["RANK"] = old

    def test_clock_never_goes_backwards(self):
        log = GoodputLog(self.path, rank=0)
        for i in range(200):
            with log.step(i):
                pass
        log.close()
        times = [e["t"] for e in read_events(log.path)]
        self.assertEqual(times, sorted(times))


WRITER = r"""
import os, sys
sys.path.insert(0, sys.argv[2])
from sdcprobe import GoodputLog
log = GoodputLog(sys.argv[1], rank=0)
log.attempt(0)
i = 0
while True:
    with log.step(i):
        x = sum(range(200))
    if i % 10 == 9:
        with log.checkpoint(i):
            pass
        log.commit(i)
    i += 1
"""


class LauncherTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "events.jsonl")

    def tearDown(self):
        self.dir.cleanup()

    def test_attempt_is_torchruns_restart_count_then_slurms(self):
        saved = {k: os.environ.pop(k, None) for k in ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")}
        try:
            def attempt_logged():
                log = GoodputLog(self.path, rank=0, clock=Clock())
                with log.attempt():
                    pass
                log.close()
                return read_events(self.path)[-1]["attempt"]

            self.assertEqual(attempt_logged(), 0)
            os.environ["SLURM_RESTART_COUNT"] = "2"
            self.assertEqual(attempt_logged(), 2)
            os.environ["TORCHELASTIC_RESTART_COUNT"] = "3"
            self.assertEqual(attempt_logged(), 3)
            os.environ["TORCHELASTIC_RESTART_COUNT"] = "three"
            with self.assertRaisesRegex(ValueError, "TORCHELASTIC_RESTART_COUNT"):
                attempt_logged()
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v

    def test_slurm_restart_is_logged_beside_torchruns_attempt(self):
        names = ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT", "SLURM_JOB_ID")
        saved = {k: os.environ.pop(k, None) for k in names}
        try:
            def logged():
                log = GoodputLog(self.path, rank=0, clock=Clock())
                with log.attempt():
                    pass
                log.close()
                e = read_events(self.path)[-1]
                return e["attempt"], e.get("slurm_restart")

            self.assertEqual(logged(), (0, None))  # outside Slurm: no field
            os.environ["SLURM_JOB_ID"] = "7"
            self.assertEqual(logged(), (0, 0))  # Slurm sets the count only after a requeue
            os.environ["SLURM_RESTART_COUNT"] = "1"
            os.environ["TORCHELASTIC_RESTART_COUNT"] = "3"
            self.assertEqual(logged(), (3, 1))
            os.environ["SLURM_RESTART_COUNT"] = "one"
            with self.assertRaisesRegex(ValueError, "SLURM_RESTART_COUNT"):
                logged()
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v

    def test_process_start_says_where_the_rank_runs(self):
        def logged(torch, device=None):
            saved = sys.modules.pop("torch", None)
            if torch is not None:
                sys.modules["torch"] = torch
            try:
                log = GoodputLog(self.path, rank=0, clock=Clock())
                with log.attempt(device=device):
                    pass
                log.close()
            finally:
                sys.modules.pop("torch", None)
                if saved is not None:
                    sys.modules["torch"] = saved
            e = read_events(self.path)[-1]
            self.assertEqual(e["host"], socket.gethostname())
            return {k: e[k] for k in ("device", "pci_bus_id") if k in e}

        self.assertEqual(logged(None), {})  # torch not loaded: not known, and not guessed
        self.assertEqual(logged(None, device="cpu"), {"device": "cpu"})
        self.assertEqual(logged(FakeTorch(cuda=False)), {"device": "cpu"})
        self.assertEqual(logged(FakeTorch(cuda=True, initialized=False)), {})  # the job has not chosen its GPU
        gpu = {"device": "GPU-8f2c0d1a-7b3e-4c5d-9e6f-0a1b2c3d4e5f", "pci_bus_id": "00000000:1A:00.0"}
        self.assertEqual(logged(FakeTorch(cuda=True)), gpu)  # the current device, 1
        self.assertEqual(logged(FakeTorch(cuda=True), device="cuda:2")["pci_bus_id"], "00000000:1B:00.0")
        self.assertEqual(logged(FakeTorch(cuda=True), device=0)["pci_bus_id"], "00000000:19:00.0")
        self.assertEqual(logged(FakeTorch(cuda=True), device="cpu"), {"device": "cpu"})
        # The ledger reads every attempt's record (a malformed one is exit 2 naming the field).
        self.assertEqual(goodput(self.path)["diagnostics"]["skipped_lines"], 0)

    def test_process_start_is_when_the_process_started(self):
        # The child sleeps 1 s before it opens the log (as an import of torch would take); the
        # process_start it writes must be its own start from the OS, not the time of attempt().
        child = ("import os, sys, time\n"
                 "sys.path.insert(0, %r)\n"
                 "time.sleep(1)\n"
                 "from sdcprobe import GoodputLog\n"
                 "opened = time.time_ns()\n"
                 "log = GoodputLog(%r, rank=0)\n"
                 "with log.attempt():\n"
                 "    pass\n"
                 "print(opened)\n") % (os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."), self.path)
        spawned = time.time_ns()
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
        opened = int(out.stdout)
        start = read_events(self.path)[0]
        self.assertEqual(start["event"], "process_start")
        # The start is in clock ticks (10 ms): it may read up to a tick early.
        self.assertGreaterEqual(start["t"], spawned - 2 * 10**7)
        self.assertLessEqual(start["t"], opened - 9 * 10**8)


class KillTest(unittest.TestCase):
    def test_sigkill_loses_only_the_step_in_flight(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "events.rank0.jsonl")
            package = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
            writer = subprocess.Popen([sys.executable, "-c", WRITER, path, package])
            try:
                # Wait (without a time limit that depends on the machine) for some thousand lines.
                while not os.path.exists(path) or os.path.getsize(path) < 200_000:
                    if writer.poll() is not None:
                        self.fail("the writer exited with %s" % writer.returncode)
                    time.sleep(0.01)
            finally:
                writer.send_signal(signal.SIGKILL)
                writer.wait()
            with open(path, "rb") as f:
                data = f.read()
            self.assertTrue(data.endswith(b"\n"), "a torn last line")
            events = [json.loads(line) for line in data.decode().splitlines()]
            # The exact sequence the loop writes, up to where it was killed.
            expected = [("process_start", None)]
            i = 0
            while len(expected) < len(events):
                expected += [("step_begin", i), ("step_end", i)]
                if i % 10 == 9:
                    expected += [("ckpt_begin", i), ("ckpt_end", i), ("ckpt_commit", i)]
                i += 1
            got = [(e["event"], e.get("step")) for e in events]
            self.assertEqual(got, expected[:len(got)])
            ended = {e["step"] for e in events if e["event"] == "step_end"}
            begun = {e["step"] for e in events if e["event"] == "step_begin"}
            self.assertLessEqual(len(begun - ended), 1)  # only the step in flight is lost
            self.assertGreater(len(ended), 100)
            report = goodput(path)
            self.assertGreater(report["productive_ns"], 0)


class MergeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.pattern = os.path.join(self.dir.name, "events.rank{rank}.jsonl")

    def tearDown(self):
        self.dir.cleanup()

    def write_two_ranks(self):
        """Rank 1 has an ECC error at 35 during step 3; rank 0 goes on logging (step 3 ends at 42,
        step 4 begins) until its NCCL timeout at 60. Both restart at 70 from step 1's checkpoint."""
        c0, c1 = Clock(), Clock()
        r0 = GoodputLog(self.pattern, rank=0, clock=c0)
        r1 = GoodputLog(self.pattern, rank=1, clock=c1)
        for log in (r0, r1):
            log.attempt(0)
        for log, clock in ((r0, c0), (r1, c1)):
            steps(log, clock, 0, 1)
            with log.checkpoint(1):
                clock.s = 22
            log.commit(1)
            steps(log, clock, 2, 2)
        c1.s = 35
        r1.fault("ecc_uncorrectable")
        with r0.step(3):
            c0.s = 42
        r0.step(4).__enter__()
        c0.s = 60
        r0.fault("nccl_timeout")
        c0.s = c1.s = 70
        for log, clock in ((r0, c0), (r1, c1)):
            log.attempt(1)
            with log.restore(1):
                clock.s = 72
            steps(log, clock, 2, 3)
        r0.job_end()
        r0.close()
        r1.close()

    def test_a_fault_on_rank_1_counts(self):
        self.write_two_ranks()
        merged = seconds(goodput(os.path.join(self.dir.name, "events.rank*.jsonl")))
        # By hand: rank 1's fault at 35 stops the job; rank 0's step 3 end and step 4 are the dying
        # attempt's. In-flight step 3 from 32: min(median 10, to the fault 3) = 3 of rework.
        #   rework: step 2 (22-32) + 3 = 13; detection & teardown: 35-70 = 35
        #   restart & warm-up: 70-72 (the restore) = 2; blocking: the save 20-22 = 2
        #   productive: steps 0, 1, 2, 3 = 40; wall 0-92 = 92
        self.assertEqual(merged, {"wall": 92, "productive": 40, "queue": 0, "restart_warmup": 2, "rework": 13,
                                  "detection_teardown": 35, "blocking_overhead": 2})
        # Rank 0 alone sees only its own timeout at 60: steps 2-3 (22-42) and step 4 in flight from
        # 42 for the median 10 are rework (30); detection & teardown is 52-70 = 18.
        alone = seconds(goodput(self.pattern.format(rank=0)))
        self.assertEqual((alone["rework"], alone["detection_teardown"]), (30, 18))

    def test_bad_merges_name_the_file_and_line(self):
        binary = os.environ.get("SDCPROBE_BINARY")
        if not binary:
            self.skipTest("SDCPROBE_BINARY not set (ctest sets it)")
        d = self.dir.name

        def write(name, lines):
            with open(os.path.join(d, name), "w") as f:
                f.write("".join(json.dumps(line) + "\n" for line in lines))
            return os.path.join(d, name)

        def refused(*paths):
            out = subprocess.run([binary, "goodput", *paths], capture_output=True, text=True)
            self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
            self.assertTrue(out.stderr.startswith("sdcprobe: error: "), out.stderr)
            return out.stderr

        a = write("a.jsonl", [{"t": 1, "event": "process_start", "rank": 0}])
        b = write("b.jsonl", [{"t": 2, "event": "process_start"}])
        self.assertIn("b.jsonl: rank unknown", refused(a, b))
        one = write("one.jsonl", [{"t": 1, "event": "process_start", "rank": 1}])
        self.assertIn("no file of rank 0", refused(one, write("rank3.jsonl", [{"t": 1, "event": "process_start"}])))
        bad = write("events.rank1.jsonl", [{"t": 5, "event": "fault_detected"}, {"t": 4, "event": "teardown_end"}])
        self.assertIn("events.rank1.jsonl: line 2: time goes backwards", refused(a, bad))
        self.assertIn("nothing*.jsonl: no file matches", refused(a, os.path.join(d, "nothing*.jsonl")))


class Trainer:
    """The attributes of Lightning's Trainer that the callback reads."""

    def __init__(self):
        self.global_step = 0
        self.should_stop = False


class Module:
    def parameters(self):
        return iter(["w", "b"])


class ReplicaStandIn:
    def __init__(self):
        self.calls = []

    def step(self, step, tensors):
        self.calls.append((step, list(tensors)))


def fit(cb, trainer, clock, batches, accumulate=1, save_every=None, validate_at=None, fail_at=None):
    """Lightning's order of hooks for `batches` batches, 5 s each."""
    module = Module()
    cb.on_fit_start(trainer, module)
    clock.s += 3  # set-up before the first batch
    try:
        for batch in range(batches):
            cb.on_train_batch_start(trainer, module, None, batch)
            clock.s += 5
            if batch == fail_at:
                raise RuntimeError("CUDA error: an illegal memory access")
            if (batch + 1) % accumulate == 0:
                trainer.global_step += 1
            cb.on_train_batch_end(trainer, module, None, None, batch)
            if save_every and (batch + 1) % save_every == 0:
                cb.before_save(trainer, module)
                clock.s += 2  # Lightning writes the file after the hook
            if batch == validate_at:
                cb.on_validation_start(trainer, module)
                clock.s += 4
                cb.on_validation_end(trainer, module)
            if trainer.should_stop:
                break
    except Exception as e:
        cb.on_exception(trainer, module, e)
        return e
    cb.on_train_end(trainer, module)
    return None


class CallbackTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "events.rank{rank}.jsonl")

    def tearDown(self):
        self.dir.cleanup()

    def test_stand_in_trainer_gives_the_exact_breakdown(self):
        clock = Clock()
        replica = ReplicaStandIn()
        cb = GoodputCallback(GoodputLog(self.path, rank=0, clock=clock), replica_check=replica)
        # 8 batches, 2 per optimizer step: 4 steps of 10 s (numbered by global_step after them, 1 to
        # 4); a save after steps 2 and 4 (2 s each), a validation (4 s) after step 3.
        self.assertIsNone(fit(cb, Trainer(), clock, 8, accumulate=2, save_every=4, validate_at=5))
        events = read_events(self.path.format(rank=0))
        self.assertEqual([(e["event"], e.get("step")) for e in events], [
            ("process_start", None),
            ("step_begin", 1), ("step_end", 1), ("step_begin", 2), ("step_end", 2),
            ("ckpt_begin", 2), ("ckpt_end", 2), ("ckpt_commit", 2),
            ("step_begin", 3), ("step_end", 3), ("eval_begin", None), ("eval_end", None),
            ("step_begin", 4), ("step_end", 4),
            ("ckpt_begin", 4), ("ckpt_end", 4), ("ckpt_commit", 4), ("job_end", None)])
        self.assertEqual(replica.calls, [(s, ["w", "b"]) for s in range(1, 5)])
        # By hand: 3 s of set-up, 4 steps of 10 s, 2 saves of 2 s and an eval of 4 s: wall 51.
        self.assertEqual(seconds(goodput(self.path.format(rank=0))), {
            "wall": 51, "productive": 40, "queue": 0, "restart_warmup": 3, "rework": 0,
            "detection_teardown": 0, "blocking_overhead": 8})

    def test_exception_logs_a_fault_with_the_step_in_flight(self):
        clock = Clock()
        cb = GoodputCallback(GoodputLog(self.path, rank=0, clock=clock))
        error = fit(cb, Trainer(), clock, 10, save_every=2, fail_at=5)
        self.assertIsInstance(error, RuntimeError)
        events = read_events(self.path.format(rank=0))
        self.assertEqual([(e["event"], e.get("step")) for e in events[-3:]],
                         [("step_end", 5), ("step_begin", 6), ("fault_detected", None)])
        self.assertEqual(events[-1]["kind"], "RuntimeError")
        self.assertEqual(events[-1]["t"], T0 + (3 + 5 * 5 + 2 * 2 + 5) * S)
        # By hand: set-up 3; steps 1-4 (20) and the saves of steps 2 and 4 (4) are kept; the job ends
        # at the fault (37) without a restart, so step 5 after step 4's save (5) and step 6 in flight
        # (min(median 5, to the fault 5)) are rework: 10.
        got = seconds(goodput(self.path.format(rank=0)))
        self.assertEqual(got, {"wall": 37, "productive": 20, "queue": 0, "restart_warmup": 3, "rework": 10,
                               "detection_teardown": 0, "blocking_overhead": 4})

    def test_the_flight_recorder_is_set_up_when_the_callbacks_are_made(self):
        # Before the Trainer makes the process group, which reads the settings (NCCL's watchdog).
        from sdcprobe import SDCCallback
        from sdcprobe import flight_recorder

        folder = os.path.join(self.dir.name, "flight_recorder", "attempt0")
        GoodputCallback(self.path)
        self.assertEqual(os.environ["TORCH_FR_DUMP_TEMP_FILE"], os.path.join(folder, "nccl_trace_rank_"))
        self.assertEqual(os.environ["TORCH_FR_DUMP_ON_TIMEOUT"], "1")
        # SDCCallback beside its probe's event log, sharing the side thread of the same folder.
        sdc = SDCCallback(event_log=os.path.join(self.dir.name, "inline.jsonl"))
        self.assertEqual(os.environ["TORCH_FR_DUMP_TEMP_FILE"], os.path.join(folder, "nccl_trace_rank_"))
        self.assertIs(sdc.flight_recorder, flight_recorder.dumps_for(folder, "attempt0"))
        other = os.path.join(self.dir.name, "logs")
        off = SDCCallback(event_log=os.path.join(other, "inline.jsonl"), flight_recorder=None)
        self.assertIsNone(off.flight_recorder)
        SDCCallback(event_log=os.path.join(other, "inline.jsonl"), flight_recorder="fr")
        self.assertEqual(os.environ["TORCH_FR_DUMP_TEMP_FILE"],
                         os.path.join(other, "fr", "attempt0", "nccl_trace_rank_"))
        with self.assertRaises(TypeError):
            SDCCallback(flight_recorder=5)

    def test_bad_arguments_are_refused(self):
        log = GoodputLog(self.path, rank=0, clock=Clock())
        with self.assertRaises(ValueError):
            GoodputCallback(log, on_sdc="ignore")
        with self.assertRaises(TypeError):
            GoodputCallback(log, replica_check=object())
        with self.assertRaises(TypeError):
            GoodputCallback(log, probe=5)
        log.close()

    def test_a_probe_made_before_setup_is_refused(self):
        # Made before Lightning sets the rank's device, it would test device 0 on every rank.
        if not os.environ.get("SDCPROBE_LIBRARY"):
            self.skipTest("SDCPROBE_LIBRARY not set (ctest sets it)")
        with InlineProbe(backend="cpu", probes="alu.int64") as probe:
            with self.assertRaisesRegex(TypeError, "dict of InlineProbe options, not an InlineProbe"):
                GoodputCallback(self.path, probe=probe)

    def test_inline_probe_failure_stops_and_merges(self):
        if not os.environ.get("SDCPROBE_LIBRARY"):
            self.skipTest("SDCPROBE_LIBRARY not set (ctest sets it)")
        trainer = Trainer()
        cb = GoodputCallback(self.path, on_sdc="stop",
                             probe={"backend": "cpu", "every": 1, "probes": "alu.int64",
                                    "inject": "model=bitflip,mode=permanent"})
        module = Module()
        cb.on_fit_start(trainer, module)
        self.assertTrue(cb.probe.backend == "cpu")
        # "stop" ends the fit, and so the process, with SDCStop: status 75 for the launcher.
        with self.assertRaises(SDCStop) as stop:
            for batch in range(50):
                cb.on_train_batch_start(trainer, module, None, batch)
                trainer.global_step += 1
                cb.on_train_batch_end(trainer, module, None, None, batch)
                while cb.probe.verdict["in_flight"]:
                    time.sleep(0.002)
        self.assertEqual(stop.exception.code, SDC_EXIT_STATUS)
        cb.on_exception(trainer, module, stop.exception)  # as Lightning does with it
        events = read_events(self.path.format(rank=0))
        self.assertEqual((events[-1]["event"], events[-1]["kind"]), ("fault_detected", "SDCStop"))
        inline = os.path.join(self.dir.name, "events.rank0.inline.jsonl")
        kinds = [e["event"] for e in read_events(inline)]
        self.assertIn("probe_begin", kinds)
        self.assertIn("sdc_detected", kinds)
        # The probe's file merges with the recorder's (same rank, from the name): its probes ran on
        # their own thread, so they are overlapped probe time, and with no commit the SDC discards
        # every step.
        report = goodput(os.path.join(self.dir.name, "events.rank*.jsonl"))
        self.assertGreater(report["diagnostics"]["overlapped_probe_ns"], 0)
        self.assertEqual(report["productive_ns"], 0)
        self.assertEqual(report["diagnostics"]["rollbacks"], 1)


class ReplicaCheckIntoTheLogTest(unittest.TestCase):
    """sdcprobe.ReplicaCheck with the recorder as its event log, on a one-rank gloo group."""

    def test_replica_events_share_the_recorders_file_and_clock(self):
        try:
            import torch
            import torch.distributed as dist
        except ImportError:
            self.skipTest("torch not importable")
        if not os.environ.get("SDCPROBE_LIBRARY"):
            self.skipTest("SDCPROBE_LIBRARY not set (ctest sets it)")
        from sdcprobe import ReplicaCheck
        with tempfile.TemporaryDirectory() as d:
            dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "rdzv"), rank=0, world_size=1)
            try:
                log = GoodputLog(os.path.join(d, "events.rank{rank}.jsonl"))
                check = ReplicaCheck(every=2, event_log=log)
                cb = GoodputCallback(log, replica_check=check)
                trainer, module = Trainer(), torch.nn.Linear(4, 4)
                cb.on_fit_start(trainer, module)
                for batch in range(5):
                    cb.on_train_batch_start(trainer, module, None, batch)
                    trainer.global_step += 1
                    cb.on_train_batch_end(trainer, module, None, None, batch)
                cb.on_train_end(trainer, module)
            finally:
                dist.destroy_process_group()
            events = read_events(log.path)
            self.assertEqual([(e["event"], e.get("step")) for e in events if e["event"].startswith("probe")],
                             [(kind, s) for s in (2, 4) for kind in ("probe_begin", "probe_end")])
            self.assertTrue(all(e["rank"] == 0 for e in events))
            report = goodput(log.path)
            self.assertGreater(report["categories"]["blocking_overhead"]["sdc_ns"], 0)

    def test_log_event_refuses_what_the_ledger_would(self):
        with tempfile.TemporaryDirectory() as d:
            log = GoodputLog(os.path.join(d, "e.jsonl"), rank=0, clock=Clock())
            with self.assertRaises(ValueError):
                log.log_event("coffee_break")
            with self.assertRaises(ValueError):
                log.log_event("step_end")  # no step
            with self.assertRaises(ValueError):
                log.log_event("sdc_detected", last_good_step=-1)
            with self.assertRaises(ValueError):
                log.log_event("sdc_detected", rank=2)  # the file's rank is the log's own
            log.log_event("sdc_detected", last_good_step=3, suspect_rank=2, device="GPU-x")
            log.close()
            self.assertEqual(read_events(log.path), [{"t": T0, "event": "sdc_detected", "rank": 0,
                                                      "last_good_step": 3, "suspect_rank": 2, "device": "GPU-x"}])


if __name__ == "__main__":
    unittest.main()
