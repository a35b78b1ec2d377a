"""SDCCallback: an inline probe for PyTorch Lightning-style training loops."""

import importlib
import os
import sys

from sdcprobe.flight_recorder import dumps_for
from sdcprobe.goodput_log import attempt_folder
from sdcprobe.inline import InlineProbe, SDCDetected, SDCProbeError, SDCStop


def _lightning_callback():
    """Lightning's Callback class: of the Lightning already imported, else of lightning.pytorch, else
    of pytorch_lightning (a Trainer accepts only its own package's callbacks). Without Lightning,
    object: the module still imports, and the hooks can be called by hand."""
    names = ("lightning.pytorch", "pytorch_lightning")
    for name in sorted(names, key=lambda n: n not in sys.modules):
        try:
            return importlib.import_module(name).Callback
        except ImportError:
            continue
    return object


def _current_stream():
    try:
        import torch
    except ImportError:
        return None
    if torch.cuda.is_available():
        return torch.cuda.current_stream().cuda_stream
    return None


def before_every_save(trainer, hook):
    """Calls hook(trainer) on every rank before each file trainer.save_checkpoint writes, weights-only
    saves included: Lightning calls the callbacks' on_save_checkpoint only for full saves. The hook
    goes around the strategy's save_checkpoint, which every rank calls for every save (its checkpoint
    I/O runs on rank 0 alone, so it cannot hold a check that every rank takes part in). Hooks run in
    the order they were added; an exception keeps the file from being written. hook is a bound
    method: the same method of the same callback compares equal, so a second setup() adds none."""
    strategy = trainer.strategy
    hooks = getattr(strategy, "_sdcprobe_before_save", None)
    if hooks is None:
        hooks = strategy._sdcprobe_before_save = []
        save = strategy.save_checkpoint

        def save_checkpoint(*args, **kwargs):
            for h in list(hooks):
                h(trainer)
            return save(*args, **kwargs)

        strategy.save_checkpoint = save_checkpoint
    if hook not in hooks:
        hooks.append(hook)


# In a job of several ranks, the steps between two agreements on the inline probes' verdicts.
JOB_AGREEMENT_EVERY = 10


class JobAgreement:
    """The inline probes' verdicts of a job's ranks, agreed over torch.distributed's world, so that
    every rank acts on a failure at the same step: each probe tests its own rank's device, and a rank
    that stopped alone would leave the others to fail, or wait, in their next collective. The ranks
    agree on every JOB_AGREEMENT_EVERY-th global step (one 16-byte all-reduce), before each save and
    at the end of training; a failure waits for the next agreement. Off a job (no process group, or
    a world of one) there is nothing to agree: a failure is acted on at once.

    An error of a rank's probe (made on a device that does not exist, stepped on a stream of another
    device) is agreed the same way: held in `error` until the next agreement, where every rank
    raises it, so that no rank raises alone and leaves the others waiting in a collective."""

    def __init__(self, every=JOB_AGREEMENT_EVERY):
        self.every = every
        self.reported = False  # a failure has been acted on
        self.error = None  # this rank's probe's first error, raised at the next agreement
        self._exchange = None
        self._looked = False  # for the process group, at the first agreement (it may come after us)
        self._agreed_step = None

    def _world(self):
        """The world's Exchange, or None off a job."""
        if not self._looked:
            self._looked = True
            try:
                import torch.distributed as dist
            except ImportError:
                return None
            if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                from sdcprobe._exchange import Exchange
                self._exchange = Exchange(dist)
        return self._exchange

    def due(self, step):
        return self._world() is None or (step % self.every == 0 and step != self._agreed_step)

    def attempt(self, call, *args, **kwargs):
        """call(*args, **kwargs), an error of which is held in `error` for the next agreement."""
        if self.error is None:
            try:
                return call(*args, **kwargs)
            except Exception as e:  # raised on every rank at the next agreement
                self.error = e
        return None

    def failure(self, step, verdict):
        """The failing verdict the ranks agree on at `step` (the lowest failing rank's, with its
        "rank"), else None; when no probe failed but one erred, SDCProbeError on every rank. Every
        rank calls it at the same steps, step=None at the end of training. verdict is None where
        this rank has no probe (its error is held)."""
        failed = verdict is not None and verdict["verdict"] == "fail"
        if self._world() is None:
            if not failed and self.error is not None:
                raise self.error
            return dict(verdict, rank=0) if failed else None
        self._agreed_step = step
        any_failed, any_error = self._exchange.maximum([int(failed), int(self.error is not None)], world=True)
        if not any_failed and any_error:
            errors = self._exchange.gather_objects(None if self.error is None else str(self.error), world=True)
            rank = next(r for r, e in enumerate(errors) if e is not None)
            raise SDCProbeError("the inline probe of rank %d failed: %s" % (rank, errors[rank])) from self.error
        if not any_failed:
            return None
        verdicts = self._exchange.gather_objects(verdict if failed else None, world=True)
        rank = next(r for r, v in enumerate(verdicts) if v is not None)
        return dict(verdicts[rank], rank=rank)


