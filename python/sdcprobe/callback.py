"""SDCCallback: an inline probe for PyTorch Lightning-style training loops."""

from sdcprobe.inline import InlineProbe, SDCDetected


def _current_stream():
    try:
        import torch
    except ImportError:
        return None
    if torch.cuda.is_available():
        return torch.cuda.current_stream().cuda_stream
    return None


def step_probe(probe, step, trainer, on_sdc, reported):
    """probe.step(step) on the job's stream; on the first failing verdict (when not yet `reported`)
    acts as `on_sdc` says. Returns whether a failure has been reported."""
    # The stream goes to a CUDA probe only: the CPU backend reads a stream as a device id.
    stream = _current_stream() if probe.backend == "cuda" else None
    probe.step(step, stream)
    verdict = probe.verdict
    if verdict["verdict"] != "fail" or reported:
        return reported
    if on_sdc == "raise":
        raise SDCDetected("silent data corruption on %s (last good step %s)"
                          % (verdict["device"], verdict["last_good_step"]))
    if on_sdc == "stop":
        trainer.should_stop = True
    else:
        on_sdc(verdict)
    return True


class SDCCallback:
    """Calls InlineProbe.step after every training batch.

    on_sdc: "raise" raises SDCDetected, "stop" sets trainer.should_stop, or a callable(verdict).
    """

    def __init__(self, on_sdc="raise", **probe_options):
        if on_sdc not in ("raise", "stop") and not callable(on_sdc):
            raise ValueError("on_sdc must be 'raise', 'stop' or a callable")
        self.probe = InlineProbe(**probe_options)
        self.on_sdc = on_sdc
        self._reported = False

    def on_train_batch_end(self, trainer, pl_module=None, outputs=None, batch=None, batch_idx=None):
        self._reported = step_probe(self.probe, int(trainer.global_step), trainer, self.on_sdc, self._reported)

    def on_train_end(self, trainer=None, pl_module=None):
        self.probe.close()
