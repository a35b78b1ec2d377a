"""CanaryCallback under Lightning's real Trainer (pytorch-lightning 1.9 and 2.0 over Debian's torch
1.13, in the venvs that tests/python/lightning_venv.sh makes, and 2.6 over torch 2.15, in the one
tests/python/torch_venv.sh makes): strategy="ddp" on 3 CPU processes, GoodputCallback
logging the saves of ModelCheckpoint(every_n_train_steps=5), and a compute fault on rank 1 from the
optimizer step after global step 12, between the saves of steps 10 and 15.

- The clean run passes every check and commits the saves of steps 5 to 20.
- The faulty run, with the canary's cadence far apart, is caught by the check before the save of
  step 15: that file is never written, nothing after step 10 is committed, the commits are
  byte-identical to the clean run's, and with on_sdc="stop" the job exits with SDC_EXIT_STATUS and
  its event log says why.
- The restart from the newest commit checks the restored state before its first optimizer step,
  then on multiples of 5, and ends bit-identical to the clean run.
- The faulty run with weights-only saves (which Lightning makes without calling the callbacks'
  on_save_checkpoint) is caught and refused the same way.

    python lightning_canary_test.py                      the tests (ctest sets SDCPROBE_LIBRARY)
    python lightning_canary_test.py --fit MODE DIR [CKPT]  one training run in DIR (the tests start it
                                                         in a process of its own, as Lightning's DDP
                                                         launcher re-runs it)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

STEPS = 20
SAVE_EVERY = 5
FAULT_FROM = 12  # global_step during the first faulty optimizer step (the one that makes step 13)
FAULTY_RANK = 1
WORLD = 3


def fit(mode, out, ckpt=None):
    import lightning_harness  # noqa: F401  (first: Debian's torch under Lightning, see there)
    import pytorch_lightning as pl
    import torch

    from sdcprobe import CanaryCallback, GoodputCallback

    class Model(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)  # the same initial weights on every replica
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
            if mode.startswith("fault") and int(os.environ.get("LOCAL_RANK", "0")) == FAULTY_RANK:
                self.net[0].register_forward_hook(self.faulty_product)

        def faulty_product(self, module, inputs, output):
            """From FAULT_FROM on, one significand bit of one product flips, in every forward (the
            training's and the canary's), as a faulty multiplier would."""
            if self.trainer.global_step < FAULT_FROM:
                return None
            out = output.clone()
            out.view(-1).view(torch.int32)[5] ^= 1 << 20
            return out

        def training_step(self, batch, batch_idx):
            # Each rank's batch is a function of the step alone, so a restart sees the same data.
            g = torch.Generator().manual_seed(1000 * self.global_rank + self.trainer.global_step)
            x = torch.randn(8, 16, generator=g)
            return torch.nn.functional.mse_loss(self.net(x), x)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    def canary_loss(module, batch):
        x, = batch
        return torch.nn.functional.mse_loss(module.net(x), x)

    class KeepState(pl.Callback):
        """Rank 0 keeps the model's state of step 15 (called before the canary and the save)."""

        def on_train_batch_end(self, trainer, pl_module, *args):
            if trainer.global_step == 15 and trainer.global_rank == 0:
                torch.save(pl_module.state_dict(), os.path.join(out, "state-15.pt"))

    torch.set_num_threads(1)
    canary_batch = (torch.randn(8, 16, generator=torch.Generator().manual_seed(7)),)
    # The faulty run's cadence never comes due after the first check: only the check before each
    # save can keep a tainted one from being committed.
    every = 1000 if mode.startswith("fault") else SAVE_EVERY
    callbacks = [KeepState(), GoodputCallback(os.path.join(out, "events.rank{rank}.jsonl")),
                 CanaryCallback(canary_loss, batch=canary_batch, every=every, on_sdc="stop",
                                event_log=os.path.join(out, "canary.rank{rank}.jsonl")),
                 pl.callbacks.ModelCheckpoint(dirpath=os.path.join(out, "ckpt"), filename="{step}",
                                              every_n_train_steps=SAVE_EVERY, save_top_k=-1,
                                              save_weights_only=mode == "fault_weights")]
    # DDP lays a bucket out in the parameters' order at its first iteration and, from torch 2 on,
    # rebuilds it after that iteration in the order the gradients came; gloo's ring sums each third
    # of a bucket in another rank order, so the first step after a restart would round some sums
    # differently from the uninterrupted run's (an ulp, with or without sdcprobe). Without the
    # rebuild (find_unused_parameters) every iteration of every run uses one layout.
    ddp = pl.strategies.DDPStrategy(find_unused_parameters=True)
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=WORLD, strategy=ddp, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         default_root_dir=out, callbacks=callbacks)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(WORLD * 4 * STEPS, 1)))
    trainer.fit(Model(), data, ckpt_path=ckpt)


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def training_state(path):
    """The model's and the optimizer's tensors of a Lightning checkpoint, as bytes."""
    import torch

    ckpt = torch.load(path)
    tensors = list(ckpt["state_dict"].items())
    for i, state in sorted(ckpt["optimizer_states"][0]["state"].items()):
        tensors += [("optimizer %d %s" % (i, k), v) for k, v in sorted(state.items())]
    return [(name, t.numpy().tobytes()) for name, t in tensors]