def stop_message(failure):
    """SDCStop's message for the job's agreed inline-probe failure."""
    return "the inline probe failed on rank %d, %s (last good step %s)" % (
        failure["rank"], failure["device"], failure["last_good_step"])


def _act(probe, verdict, failure, on_sdc, log):
    """Acts as `on_sdc` says ("raise", or a callable(verdict)) on the job's agreed `failure`. A rank
    whose own probe did not fail (its `verdict`; None where the probe erred) first logs the failing
    rank's sdc_detected, when `log`: each probe logged its own."""
    if log and verdict is not None and verdict["verdict"] != "fail":
        fields = {"device": failure["device"], "step": failure["last_step"], "suspect_rank": failure["rank"]}
        # Before any probe passed there is no last good step (-1): the failing probe's own
        # sdc_detected leaves it out too, and the goodput schema refuses a negative one.
        if failure["last_good_step"] >= 0:
            fields["last_good_step"] = failure["last_good_step"]
        probe.log_event("sdc_detected", **fields)
    if on_sdc == "raise":
        raise SDCDetected("silent data corruption: " + stop_message(failure))
    on_sdc(failure)


def step_probe(probe, step, on_sdc, job, log=False):
    """probe.step(step) on the job's stream; when the job agrees (JobAgreement) that a probe failed,
    the first time, acts as `on_sdc` says (_act). probe is None where it could not be made (its
    error is held in job.error)."""
    if probe is not None:
        # The stream goes to a CUDA probe only: the CPU backend reads a stream as a device id.
        stream = _current_stream() if probe.backend == "cuda" else None
        job.attempt(probe.step, step, stream)
    if not job.reported and job.due(step):
        _agree(probe, step, on_sdc, job, log)


def before_save(probe, step, on_sdc, job, log=False):
    """Before a save is written, on every rank: acts on a failure any rank's probe has found, so
    that no save holds a state known to be corrupt (raising there keeps the file from being
    written)."""
    if not job.reported:
        _agree(probe, step, on_sdc, job, log)


def final_probe(probe, on_sdc, job, log=False):
    """At the end of training, on every rank: waits for the probe in flight, acts on a failure that
    its final verdict, or another rank's, holds, unless one was acted on, and closes the probe (after
    acting, which logs on it)."""
    try:
        if probe is not None:
            job.attempt(probe.finish)
        if not job.reported:
            _agree(probe, None, on_sdc, job, log)
    finally:
        if probe is not None:
            probe.close()


def _agree(probe, step, on_sdc, job, log):
    verdict = job.attempt(lambda: probe.verdict) if probe is not None else None
    failure = job.failure(step, verdict)
    if failure is not None:
        job.reported = True
        _act(probe, verdict, failure, on_sdc, log)


