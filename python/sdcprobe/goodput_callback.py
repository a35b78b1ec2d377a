"""GoodputCallback: Lightning's hook names driving the goodput recorder, the inline probe and an
optional replica check together.

    from lightning.pytorch import Trainer
    from sdcprobe import GoodputCallback
    trainer = Trainer(callbacks=[GoodputCallback("events.rank{rank}.jsonl", probe={"every": "auto"})])

Then `sdcprobe goodput 'events.rank*.jsonl'` merges the recorder's and the probe's files of every rank.
"""

import os
import re

from sdcprobe.callback import step_probe
from sdcprobe.goodput_log import GoodputLog
from sdcprobe.inline import InlineProbe


def _inline_log_path(path, rank):
    """events.rank0.jsonl -> events.rank0.inline.jsonl: the probe stamps its own lines, so it gets
    its own file, and the rank stays in the name because its lines carry none."""
    root, ext = os.path.splitext(path)
    if not re.search(r"rank[0-9]", os.path.basename(root)):
        root += ".rank%d" % rank
    return root + ".inline" + (ext or ".jsonl")


class GoodputCallback:
    """A Lightning callback (duck-typed: it does not import Lightning).

    log: a GoodputLog, or its path ("{rank}" is replaced by the rank).
    probe: None, an InlineProbe, or a dict of InlineProbe options (its event log defaults to the
        recorder's file name with ".inline" before the extension).
    replica_check: None or an object with step(step, parameters) (sdcprobe.ReplicaCheck); called
        after each optimizer step with pl_module.parameters(). Give it this log as its event_log
        (ReplicaCheck(event_log=log)) so its events share this file and clock.
    on_sdc: what a failing inline-probe verdict does, as SDCCallback: "raise", "stop" or a
        callable(verdict).

    Step numbers are optimizer steps: step N runs from the first batch that starts with
    trainer.global_step == N to the batch end at which global_step has moved on, so gradient
    accumulation makes one step of several batches. A save (on_save_checkpoint, called before
    Lightning writes the file) is counted until the next hook and committed then: Lightning saves
    synchronously. It is labelled with the last finished step, global_step - 1.
    """

    def __init__(self, log="events.rank{rank}.jsonl", probe=None, replica_check=None, on_sdc="raise"):
        if on_sdc not in ("raise", "stop") and not callable(on_sdc):
            raise ValueError("on_sdc must be 'raise', 'stop' or a callable")
        if replica_check is not None and not callable(getattr(replica_check, "step", None)):
            raise TypeError("replica_check must have a step(step, parameters) method")
        self.log = log if isinstance(log, GoodputLog) else GoodputLog(log)
        if isinstance(probe, dict):
            options = dict(probe)
            options.setdefault("event_log", _inline_log_path(self.log.path, self.log.rank))
            probe = InlineProbe(**options)
        elif probe is not None and not isinstance(probe, InlineProbe):
            raise TypeError("probe must be None, an InlineProbe or a dict of its options")
        self.probe = probe
        self.replica_check = replica_check
        self.on_sdc = on_sdc
        self._step = None  # (step number, its context) while a step runs
        self._save = None  # (step number, its context) from on_save_checkpoint to the next hook
        self._eval = None
        self._reported = False

    # -- helpers --------------------------------------------------------------------------------

    def _finish_save(self):
        if self._save is None:
            return
        step, span = self._save
        self._save = None
        span.__exit__(None, None, None)
        self.log.commit(step)


    # -- Lightning hooks -----------------------------------------------------------------------

    def on_fit_start(self, trainer, pl_module=None):
        """process_start: this process's attempt ($SLURM_RESTART_COUNT, else 0)."""
        self.log.attempt()

    def on_train_batch_start(self, trainer, pl_module=None, batch=None, batch_idx=None):
        self._finish_save()
        if self._step is None:
            step = int(trainer.global_step)
            span = self.log.step(step)
            span.__enter__()
            self._step = (step, span)

    def on_train_batch_end(self, trainer, pl_module=None, outputs=None, batch=None, batch_idx=None):
        if self._step is None or int(trainer.global_step) == self._step[0]:
            return  # accumulating gradients: the optimizer step has not run yet
        step, span = self._step
        self._step = None
        span.__exit__(None, None, None)
        if self.replica_check is not None:
            self.replica_check.step(step, pl_module.parameters())
        if self.probe is not None:
            self._reported = step_probe(self.probe, step, trainer, self.on_sdc, self._reported)

    def on_save_checkpoint(self, trainer, pl_module=None, checkpoint=None):
        self._finish_save()
        step = int(trainer.global_step) - 1
        if step < 0:
            return  # nothing trained yet: not a restore target
        span = self.log.checkpoint(step)
        span.__enter__()
        self._save = (step, span)

    def on_validation_start(self, trainer, pl_module=None):
        self._finish_save()
        self._eval = self.log.eval()
        self._eval.__enter__()

    def on_validation_end(self, trainer, pl_module=None):
        if self._eval is not None:
            span, self._eval = self._eval, None
            span.__exit__(None, None, None)

    def on_train_end(self, trainer, pl_module=None):
        """Training finished: the last save is committed, the probe is closed (its last verdict is
        logged), then job_end is written and the log closed."""
        self._finish_save()
        if self.probe is not None:
            self.probe.close()
        self.log.job_end()
        self.log.close()

    def on_exception(self, trainer, pl_module=None, exception=None):
        """A fault named after the exception (fsynced); the step in flight stays open, as the ledger
        expects of a crash. The probe and the log are closed."""
        self._step = self._save = self._eval = None
        self.log.fault(type(exception).__name__ if exception is not None else "exception")
        self._close()

    def _close(self):
        if self.probe is not None:
            self.probe.close()
        self.log.close()