class CanaryLightningTest(unittest.TestCase):
    """The runs share one working directory, moved aside after each, since a checkpoint holds its
    directory's absolute path (ModelCheckpoint's state): files of the same state are then the same
    bytes."""

    @classmethod
    def setUpClass(cls):
        if not os.environ.get("SDCPROBE_LIBRARY"):
            raise unittest.SkipTest("SDCPROBE_LIBRARY not set (ctest sets it)")
        import lightning_harness  # noqa: F401  (sdcprobe imports Lightning here too)
        cls.base = tempfile.mkdtemp(prefix="lightning-canary-")
        cls.work = os.path.join(cls.base, "work")
        cls.runs = {}
        for mode in ("clean", "fault", "resume", "fault_weights"):
            ckpt = None
            if mode == "resume":
                commits = [e["step"] for e in read_events(os.path.join(cls.base, "fault", "events.rank0.jsonl"))
                           if e["event"] == "ckpt_commit"]
                ckpt = os.path.join(cls.work, "ckpt", "step=%d.ckpt" % max(commits))
                shutil.copytree(os.path.join(cls.base, "fault", "ckpt"), os.path.join(cls.work, "ckpt"))
            os.makedirs(cls.work, exist_ok=True)
            args = [sys.executable, os.path.abspath(__file__), "--fit", mode, cls.work] + ([ckpt] if ckpt else [])
            run = subprocess.run(args, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                                 timeout=600)
            cls.runs[mode] = run
            os.rename(cls.work, os.path.join(cls.base, mode))

    def events(self, mode, name, rank=0):
        return read_events(os.path.join(self.base, mode, "%s.rank%d.jsonl" % (name, rank)))

    def commits(self, mode):
        return [e["step"] for e in self.events(mode, "events") if e["event"] == "ckpt_commit"]

    def checked(self, mode, rank=0):
        return [e["step"] for e in self.events(mode, "canary", rank) if e["event"] == "probe_begin"]

    def ckpt(self, mode, step):
        return os.path.join(self.base, mode, "ckpt", "step=%d.ckpt" % step)

    def assert_exit(self, mode, status):
        run = self.runs[mode]
        self.assertEqual(run.returncode, status, run.stdout[-3000:] + run.stderr[-3000:])

    def test_clean_run_checks_every_save_and_commits_them(self):
        self.assert_exit("clean", 0)
        self.assertEqual(self.commits("clean"), [5, 10, 15, 20])
        for rank in range(WORLD):
            # Numbered as global_step: the check of step 5 is of the state the save of step 5 holds.
            self.assertEqual(self.checked("clean", rank), [0, 5, 10, 15, 20])
            self.assertFalse([e for e in self.events("clean", "canary", rank) if e["event"] == "sdc_detected"])
            self.assertEqual({e["verdict"] for e in self.events("clean", "canary", rank) if e["event"] == "probe_end"},
                             {"pass"})
        self.assertEqual(self.events("clean", "events")[-1]["event"], "job_end")

    def test_fault_between_saves_taints_no_commit_and_stops_the_job(self):
        from sdcprobe import SDC_EXIT_STATUS

        self.assert_exit("fault", SDC_EXIT_STATUS)
        self.assertIn("stopping for SDC", self.runs["fault"].stderr)
        # The checks before the saves of 5 and 10 passed; the one before the save of 15 failed.
        self.assertEqual(self.checked("fault"), [0, 5, 10, 15])
        self.assertEqual(self.commits("fault"), [5, 10])
        self.assertFalse(os.path.exists(self.ckpt("fault", 15)))
        self.assertEqual(sorted(os.listdir(os.path.join(self.base, "fault", "ckpt"))), ["step=10.ckpt", "step=5.ckpt"])
        for step in self.commits("fault"):
            with open(self.ckpt("fault", step), "rb") as a, open(self.ckpt("clean", step), "rb") as b:
                self.assertEqual(a.read(), b.read(), "the commit of step %d differs from the clean run's" % step)
        # The event log says why: the canary names rank 1 at step 15, and the job ends in a fault
        # named SDCStop, not job_end.
        for rank in range(WORLD):
            sdc = [e for e in self.events("fault", "canary", rank) if e["event"] == "sdc_detected"]
            self.assertEqual(len(sdc), 1)
            self.assertEqual((sdc[0]["step"], sdc[0]["last_good_step"], sdc[0]["suspect_rank"], sdc[0]["cause"],
                              sdc[0]["attribution"]), (15, 10, FAULTY_RANK, "compute", "persistent"))
        events = self.events("fault", "events")
        self.assertEqual((events[-1]["event"], events[-1]["kind"]), ("fault_detected", "SDCStop"))
        self.assertNotIn("job_end", [e["event"] for e in events])

    def test_weights_only_saves_are_checked_and_refused_too(self):
        from sdcprobe import SDC_EXIT_STATUS

        self.assert_exit("fault_weights", SDC_EXIT_STATUS)
        self.assertEqual(self.checked("fault_weights"), [0, 5, 10, 15])
        self.assertEqual(self.commits("fault_weights"), [5, 10])
        self.assertEqual(sorted(os.listdir(os.path.join(self.base, "fault_weights", "ckpt"))),
                         ["step=10.ckpt", "step=5.ckpt"])
        sdc = [e for e in self.events("fault_weights", "canary") if e["event"] == "sdc_detected"]
        self.assertEqual([(e["step"], e["suspect_rank"]) for e in sdc], [(15, FAULTY_RANK)])

    def test_restart_from_the_newest_commit_is_bit_identical(self):
        self.assert_exit("resume", 0)
        for rank in range(WORLD):
            # The restored state is checked at once (step 10, before the first optimizer step), then
            # the multiples of 5; the saves of 15 and 20 are made of checked states.
            self.assertEqual(self.checked("resume", rank), [10, 15, 20])
            self.assertFalse([e for e in self.events("resume", "canary", rank) if e["event"] == "sdc_detected"])
        events = self.events("resume", "events")
        first_step = next(e["step"] for e in events if e["event"] == "step_end")
        self.assertEqual(first_step, 11)
        canary = self.events("resume", "canary")
        first_check = next(e for e in canary if e["event"] == "probe_begin")
        first_step_t = next(e["t"] for e in events if e["event"] == "step_end")
        self.assertLess(first_check["t"], first_step_t)
        self.assertEqual(self.commits("resume"), [15, 20])
        for step in (15, 20):
            self.assertEqual(training_state(self.ckpt("resume", step)), training_state(self.ckpt("clean", step)))

    def test_fault_changed_the_state_the_refused_save_would_have_held(self):
        # The all-reduce spread rank 1's wrong gradients to every replica: the faulty run's state at
        # step 15 is not the clean run's, so a save of it would have been a tainted checkpoint.
        import torch

        tainted = torch.load(os.path.join(self.base, "fault", "state-15.pt"))
        clean = torch.load(self.ckpt("clean", 15))["state_dict"]
        self.assertEqual(sorted(tainted), sorted(clean))
        self.assertNotEqual([tainted[k].numpy().tobytes() for k in sorted(clean)],
                            [clean[k].numpy().tobytes() for k in sorted(clean)])


if __name__ == "__main__":
    if len(sys.argv) in (4, 5) and sys.argv[1] == "--fit":
        fit(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) == 5 else None)
    else:
        unittest.main()
