"""sdcprobe inline probes for training loops: a ctypes binding to libsdcprobe.so.

    from sdcprobe import InlineProbe
    probe = InlineProbe(device=0, every="auto", budget=0.01, event_log="events.jsonl")
    for step, batch in enumerate(loader):
        train_step(batch)
        probe.step(step)            # never blocks; probes run off the training thread
    assert probe.verdict["verdict"] != "fail"
"""

from sdcprobe.inline import SDC_EXIT_STATUS, InlineProbe, SDCDetected, SDCProbeError, SDCStop
from sdcprobe.callback import SDCCallback
from sdcprobe.replica import ReplicaCheck
from sdcprobe.goodput_log import GoodputLog
from sdcprobe.goodput_callback import GoodputCallback
from sdcprobe.canary import CanaryCallback, CanaryCheck

__all__ = ["InlineProbe", "ReplicaCheck", "SDCCallback", "SDCDetected", "SDCProbeError", "SDCStop"]
__all__ += ["SDC_EXIT_STATUS"]
__all__ += ["GoodputLog", "GoodputCallback"]
__all__ += ["CanaryCheck", "CanaryCallback"]
