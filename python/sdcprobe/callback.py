"""SDCCallback: an inline probe for PyTorch Lightning-style training loops."""

import importlib
import sys

from sdcprobe.inline import InlineProbe, SDCDetected, SDCStop


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


def step_probe(probe, step, on_sdc, reported):
    """probe.step(step) on the job's stream; on the first failing verdict (when not yet `reported`)
    acts as `on_sdc` says ("raise", or a callable(verdict)). Returns whether a failure has been
    reported."""
    # The stream goes to a CUDA probe only: the CPU backend reads a stream as a device id.
    stream = _current_stream() if probe.backend == "cuda" else None
    probe.step(step, stream)
    verdict = probe.verdict
    if verdict["verdict"] != "fail" or reported:
        return reported
    if on_sdc == "raise":
        raise SDCDetected("silent data corruption on %s (last good step %s)"
                          % (verdict["device"], verdict["last_good_step"]))
    on_sdc(verdict)
    return True


class SDCCallback(_lightning_callback()):
    """Calls InlineProbe.step after every training batch.

    on_sdc: "raise" raises SDCDetected; "stop" ends the fit, and the process, with SDCStop (exit
    status SDC_EXIT_STATUS, 75), after logging fault_detected with kind "SDCStop" in the probe's
    event_log (after its sdc_detected); or a callable(verdict).
    """

    def __init__(self, on_sdc="raise", **probe_options):
        if on_sdc not in ("raise", "stop") and not callable(on_sdc):
            raise ValueError("on_sdc must be 'raise', 'stop' or a callable")
        self.probe = InlineProbe(**probe_options)
        self.on_sdc = self._stop if on_sdc == "stop" else on_sdc
        self._logs = probe_options.get("event_log") is not None
        self._reported = False

    def _stop(self, verdict):
        if self._logs:
            self.probe.log_event("fault_detected", kind="SDCStop")
        raise SDCStop("the inline probe failed on %s (last good step %s)"
                      % (verdict["device"], verdict["last_good_step"]))

    def on_train_batch_end(self, trainer, pl_module=None, outputs=None, batch=None, batch_idx=None, *args):
        self._reported = step_probe(self.probe, int(trainer.global_step), self.on_sdc, self._reported)

    def on_train_end(self, trainer=None, pl_module=None):
        self.probe.close()

    def on_exception(self, trainer=None, pl_module=None, exception=None):
        self.probe.close()
