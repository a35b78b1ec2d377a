"""Drives InlineProbe on the CPU backend through the C ABI."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sdcprobe import SDC_EXIT_STATUS, InlineProbe, SDCCallback, SDCDetected, SDCProbeError, SDCStop  # noqa: E402


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def wait_idle(probe, timeout=30.0):
    """Waits until no probe is in flight, so the next due step is never skipped as busy."""
    deadline = time.monotonic() + timeout
    while probe.verdict["in_flight"]:
        if time.monotonic() > deadline:
            raise AssertionError("a probe stayed in flight for %s s" % timeout)
        time.sleep(0.005)


def run_steps(probe, steps, every=5, log=True):
    for step in range(steps):
        if step % every == 0:
            wait_idle(probe)
        if log:
            probe.log_event("step_begin", step=step)
        time.sleep(0.001)
        if log:
            probe.log_event("step_end", step=step)
        probe.step(step)


class InlineProbeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.dir.name, "events.jsonl")

    def tearDown(self):
        self.dir.cleanup()

    def test_clean_run_passes_and_logs_probe_events(self):
        with InlineProbe(backend="cpu", every=5, event_log=self.log, seed=7) as probe:
            run_steps(probe, 30)
            probe.close()
            events = read_events(self.log)
        # The probes run on the worker thread ("blocking": false); step()'s own work is "inline.step".
        begins = [e for e in events if e["event"] == "probe_begin" and e["blocking"] is False]
        ends = [e for e in events if e["event"] == "probe_end" and e["blocking"] is False]
        steps = [e for e in events if e["event"] == "probe_begin" and e["blocking"] is True]
        self.assertTrue(steps and all(e["probe"] == "inline.step" for e in steps))
        self.assertGreaterEqual(len(begins), 3)
        self.assertEqual(len(begins), len(ends))
        self.assertTrue(all(e["verdict"] == "pass" for e in ends))
        self.assertFalse(any(e["event"] == "sdc_detected" for e in events))
        times = [e["t"] for e in events]
        self.assertEqual(times, sorted(times))  # one writer, stamped under a lock

    def test_verdict_reports_last_good_step(self):
        probe = InlineProbe(backend="cpu", every=5, seed=3)
        run_steps(probe, 21, log=False)
        wait_idle(probe)
        probe.step(21)  # collects the probe queued at step 20
        v = probe.verdict
        self.assertEqual(v["verdict"], "pass")
        self.assertEqual(v["last_good_step"], 20)
        self.assertEqual(v["every"], 5)
        probe.close()

    def test_permanent_fault_writes_sdc_detected_with_last_good_step(self):
        # The fault appears after the first four injection points: the probes at steps 0 and 5
        # (two probes each) are clean, every probe from step 10 on fails.
        probe = InlineProbe(backend="cpu", every=5, event_log=self.log, seed=5, probes="alu.fma32,alu.int64",
                            inject="probe=alu.*,model=bitflip,mode=permanent,after=4")
        run_steps(probe, 16)
        wait_idle(probe)
        probe.step(16)
        verdict = probe.verdict
        probe.close()
        self.assertEqual(verdict["verdict"], "fail")
        detected = [e for e in read_events(self.log) if e["event"] == "sdc_detected"]
        self.assertGreaterEqual(len(detected), 1)
        self.assertEqual(detected[0]["last_good_step"], 5)
        self.assertEqual(detected[0]["step"], 10)
        self.assertTrue(detected[0]["device"].startswith("CPU-"))

    def test_verdict_reports_the_memory_rotation(self):
        # Every core shares one 1 MiB last-level cache (a fake sysfs tree): 3 slices of 1 MiB.
        root = os.path.join(self.dir.name, "root")
        for core in os.sched_getaffinity(0):
            cache = os.path.join(root, "sys/devices/system/cpu/cpu%d/cache/index3" % core)
            os.makedirs(cache)
            for name, text in (("level", "3"), ("size", "1024K"), ("shared_cpu_list", "0-1023")):
                with open(os.path.join(cache, name), "w") as f:
                    f.write(text + "\n")
        os.environ["SDCPROBE_SYSFS_ROOT"] = root
        try:
            probe = InlineProbe(backend="cpu", every=1, seed=3, probes="mem.random_blocks")
        finally:
            del os.environ["SDCPROBE_SYSFS_ROOT"]
        for step in range(7):
            wait_idle(probe)
            probe.step(step)
        probe.close()
        v = probe.verdict
        self.assertEqual(v["verdict"], "pass")
        self.assertEqual(v["memory_rotation"], {
            "probe": "mem.random_blocks", "cache_bytes": 1 << 20, "cache": "device", "region_bytes": 3 << 20,
            "region_cache_multiple": 3.0, "slice_bytes": 1 << 20, "slices": 3, "cycle_steps": 3,
            "slices_checked": 7})
        self.assertIn("a 3.0 MiB region (3.00x the 1.0 MiB cache) in 3 slices", v["cadence"])
        rotation = [r for r in v["results"] if r["probe"] == "mem.random_blocks"][0]["params"]["rotation"]
        self.assertEqual((rotation["slice"], rotation["checked"], rotation["mismatches"]), (0, (1 << 20) // 8, 0))
        # Without a memory probe there is no region.
        with InlineProbe(backend="cpu", every=1, seed=3, probes="alu.fma32") as alu_only:
            self.assertIsNone(alu_only.verdict["memory_rotation"])

    def test_bad_config_is_a_clear_error(self):
        with self.assertRaisesRegex(SDCProbeError, "backend 'tpu'"):
            InlineProbe(backend="tpu")
        with self.assertRaisesRegex(SDCProbeError, "no probe matches 'nope'"):
            InlineProbe(backend="cpu", probes="nope")
        with self.assertRaisesRegex(SDCProbeError, "field 'model'"):
            InlineProbe(backend="cpu", inject="model=zap")
        with self.assertRaisesRegex(SDCProbeError, "device 3 does not exist"):
            InlineProbe(backend="cpu", device=3)
        with self.assertRaises(ValueError):
            InlineProbe(backend="cpu", every=0)

    def test_out_of_range_numbers_are_refused_before_ctypes_wraps_them(self):
        with self.assertRaisesRegex(ValueError, "device must be in"):
            InlineProbe(backend="cpu", device=2**32)
        with self.assertRaisesRegex(ValueError, "every must be in"):
            InlineProbe(backend="cpu", every=2**63)
        with self.assertRaisesRegex(ValueError, "seed must be in"):
            InlineProbe(backend="cpu", seed=-1)
        with self.assertRaisesRegex(TypeError, "device must be an int"):
            InlineProbe(backend="cpu", device="0")
        with InlineProbe(backend="cpu", every=1000, probes="alu.int64") as probe:
            with self.assertRaisesRegex(ValueError, "step must be in"):
                probe.step(2**63)
            with self.assertRaisesRegex(ValueError, "step must be in"):
                probe.step(-1)
            probe.step(2**63 - 1000)
            wait_idle(probe)
            probe.step(2**63 - 999)  # not due: the next due step saturates instead of wrapping
            self.assertFalse(probe.verdict["in_flight"])
            probe.step(2**63 - 1)
            probe.close()
            self.assertEqual(probe.verdict["last_good_step"], 2**63 - 1)

    def test_stream_of_another_device_is_refused_at_create(self):
        # On the CPU backend a stream is an opaque id: index + 1, so 2 names device 1.
        with self.assertRaisesRegex(SDCProbeError, "stream belongs to device 1, not to device 0"):
            InlineProbe(backend="cpu", stream=2)

    def test_default_device_and_stream_are_torchs_current_ones(self):
        class Stream:
            def __init__(self, device):
                self.cuda_stream = device + 1  # the CPU backend's id for that device's stream

        class FakeCuda:
            def __init__(self, device, stream_device):
                self.device, self.stream_device = device, stream_device

            def is_available(self):
                return True

            def current_device(self):
                return self.device

            def current_stream(self, device=None):
                return Stream(self.stream_device)

        class FakeTorch:
            pass

        saved = sys.modules.get("torch")
        sys.modules["torch"] = FakeTorch()
        try:
            sys.modules["torch"].cuda = FakeCuda(device=1, stream_device=1)
            with self.assertRaisesRegex(SDCProbeError, "device 1 does not exist"):
                InlineProbe(probes="alu.int64")  # the CPU has one device: device 1 came from torch
            sys.modules["torch"].cuda = FakeCuda(device=0, stream_device=1)
            with self.assertRaisesRegex(SDCProbeError, "stream belongs to device 1"):
                InlineProbe(probes="alu.int64")
            sys.modules["torch"].cuda = FakeCuda(device=0, stream_device=0)
            InlineProbe(probes="alu.int64").close()
        finally:
            if saved is None:
                del sys.modules["torch"]
            else:
                sys.modules["torch"] = saved

    def test_callback_makes_its_probe_on_the_device_set_before_setup(self):
        """Lightning sets the rank's CUDA device after the callbacks are made, before setup():
        SDCCallback makes its probe there, on the device and the stream current then. Here a
        torch.cuda stand-in moves from device 1 (which the CPU backend lacks) to device 0."""
        class Stream:
            def __init__(self, device):
                self.cuda_stream = device + 1  # the CPU backend's id for that device's stream

        class FakeCuda:
            device, streams = 1, []

            def is_available(self):
                return True

            def current_device(self):
                return self.device

            def current_stream(self, device=None):
                self.streams.append(device)
                return Stream(device)

        class FakeTorch:
            cuda = FakeCuda()

        class Trainer:
            global_step = 0

        saved = sys.modules.get("torch")
        sys.modules["torch"] = FakeTorch()
        try:
            cb = SDCCallback(every=1, probes="alu.int64")
            FakeTorch.cuda.device = 0
            trainer = Trainer()
            cb.setup(trainer)
            for step in range(3):
                trainer.global_step = step
                cb.on_train_batch_end(trainer)
                wait_idle(cb.probe)
            cb.on_train_end(trainer)
        finally:
            if saved is None:
                del sys.modules["torch"]
            else:
                sys.modules["torch"] = saved
        self.assertEqual(FakeTorch.cuda.streams, [0])
        self.assertEqual((cb.probe.verdict["verdict"], cb.probe.verdict["last_good_step"]), ("pass", 2))

    def test_auto_cadence_is_sized_to_the_job(self):
        """every="auto" takes N from torch.distributed's world size, or from ranks=, and says it."""
        class FakeDist:
            def is_available(self):
                return True

            def is_initialized(self):
                return True

            def get_world_size(self):
                return 8

        class FakeTorch:
            distributed = FakeDist()

        def cadence(**options):
            with InlineProbe(backend="cpu", probes="alu.int64", seed=1, **options) as probe:
                for step in range(7):
                    probe.step(step)
                    time.sleep(0.001)
                return probe.verdict["cadence"]

        self.assertIn("on 1 ranks", cadence())
        saved = sys.modules.get("torch")
        sys.modules["torch"] = FakeTorch()
        try:
            self.assertIn("on 8 ranks", cadence())
            self.assertIn("on 1024 ranks", cadence(ranks=1024))
        finally:
            if saved is None:
                del sys.modules["torch"]
            else:
                sys.modules["torch"] = saved
        with self.assertRaisesRegex(ValueError, "ranks must be in"):
            InlineProbe(backend="cpu", probes="alu.int64", ranks=0)

    def test_log_event_checks_the_goodput_schema(self):
        with InlineProbe(backend="cpu", probes="alu.int64", event_log=self.log) as probe:
            with self.assertRaisesRegex(SDCProbeError, 'unknown event "bogus"'):
                probe.log_event("bogus")
            with self.assertRaisesRegex(SDCProbeError, 'step_end needs "step"'):
                probe.log_event("step_end")
            probe.log_event("step_end", step=3)
        self.assertEqual([e["event"] for e in read_events(self.log)], ["step_end"])

    def test_hang_and_crash_injection_are_refused(self):
        for model in ("hang", "crash"):
            with self.assertRaisesRegex(SDCProbeError, "hang and crash are refused"):
                InlineProbe(backend="cpu", inject="model=" + model)

    def test_verdict_stays_readable_after_close(self):
        probe = InlineProbe(backend="cpu", every=1, probes="alu.int64", seed=2)
        probe.step(0)  # queued: close() waits for it and records its verdict
        probe.close()
        v = probe.verdict
        self.assertEqual(v["verdict"], "pass")
        self.assertEqual(v["last_good_step"], 0)
        self.assertFalse(v["in_flight"])
        probe.close()  # a second close does nothing
        with self.assertRaisesRegex(SDCProbeError, "closed"):
            probe.step(1)
        with self.assertRaisesRegex(SDCProbeError, "closed"):
            probe.log_event("job_end")

    def test_close_while_another_thread_steps(self):
        probe = InlineProbe(backend="cpu", every=1, probes="alu.int64", seed=4)
        stepped = threading.Event()
        errors = []

        def train():
            step = 0
            try:
                while True:
                    probe.step(step)
                    step += 1
                    if step == 20:
                        stepped.set()
            except SDCProbeError as e:
                errors.append(str(e))
                stepped.set()

        trainer = threading.Thread(target=train)
        trainer.start()
        self.assertTrue(stepped.wait(60))
        probe.close()
        trainer.join(60)
        self.assertFalse(trainer.is_alive())
        self.assertEqual(len(errors), 1)
        self.assertIn("closed", errors[0])
        self.assertEqual(probe.verdict["verdict"], "pass")

    def test_two_threads_step_at_once(self):
        with InlineProbe(backend="cpu", every=3, probes="alu.int64", seed=6) as probe:
            threads = [threading.Thread(target=lambda first=first: [probe.step(s) for s in range(first, first + 100)])
                       for first in (0, 1000)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            probe.close()
            self.assertEqual(probe.verdict["verdict"], "pass")

    def test_callback_raises_once_on_sdc(self):
        class Trainer:
            global_step = 0

        cb = SDCCallback(on_sdc="stop", backend="cpu", every=1, probes="alu.int64",
                         inject="model=bitflip,mode=permanent")
        trainer = Trainer()
        with self.assertRaises(SDCStop) as stop:
            for step in range(5):
                trainer.global_step = step
                cb.on_train_batch_end(trainer)
                wait_idle(cb.probe)
        self.assertEqual(stop.exception.code, SDC_EXIT_STATUS)
        cb.on_exception(trainer)
        raising = SDCCallback(backend="cpu", every=1, probes="alu.int64", inject="model=bitflip,mode=permanent")
        with self.assertRaises(SDCDetected):
            for step in range(10):
                trainer.global_step = step
                raising.on_train_batch_end(trainer)
                wait_idle(raising.probe)
        raising.on_train_end()


class GoodputAttributionTest(unittest.TestCase):
    """The ledger attributes the rework after an inline sdc_detected to SDC."""

    def test_goodput_attributes_rework_to_sdc(self):
        sdcprobe = os.environ.get("SDCPROBE_BINARY")
        if not sdcprobe:
            self.skipTest("SDCPROBE_BINARY not set (ctest sets it)")
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "events.jsonl")
            probe = InlineProbe(backend="cpu", every=5, event_log=log, seed=5, probes="alu.fma32,alu.int64",
                                inject="probe=alu.*,model=bitflip,mode=permanent,after=4")
            probe.log_event("job_eligible")
            probe.log_event("alloc_granted")
            probe.log_event("process_start", attempt=1)
            for step in range(16):
                probe.log_event("step_begin", step=step)
                time.sleep(0.002)
                probe.log_event("step_end", step=step)
                if step % 5 == 4:
                    probe.log_event("ckpt_begin", step=step)
                    probe.log_event("ckpt_end", step=step)
                    probe.log_event("ckpt_commit", step=step)
                probe.step(step)
                wait_idle(probe)  # the probe runs between steps, as a blocking in-loop probe would
            wait_idle(probe)
            probe.step(16)
            probe.close()
            probe_log = read_events(log)
            self.assertTrue(any(e["event"] == "sdc_detected" for e in probe_log))
            with open(log, "a") as f:
                last = probe_log[-1]["t"]
                f.write(json.dumps({"t": last + 1000, "event": "teardown_end"}) + "\n")
                f.write(json.dumps({"t": last + 2000, "event": "job_end"}) + "\n")
            out = subprocess.run([sdcprobe, "goodput", log, "--json"], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            report = json.loads(out.stdout)
            self.assertGreater(report["categories"]["rework"]["sdc_ns"], 0)
            self.assertGreater(report["sdc_lost_ns"], 0)


if __name__ == "__main__":
    unittest.main()