class SDCCallback(_lightning_callback()):
    """Calls InlineProbe.step after every training batch.

    The probe is made in setup(), once Lightning has set this rank's CUDA device and made the
    process group: it tests the device torch.cuda.current_device() names then, on that device's
    stream, with ranks = the world size. probe_options are InlineProbe's.

    on_sdc: "raise" raises SDCDetected; "stop" ends the fit, and the process, with SDCStop (exit
    status SDC_EXIT_STATUS, 75), after logging fault_detected with kind "SDCStop" in the probe's
    event_log (after its sdc_detected); or a callable(verdict), the failing rank's verdict with its
    "rank". In a job of several ranks every rank acts at the same step (JobAgreement), and an error
    of one rank's probe (made or stepped) is raised by every rank at the same step. Every save,
    weights-only too, waits for the ranks' agreement (before_every_save).

    flight_recorder: the folder, beside the probe's event_log (else in the working directory), of
    each attempt's flight-recorder dumps, as GoodputLog keeps them (FOLDER/attempt<N>/
    nccl_trace_rank_<R>, for `sdcprobe hang`): when a rank's fit fails, every rank writes its own,
    the stuck rank's included (sdcprobe.flight_recorder); None: off. The recorder's settings are
    made here, before Lightning makes the process group that reads them.
    """

    def __init__(self, on_sdc="raise", flight_recorder="flight_recorder", **probe_options):
        if on_sdc not in ("raise", "stop") and not callable(on_sdc):
            raise ValueError("on_sdc must be 'raise', 'stop' or a callable")
        if flight_recorder is not None and not isinstance(flight_recorder, (str, os.PathLike)):
            raise TypeError("flight_recorder must be a folder or None, got %r" % (flight_recorder,))
        self.flight_recorder = None
        if flight_recorder is not None:
            log = probe_options.get("event_log")
            name = attempt_folder()
            self.flight_recorder = dumps_for(
                os.path.join(os.path.dirname(os.fspath(log)) if log is not None else "", os.fspath(flight_recorder),
                             name), name)
        self.probe = None
        self.probe_options = probe_options
        self.on_sdc = self._stop if on_sdc == "stop" else on_sdc
        self._logs = probe_options.get("event_log") is not None
        self._job = JobAgreement()
        self._state = "new"  # "running" once setup() has made the probe, "ended" after fit

    def setup(self, trainer=None, pl_module=None, stage=None):
        """Makes the probe on this rank's device (an error of it is raised at the first agreement,
        on every rank), and checks every save of `trainer` (before_every_save)."""
        if self._state == "new":
            self._state = "running"
            self.probe = self._job.attempt(InlineProbe, **self.probe_options)
            if self.flight_recorder is not None:
                self.flight_recorder.start()  # the process group exists by now
        if hasattr(trainer, "strategy"):
            before_every_save(trainer, self._before_save)

    def _stop(self, failure):
        if self._logs and self.probe is not None:
            self.probe.log_event("fault_detected", kind="SDCStop")
        raise SDCStop(stop_message(failure))

    def on_train_batch_end(self, trainer, pl_module=None, outputs=None, batch=None, batch_idx=None, *args):
        if self._state == "new":
            self.setup(trainer)  # for callers that skip setup()
        step_probe(self.probe, int(trainer.global_step), self.on_sdc, self._job, self._logs)

    def _before_save(self, trainer):
        if self._state == "running":
            before_save(self.probe, int(trainer.global_step), self.on_sdc, self._job, self._logs)

    def on_train_end(self, trainer=None, pl_module=None):
        if self._state == "running":
            self._state = "ending"  # an SDC acted on here ends the fit through on_exception
            final_probe(self.probe, self.on_sdc, self._job, self._logs)
            self._state = "ended"
            if self.flight_recorder is not None:
                self.flight_recorder.end()

    def on_exception(self, trainer=None, pl_module=None, exception=None):
        """Every rank is asked for its flight-recorder dump, as GoodputLog asks when an attempt
        fails; the probe is closed."""
        if self._state in ("running", "ending") and self.flight_recorder is not None:
            self.flight_recorder.end(exception)
        self._state = "ended"
        if self.probe is not None:
            self.probe.close()
