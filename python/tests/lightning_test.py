"""GoodputCallback and SDCCallback under Lightning's real Trainer: pytorch-lightning 1.9 over Debian's
torch, in the venv that tests/python/lightning_venv.sh makes (and 2.6 over torch 2.15). One process
(also one that raises in a step), and strategy="ddp" on 2 CPU processes with a replica check bound to
weights-only checkpoints; each run's breakdown is checked against a count from its raw events, and
the ranks' files must merge. Jobs of 3 ranks whose inline probe fails on one rank stop together, and
no save (weights-only or full) is written after the failure, also when the failure shows only in the
final verdict; a job of 2 ranks on a torch.cuda stand-in makes each rank's probe on the rank's device.
Under torch 2.x, a job of 2 ranks whose rank 0 stops in a step leaves both ranks' flight-recorder
dumps, asked for by GoodputCallback's or SDCCallback's on_exception on the rank that timed out, and
`sdcprobe hang` names rank 0; under torch 1.13 each rank says once that the recorder is missing.

    python lightning_test.py                     the tests (ctest sets SDCPROBE_BINARY, SDCPROBE_LIBRARY)
    python lightning_test.py --fit MODE DIR      one training run (the tests start it in a process of
                                                 its own, as Lightning's DDP launcher re-runs it)
    python lightning_test.py --example ARGS...   python/examples/train_lightning.py ARGS under the
                                                 harness's workarounds
"""

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

STEPS = 40
SAVE_EVERY = 10
CRASH_AFTER = 14  # the "crash" run raises in the step after this one
JOB_RANKS = 3  # the job_sdc runs: rank SDC_RANK's probe fails from its SDC_AFTER-th probe on
SDC_RANK = 1
SDC_AFTER = 3
# The job_sdc runs' saves: job_sdc_stop's weights-only, every 5 steps (between the agreement steps),
# job_sdc_raise's full, every 10.
JOB_SAVES = {"job_sdc_stop": (5, True), "job_sdc_raise": (10, False)}
# The hang runs (torch 2.x): rank HANG_RANK of 2 stops in the step after HANG_AFTER, the other
# times out in the step's gradient all-reduce after HANG_TIMEOUT_S.
HANG_RANK = 0
HANG_AFTER = 5
HANG_TIMEOUT_S = 3


def cuda_stand_in(torch):
    """torch.cuda as on a node of two GPUs: the current device is 0 until the process group exists,
    then the rank's own. Lightning sets it (in setup_device) just after making the group, on CUDA;
    on the CPU nothing does. The CPU backend names device d's stream d + 1."""
    rank = int(os.environ.get("LOCAL_RANK", "0"))

    class Stream:
        def __init__(self, device):
            self.cuda_stream = device + 1

    def current_device():
        return rank if torch.distributed.is_initialized() else 0

    torch.cuda.is_available = lambda: True
    torch.cuda.current_device = current_device
    torch.cuda.current_stream = lambda device=None: Stream(current_device() if device is None else device)


