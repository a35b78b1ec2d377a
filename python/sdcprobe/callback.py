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
        # The stream goes to a CUDA probe only: the CPU backend reads a stream as a device id.
        stream = _current_stream() if self.probe.backend == "cuda" else None
        self.probe.step(int(trainer.global_step), stream)
        verdict = self.probe.verdict
        if verdict["verdict"] != "fail" or self._reported:
            return
        self._reported = True
        if self.on_sdc == "raise":
            raise SDCDetected("silent data corruption on %s (last good step %s)"
                              % (verdict["device"], verdict["last_good_step"]))
        if self.on_sdc == "stop":
            trainer.should_stop = True
        else:
            self.on_sdc(verdict)

    def on_train_end(self, trainer=None, pl_module=None):
        self.probe.close()
