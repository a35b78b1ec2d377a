"""GoodputCallback: a Lightning callback driving the goodput recorder, the inline probe and an
optional replica check together.

    from lightning.pytorch import Trainer       # or pytorch_lightning
    from sdcprobe import GoodputCallback
    trainer = Trainer(callbacks=[GoodputCallback("events.rank{rank}.jsonl", probe={"every": "auto"},
                                                 replica_check={"every": 50})])

Then `sdcprobe goodput 'events.rank*.jsonl'` merges the recorder's and the probe's files of every rank.
"""

import os
import re

from sdcprobe.callback import (JobAgreement, _lightning_callback, before_every_save, before_save, final_probe,
                               step_probe, stop_message)
from sdcprobe.flight_recorder import dumps_for
from sdcprobe.goodput_log import GoodputLog, attempt_folder
from sdcprobe.inline import InlineProbe, SDCStop


def _inline_log_path(path, rank):
    """events.rank0.jsonl -> events.rank0.inline.jsonl: the probe stamps its own lines, so it gets
    its own file, and the rank stays in the name because its lines carry none."""
    root, ext = os.path.splitext(path)
    if not re.search(r"rank[0-9]", os.path.basename(root)):
        root += ".rank%d" % rank
    return root + ".inline" + (ext or ".jsonl")