def fit(mode, out):
    import datetime
    import threading

    import lightning_harness  # noqa: F401  (first: Debian's torch under Lightning, see there)
    import pytorch_lightning as pl
    import torch

    from sdcprobe import GoodputCallback, SDCCallback

    class Model(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)  # the same initial weights on every replica
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))

        def setup(self, stage):
            if mode.startswith("hang_"):
                # After the process group is made: its rendezvous waits for the other rank's start
                # with the same timeout.
                torch.distributed.distributed_c10d.set_timeout(datetime.timedelta(seconds=HANG_TIMEOUT_S))

        def training_step(self, batch, batch_idx):
            if mode == "crash" and self.trainer.global_step == CRASH_AFTER:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            if mode.startswith("hang_") and self.trainer.global_rank == HANG_RANK and \
                    self.trainer.global_step == HANG_AFTER:
                threading.Event().wait()  # a data-loader deadlock: never enters a collective again
            x, = batch
            return torch.nn.functional.mse_loss(self.net(x), x)

        def validation_step(self, batch, batch_idx):
            x, = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), x), sync_dist=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def loader(n, seed):
        data = torch.utils.data.TensorDataset(torch.randn(n, 16, generator=torch.Generator().manual_seed(seed)))
        return torch.utils.data.DataLoader(data, batch_size=8)

    torch.set_num_threads(1)
    if mode.startswith("hang_"):
        # Two ranks, rank HANG_RANK stuck: the other's fit fails, its callback (GoodputCallback or
        # SDCCallback, from the mode) asks every rank for its flight-recorder dump, and Lightning's
        # launcher then kills the stuck rank.
        rank = int(os.environ.get("LOCAL_RANK", "0"))
        if mode == "hang_goodput":
            callback = GoodputCallback(os.path.join(out, "events.rank{rank}.jsonl"))
        else:
            callback = SDCCallback(backend="cpu", every=SAVE_EVERY, probes="alu.int64",
                                   event_log=os.path.join(out, "inline.rank%d.jsonl" % rank))
        trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=2, strategy="ddp", logger=False,
                             enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                             default_root_dir=out, callbacks=[callback])
        trainer.fit(Model(), loader(8 * STEPS, 1 + rank))
        return
    if mode == "sdc":
        # SDCCallback alone, its probe failing from the first step: on_sdc="stop" ends the process.
        # The probe runs off the training thread: its first verdict comes some steps later.
        trainer = pl.Trainer(max_steps=100 * STEPS, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                             enable_model_summary=False, num_sanity_val_steps=0, default_root_dir=out,
                             callbacks=[SDCCallback(on_sdc="stop", backend="cpu", every=1, probes="alu.int64",
                                                    inject="model=bitflip,mode=permanent",
                                                    event_log=os.path.join(out, "inline.jsonl"))])
        trainer.fit(Model(), loader(800 * STEPS, 1))
        return
    if mode == "devices":
        # SDCCallback on 2 ranks of a stand-in node of two GPUs: rank 1's probe is made on device
        # 1, which the CPU backend lacks, so every rank raises that error at the first agreement.
        cuda_stand_in(torch)
        trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=2, strategy="ddp", logger=False,
                             enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                             default_root_dir=out, callbacks=[SDCCallback(every="auto", probes="alu.int64",
                                                                          flight_recorder=os.path.join(out, "fr"))])
        trainer.fit(Model(), loader(8 * STEPS, 1))
        return
    if mode == "job_sdc_end":
        # Three ranks probing the last step alone, rank SDC_RANK's probe failing: its verdict comes
        # only from the final agreement, after the last save.
        rank = int(os.environ.get("LOCAL_RANK", "0"))
        probe = {"backend": "cpu", "every": STEPS, "probes": "alu.int64"}
        if rank == SDC_RANK:
            probe["inject"] = "model=bitflip,mode=permanent"
        trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=JOB_RANKS, strategy="ddp", logger=False,
                             enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                             default_root_dir=out,
                             callbacks=[GoodputCallback(os.path.join(out, "events.rank{rank}.jsonl"), probe=probe)])
        trainer.fit(Model(), loader(8 * STEPS, 1 + rank))
        return
    if mode.startswith("job_sdc_"):
        # Three ranks, the inline probe failing on rank SDC_RANK alone from its SDC_AFTER-th probe:
        # every rank acts on the job's agreement (on_sdc "stop" or "raise", from the mode).
        rank = int(os.environ.get("LOCAL_RANK", "0"))
        probe = {"backend": "cpu", "every": 1, "probes": "alu.int64"}
        if rank == SDC_RANK:
            probe["inject"] = "model=bitflip,mode=permanent,after=%d" % SDC_AFTER
        callback = GoodputCallback(os.path.join(out, "events.rank{rank}.jsonl"), probe=probe,
                                   on_sdc=mode[len("job_sdc_"):])
        every, weights_only = JOB_SAVES[mode]
        saves = pl.callbacks.ModelCheckpoint(dirpath=os.path.join(out, "ckpt"), filename="{step}", save_top_k=-1,
                                             every_n_train_steps=every, save_weights_only=weights_only)
        trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=JOB_RANKS, strategy="ddp", logger=False,
                             enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                             default_root_dir=out, callbacks=[callback, saves])
        trainer.fit(Model(), loader(8 * STEPS, 1 + rank))
        return
    ddp = mode == "ddp"
    callback = GoodputCallback(os.path.join(out, "events.rank{rank}.jsonl"),
                               probe={"backend": "cpu", "every": SAVE_EVERY, "probes": "alu.int64"},
                               replica_check={"every": 25} if ddp else None)
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=2 if ddp else 1,
                         strategy="ddp" if ddp else "auto" if pl.__version__ >= "2" else None,
                         logger=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=1, val_check_interval=20, limit_val_batches=2,
                         default_root_dir=out,
                         callbacks=[callback, pl.callbacks.ModelCheckpoint(dirpath=os.path.join(out, "ckpt"),
                                                                           every_n_train_steps=SAVE_EVERY,
                                                                           save_top_k=-1, save_weights_only=ddp)])
    model = Model()
    if mode == "crash":
        try:
            trainer.fit(model, loader(8 * STEPS, 1), loader(16, 100))
        except RuntimeError:
            return
        raise AssertionError("fit did not raise")
    trainer.fit(model, loader(8 * STEPS, 1 + trainer.global_rank), loader(16, 100))
    # After fit the callback's hooks do nothing; these must not raise.
    trainer.validate(model, loader(16, 100), verbose=False)
    trainer.save_checkpoint(os.path.join(out, "after.ckpt"))


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def spans(events, name, **match):
    """[(begin t, end t)] of the `name` spans whose begin has the fields in `match`."""
    out, begin = [], None
    for e in events:
        if e["event"] == name + "_begin" and all(e.get(k) == v for k, v in match.items()):
            begin = e["t"]
        elif e["event"] == name + "_end" and begin is not None and all(e.get(k) == v for k, v in match.items()):
            out.append((begin, e["t"]))
            begin = None
    return out