class GoodputCallback(_lightning_callback()):
    """A Lightning callback.

    log: a GoodputLog, or its path ("{rank}" becomes the rank). A path is opened in setup(), with the
        rank from trainer.global_rank, so under DDP every rank writes its own file.
    probe: None, or a dict of InlineProbe options. The probe is made in setup(), once Lightning has
        set this rank's CUDA device and made the process group, so it tests this rank's device
        with ranks = the world size (a probe made before would test device 0 on every rank); its
        event log defaults to the recorder's file name with ".inline" before the extension.
    replica_check: None, an object with step(step, parameters) and before_commit(step, parameters)
        (sdcprobe.ReplicaCheck), or a dict of ReplicaCheck options, made in setup() once the process
        group exists, with this recorder as its event log.
    check_before_commit: with a replica check, check the parameters before each save is committed
        (before_save); a mismatch raises there, so the save is never written or committed.
    on_sdc: what a failing inline-probe verdict does: "raise" raises SDCDetected, "stop" ends fit
        and the process with SDCStop (exit status SDC_EXIT_STATUS, 75), or a callable(verdict). In a
        job of several ranks every rank acts on one rank's failure at the same step (the ranks agree
        their verdicts every few steps: sdcprobe.callback.JobAgreement), and every rank raises an
        error of one rank's probe at the same step. A replica check made with on_sdc="stop" ends
        them the same way.

    Step N is the optimizer step after which trainer.global_step is N (Lightning's
    every_n_train_steps counts the same way, so checks on multiples of N fall on the saved steps). It
    runs from the first batch that starts with global_step == N - 1 to the batch end at which
    global_step has moved on; gradient accumulation makes one step of several batches. A save
    (before_save, called on every rank before Lightning writes the file, weights-only saves too:
    sdcprobe.callback.before_every_save) is labelled with global_step and counted until the next
    hook, then committed: Lightning saves synchronously. Validation and the sanity check are evals;
    an exception is a fault. After fit, the hooks do nothing.

    The recorder is `self.recorder` (Lightning assigns `callback.log`, so that name is not used).
    """

    def __init__(self, log="events.rank{rank}.jsonl", probe=None, replica_check=None, on_sdc="raise",
                 check_before_commit=True):
        if on_sdc not in ("raise", "stop") and not callable(on_sdc):
            raise ValueError("on_sdc must be 'raise', 'stop' or a callable")
        if not isinstance(log, (GoodputLog, str, os.PathLike)):
            raise TypeError("log must be a GoodputLog or a path, got %r" % (log,))
        if isinstance(probe, InlineProbe):
            raise TypeError("probe must be a dict of InlineProbe options, not an InlineProbe: the probe is made in "
                            "setup(), on the rank's own device")
        if probe is not None and not isinstance(probe, dict):
            raise TypeError("probe must be None or a dict of InlineProbe options")
        if replica_check is not None and not isinstance(replica_check, dict) and \
                not callable(getattr(replica_check, "step", None)):
            raise TypeError("replica_check must be a dict of ReplicaCheck options or have a step(step, parameters)"
                            " method")
        # The flight recorder's settings now, before the Trainer makes the process group that reads
        # them (NCCL's dump on a timeout); the log's attempt() in setup() takes the same dumps.
        if isinstance(log, GoodputLog):
            path, folder = log.path, log._fr_folder
        else:
            path, folder = os.fspath(log), "flight_recorder"
        if folder is not None and "{rank}" not in os.path.dirname(path):
            name = attempt_folder()
            dumps_for(os.path.join(os.path.dirname(path), os.fspath(folder), name), name)
        self._log_spec = log
        self._probe_spec = probe
        self._replica_spec = replica_check
        self.recorder = None
        self.probe = None
        self.replica_check = None
        self.on_sdc = on_sdc
        self.check_before_commit = check_before_commit
        self._finished = False  # fit is over: later hooks (validate, save_checkpoint) do nothing
        self._step = None  # (step number, its context) while a step runs
        self._save = None  # (step number, its context) from before_save to the next hook
        self._eval = None
        self._job = JobAgreement()  # the ranks' agreement on the probe's verdicts

    # -- opening and closing --------------------------------------------------------------------

    def _open(self, trainer):
        rank = int(getattr(trainer, "global_rank", 0))
        spec = self._log_spec
        self.recorder = spec if isinstance(spec, GoodputLog) else GoodputLog(spec, rank=rank)
        if self._probe_spec is not None:
            options = dict(self._probe_spec)
            options.setdefault("event_log", _inline_log_path(self.recorder.path, self.recorder.rank))
            # An error is raised at the first agreement, on every rank.
            self.probe = self._job.attempt(InlineProbe, **options)
        if isinstance(self._replica_spec, dict):
            from sdcprobe.replica import ReplicaCheck

            self.replica_check = ReplicaCheck(event_log=self.recorder, **self._replica_spec)
        else:
            self.replica_check = self._replica_spec
        # process_start: when this process started, from the OS; the strategy's device is set by now.
        self.recorder.attempt(device=getattr(getattr(trainer, "strategy", None), "root_device", None))

    def _live(self):
        return self.recorder is not None and not self._finished

    def _close(self, exception=None):
        self._finished = True
        self._step = self._save = self._eval = None
        if self.recorder is not None and self.recorder.flight_recorder is not None:
            self.recorder.flight_recorder.end(exception)
        if self.probe is not None:
            self.probe.close()
        if isinstance(self._replica_spec, dict) and self.replica_check is not None:
            self.replica_check.close()
        if self.recorder is not None:
            self.recorder.close()

    def _finish_save(self):
        if self._save is None:
            return
        step, span = self._save
        self._save = None
        span.__exit__(None, None, None)
        self.recorder.commit(step)

    # -- Lightning hooks -----------------------------------------------------------------------

    def setup(self, trainer, pl_module=None, stage=None):
        """Opens the log of this rank (trainer.global_rank) and writes process_start, once; checks
        every save of `trainer` (before_save)."""
        if self.recorder is None and not self._finished:
            self._open(trainer)
        if hasattr(trainer, "strategy"):
            before_every_save(trainer, self.before_save)

    def on_fit_start(self, trainer, pl_module=None):
        self.setup(trainer, pl_module, "fit")  # for callers that skip setup()

    def on_load_checkpoint(self, trainer, pl_module=None, checkpoint=None):
        """Resuming from a checkpoint: the restore, with the step it resumes after."""
        if not self._live() or not checkpoint or "global_step" not in checkpoint:
            return
        with self.recorder.restore(int(checkpoint["global_step"])):
            pass

    def on_sanity_check_start(self, trainer, pl_module=None):
        self.on_validation_start(trainer, pl_module)

    def on_sanity_check_end(self, trainer, pl_module=None):
        self.on_validation_end(trainer, pl_module)

    def on_train_epoch_start(self, trainer, pl_module=None):
        if self._live():
            self._finish_save()

    def on_train_batch_start(self, trainer, pl_module=None, batch=None, batch_idx=None, *args):
        if not self._live():
            return
        self._finish_save()
        if self._step is None:
            step = int(trainer.global_step) + 1
            span = self.recorder.step(step)
            span.__enter__()
            self._step = (step, span)

    def on_train_batch_end(self, trainer, pl_module=None, outputs=None, batch=None, batch_idx=None, *args):
        if not self._live() or self._step is None or int(trainer.global_step) < self._step[0]:
            return  # accumulating gradients: the optimizer step has not run yet
        step, span = self._step
        self._step = None
        span.__exit__(None, None, None)
        if self.replica_check is not None:
            self.replica_check.step(step, pl_module.parameters())
            self._stop_if_asked()
        if self._probe_spec is not None:
            step_probe(self.probe, step, self._probe_on_sdc(), self._job, log=True)

    def _stop_if_asked(self):
        """A replica check made with on_sdc="stop" asks to stop: under Lightning that ends the
        process with SDC_EXIT_STATUS, so the launcher sees a failed job and can requeue it."""
        if getattr(self.replica_check, "should_stop", False):
            v = getattr(self.replica_check, "verdict", {})
            raise SDCStop("the replica check found SDC at step %s (last good step %s, %s), suspects: %s"
                          % (v.get("step"), v.get("last_good_step"), v.get("attribution", "not re-run"),
                             ", ".join("rank %d" % s["rank"] for s in v.get("suspects", []))))

    def _probe_on_sdc(self):
        return self._stop_for_probe if self.on_sdc == "stop" else self.on_sdc

    @staticmethod
    def _stop_for_probe(failure):
        raise SDCStop(stop_message(failure))

    def before_save(self, trainer, pl_module=None):
        """Called on every rank before Lightning writes a file (before_every_save, from setup()):
        the replica check of the state about to be saved (check before commit) and the ranks'
        agreement on the inline probe's verdicts (either raises on a failure, so the file is not
        written), then the blocking save, committed at the next hook. pl_module defaults to
        trainer.lightning_module."""
        if not self._live():
            return
        pl_module = pl_module if pl_module is not None else trainer.lightning_module
        self._finish_save()
        step = int(trainer.global_step)
        if step < 1:
            return  # nothing trained yet: not a restore target
        before_commit = getattr(self.replica_check, "before_commit", None)
        if self.check_before_commit and before_commit is not None:
            before_commit(step, pl_module.parameters())
            self._stop_if_asked()
        if self._probe_spec is not None:
            before_save(self.probe, step, self._probe_on_sdc(), self._job, log=True)
        span = self.recorder.checkpoint(step)
        span.__enter__()
        self._save = (step, span)

    def on_validation_start(self, trainer, pl_module=None):
        if not self._live() or self._eval is not None:
            return  # the sanity check's validation is already its eval
        self._finish_save()
        self._eval = self.recorder.eval()
        self._eval.__enter__()

    def on_validation_end(self, trainer, pl_module=None):
        if self._eval is not None:
            span, self._eval = self._eval, None
            span.__exit__(None, None, None)

    def on_train_end(self, trainer, pl_module=None):
        """Training finished: the last save is committed, the probe is closed (its last verdict is
        logged), then job_end is written and the log closed."""
        if not self._live():
            return
        self._finish_save()
        if self._probe_spec is not None:
            final_probe(self.probe, self._probe_on_sdc(), self._job, log=True)
        self.recorder.job_end()
        self._close()

    def on_exception(self, trainer, pl_module=None, exception=None):
        """A fault named after the exception (fsynced); the step in flight stays open, as the ledger
        expects of a crash. Every rank is asked for its flight-recorder dump, as GoodputLog asks
        when an attempt fails (a collective's timeout here names the rank that hung the job), and
        the probe and the log are closed."""
        if not self._live():
            return
        self._step = self._save = self._eval = None
        self.recorder.fault(type(exception).__name__ if exception is not None else "exception")
        self._close(exception)