class LightningTest(unittest.TestCase):
    def run_fit(self, mode, status=0, timeout=600):
        for name in ("SDCPROBE_BINARY", "SDCPROBE_LIBRARY"):
            if not os.environ.get(name):
                self.skipTest("%s not set (ctest sets it)" % name)
        out = tempfile.mkdtemp(prefix="lightning-%s-" % mode)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--fit", mode, out], env=env,
                             capture_output=True, text=True, timeout=timeout)
        self.assertEqual(run.returncode, status, run.stdout[-4000:] + run.stderr[-4000:])
        self.stderr = run.stderr
        return out

    def goodput(self, *paths):
        run = subprocess.run([os.environ["SDCPROBE_BINARY"], "goodput", "--json", *paths], capture_output=True,
                             text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        return json.loads(run.stdout)

    def check_rank(self, out, rank):
        """The events of one rank: what the callback promises, and the breakdown of its own files
        equal to a count from the raw events."""
        events = read_events(os.path.join(out, "events.rank%d.jsonl" % rank))
        inline = read_events(os.path.join(out, "events.rank%d.inline.jsonl" % rank))
        kinds = [e["event"] for e in events]
        self.assertEqual(kinds[0], "process_start")
        self.assertEqual(kinds[-1], "job_end")
        self.assertTrue(all(e["rank"] == rank for e in events))
        self.assertEqual([e["step"] for e in events if e["event"] == "step_end"], list(range(1, STEPS + 1)))
        self.assertEqual([e["step"] for e in events if e["event"] == "ckpt_commit"],
                         list(range(SAVE_EVERY, STEPS + 1, SAVE_EVERY)))
        # The sanity check and the validations at steps 20 and 40; nothing after fit.
        self.assertEqual(kinds.count("eval_end"), 3)
        # The inline probe on multiples of its interval, off the training thread (a due step while
        # the previous probe still runs is skipped, so not every multiple has one).
        background = [e["step"] for e in inline if e["event"] == "probe_begin" and not e["blocking"]]
        self.assertTrue(background)
        self.assertTrue(all(s % SAVE_EVERY == 0 for s in background), background)

        # Files of several ranks must include rank 0's, so another rank's recorder file is read alone.
        files = [os.path.join(out, "events.rank%d.jsonl" % rank)]
        if rank == 0:
            files.append(os.path.join(out, "events.rank0.inline.jsonl"))
        else:
            inline = []
        merged = sorted(events + inline, key=lambda e: e["t"])
        blocking = spans(merged, "ckpt") + spans(merged, "eval") + spans(merged, "probe", blocking=True)
        first_step = next(e["t"] for e in events if e["event"] == "step_begin")
        start, end = events[0]["t"], events[-1]["t"]
        warmup = first_step - start - sum(b - a for a, b in blocking if b <= first_step)
        report = self.goodput(*files)
        c = report["categories"]
        self.assertEqual(report["wall_ns"], report["productive_ns"] + sum(v["ns"] for v in c.values()))
        self.assertEqual(report["wall_ns"], end - start)
        self.assertEqual(c["blocking_overhead"]["ns"], sum(b - a for a, b in blocking))
        self.assertEqual(c["restart_warmup"]["ns"], warmup)
        self.assertEqual(report["productive_ns"], end - start - warmup - sum(b - a for a, b in blocking))
        self.assertEqual(c["rework"]["ns"] + c["detection_teardown"]["ns"] + c["queue"]["ns"], 0)
        if rank == 0:
            self.assertGreater(report["diagnostics"]["overlapped_probe_ns"], 0)
        return events, report

    def test_single_process(self):
        out = self.run_fit("single")
        self.check_rank(out, 0)
        self.assertEqual(sorted(os.path.basename(p) for p in glob.glob(os.path.join(out, "events*"))),
                         ["events.rank0.inline.jsonl", "events.rank0.jsonl"])

    def test_exception_is_a_fault_with_the_step_in_flight(self):
        out = self.run_fit("crash")
        events = read_events(os.path.join(out, "events.rank0.jsonl"))
        self.assertEqual([(e["event"], e.get("step")) for e in events[-3:]],
                         [("step_end", CRASH_AFTER), ("step_begin", CRASH_AFTER + 1), ("fault_detected", None)])
        self.assertEqual(events[-1]["kind"], "RuntimeError")
        self.assertEqual([e["step"] for e in events if e["event"] == "ckpt_commit"], [SAVE_EVERY])
        # The job ends at the fault: the steps after the commit of step 10 and the one in flight
        # are rework, and nothing after it is productive.
        report = self.goodput(os.path.join(out, "events.rank*.jsonl"))
        c = report["categories"]
        self.assertEqual(report["wall_ns"], report["productive_ns"] + sum(v["ns"] for v in c.values()))
        self.assertGreater(c["rework"]["ns"], 0)
        # Productive by hand: from the first step to the end of step 10's save, less the blocking
        # spans in between.
        inline = read_events(os.path.join(out, "events.rank0.inline.jsonl"))
        merged = sorted(events + inline, key=lambda e: e["t"])
        first = next(e["t"] for e in events if e["event"] == "step_begin")
        kept = next(e["t"] for e in events if e["event"] == "ckpt_end" and e["step"] == SAVE_EVERY)
        blocking = spans(merged, "ckpt") + spans(merged, "eval") + spans(merged, "probe", blocking=True)
        self.assertEqual(report["productive_ns"],
                         kept - first - sum(b - a for a, b in blocking if first <= a and b <= kept))

    def test_sdc_callback_stop_ends_the_process_with_the_sdc_status(self):
        import lightning_harness  # noqa: F401  (sdcprobe imports Lightning)
        from sdcprobe import SDC_EXIT_STATUS

        out = self.run_fit("sdc", SDC_EXIT_STATUS)
        self.assertIn("sdcprobe: stopping for SDC (exit status %d): the inline probe failed" % SDC_EXIT_STATUS,
                      self.stderr)
        # The log says why: the probe's sdc_detected, then the stop (the probe in flight when the
        # fit ended may log after it).
        events = read_events(os.path.join(out, "inline.jsonl"))
        kinds = [e["event"] for e in events]
        self.assertEqual([e["kind"] for e in events if e["event"] == "fault_detected"], ["SDCStop"])
        self.assertIn("sdc_detected", kinds[:kinds.index("fault_detected")])

    def assert_job_stopped(self, out, kind, save_every):
        """Every rank of a job_sdc run ended at the same step, the job's agreement step after rank
        SDC_RANK's probe failed, with the fault `kind`; rank SDC_RANK's probe log has its probe's
        sdc_detected, each other rank's one naming SDC_RANK (suspect_rank); every save before the
        stop (every `save_every` steps) is written and committed, none at or after it; `sdcprobe
        goodput` over the files counts one incident, attributed to SDC."""
        import lightning_harness  # noqa: F401  (sdcprobe imports Lightning)
        from sdcprobe.callback import JOB_AGREEMENT_EVERY

        # Its probe logs the first probe that fails.
        failing = [e for e in read_events(os.path.join(out, "events.rank%d.inline.jsonl" % SDC_RANK))
                   if e["event"] == "sdc_detected"]
        self.assertEqual(len(failing), 1, failing)
        self.assertNotIn("suspect_rank", failing[0])
        found = failing[0]["step"]
        ended = set()
        for rank in range(JOB_RANKS):
            events = read_events(os.path.join(out, "events.rank%d.jsonl" % rank))
            self.assertEqual([e["kind"] for e in events if e["event"] == "fault_detected"], [kind], "rank %d" % rank)
            self.assertNotIn("job_end", [e["event"] for e in events])
            ended.add(max(e["step"] for e in events if e["event"] == "step_end"))
            sdc = [e for e in read_events(os.path.join(out, "events.rank%d.inline.jsonl" % rank))
                   if e["event"] == "sdc_detected"]
            if rank != SDC_RANK:
                self.assertEqual(len(sdc), 1, "rank %d: %r" % (rank, sdc))
                self.assertEqual((sdc[0]["suspect_rank"], sdc[0]["device"], sdc[0]["last_good_step"]),
                                 (SDC_RANK, failing[0]["device"], failing[0]["last_good_step"]))
        self.assertEqual(len(ended), 1, ended)
        stop = ended.pop()
        # An agreement step (a save's, every 10th step, or the end: all multiples of save_every
        # here) after the failing probe's step; its verdict comes a step or more later, as the
        # machine's load has it (job_agreement_test checks that the next agreement acts).
        self.assertEqual(JOB_AGREEMENT_EVERY % save_every, 0)
        self.assertEqual(stop % save_every, 0)
        self.assertGreaterEqual(stop, found)
        saved = list(range(save_every, stop, save_every))
        ckpt = os.path.join(out, "ckpt")
        self.assertEqual(sorted(os.listdir(ckpt)) if os.path.isdir(ckpt) else [],
                         sorted("step=%d.ckpt" % step for step in saved))
        for rank in range(JOB_RANKS):
            commits = [e["step"] for e in read_events(os.path.join(out, "events.rank%d.jsonl" % rank))
                       if e["event"] == "ckpt_commit"]
            self.assertEqual(commits, saved, "rank %d" % rank)
        report = self.goodput(os.path.join(out, "events.rank*.jsonl"))
        self.assertEqual(report["measured"]["incidents"], 1)
        for category in ("detection_teardown", "rework"):
            self.assertEqual(report["categories"][category]["sdc_ns"], report["categories"][category]["ns"])
        self.assertGreater(report["categories"]["detection_teardown"]["ns"], 0)

    def test_inline_sdc_on_one_rank_stops_every_rank_at_one_step(self):
        import lightning_harness  # noqa: F401  (sdcprobe imports Lightning)
        from sdcprobe import SDC_EXIT_STATUS

        out = self.run_fit("job_sdc_stop", SDC_EXIT_STATUS)
        self.assertIn("the inline probe failed on rank %d" % SDC_RANK, self.stderr)
        self.assert_job_stopped(out, "SDCStop", JOB_SAVES["job_sdc_stop"][0])

    def test_inline_sdc_on_one_rank_raises_on_every_rank_at_one_step(self):
        out = self.run_fit("job_sdc_raise", 1)
        self.assertIn("SDCDetected: silent data corruption: the inline probe failed on rank %d" % SDC_RANK,
                      self.stderr)
        self.assert_job_stopped(out, "SDCDetected", JOB_SAVES["job_sdc_raise"][0])

    def test_a_failure_in_the_final_verdict_is_acted_on_by_every_rank(self):
        # The agreement at the end of training logs on the probes before they are closed.
        out = self.run_fit("job_sdc_end", 1)
        # Every rank raises SDCDetected (its fault_detected, below). Their tracebacks interleave on
        # the job's one stderr, even within a line, so the message is looked for there, not counted.
        self.assertIn("the inline probe failed on rank %d" % SDC_RANK, self.stderr)
        self.assertNotIn("SDCProbeError", self.stderr)
        own, = [e for e in read_events(os.path.join(out, "events.rank%d.inline.jsonl" % SDC_RANK))
                if e["event"] == "sdc_detected"]
        self.assertEqual(own["step"], STEPS)
        for rank in range(JOB_RANKS):
            events = read_events(os.path.join(out, "events.rank%d.jsonl" % rank))
            self.assertEqual((events[-1]["event"], events[-1]["kind"]), ("fault_detected", "SDCDetected"))
            self.assertEqual(max(e["step"] for e in events if e["event"] == "step_end"), STEPS)
            if rank != SDC_RANK:
                e, = [e for e in read_events(os.path.join(out, "events.rank%d.inline.jsonl" % rank))
                      if e["event"] == "sdc_detected"]
                self.assertEqual((e["suspect_rank"], e["device"]), (SDC_RANK, own["device"]))
                self.assertNotIn("last_good_step", e)  # no probe had passed

    def test_sdc_callback_probes_the_device_of_its_rank(self):
        # The device and the world size are taken when Lightning sets them up, not when the
        # callback is made: rank 0's probe is sized to 2 ranks, rank 1's is made on device 1. The
        # CPU backend has no device 1: every rank raises that error at the first agreement
        # (step 10), rather than rank 1 alone.
        out = self.run_fit("devices", 1)
        self.assert_recorder_said(2)
        import torch

        if hasattr(torch._C._distributed_c10d, "_dump_fr_trace"):
            # Every rank failed at the same collective: both dumps, and no hang in them.
            folder = os.path.join(out, "fr", "attempt0")
            self.assertEqual(sorted(os.listdir(folder)), ["nccl_trace_rank_0", "nccl_trace_rank_1"])
            run = subprocess.run([os.environ["SDCPROBE_BINARY"], "hang", folder], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("no hang", run.stdout)
        self.assertIn("on 2 ranks", self.stderr)
        self.assertNotIn("on 1 ranks", self.stderr)
        self.assertEqual(self.stderr.count("SDCProbeError: the inline probe of rank 1 failed: CPU device 1 does not "
                                           "exist"), 2, self.stderr[-4000:])

    def assert_recorder_said(self, ranks):
        """Under a torch without the flight recorder (Debian's 1.13) each of `ranks` warned once and
        went on; under torch 2.x none warned."""
        import torch

        said = self.stderr.count("has no flight recorder: a hang's rank will not be named")
        self.assertEqual(said, 0 if hasattr(torch._C._distributed_c10d, "_dump_fr_trace") else ranks,
                         self.stderr[-4000:])

    def run_hang(self, mode):
        """A hang run: rank HANG_RANK stops, rank 1 fails on the timeout, and Lightning's launcher
        kills the stuck rank 0 (the main process) once rank 1 has ended. Both ranks' dumps land in
        flight_recorder/attempt0, the stuck rank's from its side thread, and `sdcprobe hang` names
        rank HANG_RANK. Returns the run's folder and the dumps' folder."""
        import torch

        if not hasattr(torch._C._distributed_c10d, "_dump_fr_trace"):
            self.skipTest("torch %s has no flight recorder" % torch.__version__)
        out = self.run_fit(mode, -signal.SIGKILL, timeout=300)
        folder = os.path.join(out, "flight_recorder", "attempt0")
        self.assertEqual(sorted(os.listdir(folder)), ["nccl_trace_rank_0", "nccl_trace_rank_1"])
        run = subprocess.run([os.environ["SDCPROBE_BINARY"], "hang", folder, "--json",
                              os.path.join(out, "hang.json")], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(os.path.join(out, "hang.json")) as f:
            report = json.load(f)
        self.assertEqual((report["verdict"], [c["rank"] for c in report["culprits"]], report["undecided"]),
                         ("culprit", [HANG_RANK], []), report)
        self.assertIn("never enqueued collective", report["culprits"][0]["why"])
        return out, folder

    def test_a_hang_under_goodput_callback_names_the_stuck_rank(self):
        out, folder = self.run_hang("hang_goodput")
        # The rank that timed out logged the fault; the stuck one was killed in its step.
        faults = {r: [e["kind"] for e in read_events(os.path.join(out, "events.rank%d.jsonl" % r))
                      if e["event"] == "fault_detected"] for r in (0, 1)}
        self.assertEqual(faults, {HANG_RANK: [], 1 - HANG_RANK: ["RuntimeError"]})
        # The breakdown sums exactly, the hang's time under detection & teardown naming the culprit.
        report = self.goodput(os.path.join(out, "events.rank*.jsonl"))
        c = report["categories"]
        self.assertEqual(report["wall_ns"], report["productive_ns"] + sum(v["ns"] for v in c.values()))
        hang, = report["hangs"]
        self.assertEqual((hang["folder"], hang["verdict"], hang["timeout_ms"]),
                         (folder, "culprit", HANG_TIMEOUT_S * 1000))
        self.assertEqual([(h["rank"], h["device"]) for h in hang["culprits"]], [(HANG_RANK, "cpu")])
        self.assertEqual(hang["detection_teardown_ns"], c["detection_teardown"]["ns"])
        self.assertGreaterEqual(hang["waited_ns"], (HANG_TIMEOUT_S - 1) * 10**9)

    def test_a_hang_under_sdc_callback_names_the_stuck_rank(self):
        # The dumps land beside the probe's event logs.
        out, _ = self.run_hang("hang_sdc")
        self.assertTrue(os.path.exists(os.path.join(out, "inline.rank1.jsonl")))

    def test_ddp_on_two_processes(self):
        # Its saves are weights-only: each is checked before commit and counted all the same.
        out = self.run_fit("ddp")
        self.assert_recorder_said(2)
        rank0, alone = self.check_rank(out, 0)
        rank1, _ = self.check_rank(out, 1)
        # The replica check on multiples of 25 and before each commit, on both ranks alike.
        for events in (rank0, rank1):
            checked = [e["step"] for e in events if e["event"] == "probe_begin" and e.get("probe") == "replica"]
            self.assertEqual(checked, [10, 20, 25, 30, 40])
            self.assertFalse([e for e in events if e["event"] == "sdc_detected"])
        # The four files merge; rank 0's timeline decides, so the breakdown is rank 0's own.
        merged = self.goodput(os.path.join(out, "events.rank*.jsonl"))
        self.assertEqual(merged["wall_ns"], alone["wall_ns"])
        self.assertEqual(merged["productive_ns"], alone["productive_ns"])
        self.assertEqual(merged["categories"], alone["categories"])


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--fit":
        fit(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "--example":
        import runpy

        import lightning_harness  # noqa: F401

        example = os.path.join(HERE, "..", "examples", "train_lightning.py")
        sys.argv = [example] + sys.argv[2:]
        runpy.run_path(example, run_name="__main__")
    else:
        unittest.main()
