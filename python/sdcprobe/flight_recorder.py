"""Every rank's flight-recorder dump when the job fails, the stuck rank's included (docs/goodput.md,
"Hangs"), for `sdcprobe hang DIR`.

PyTorch's flight recorder keeps each rank's last collectives. NCCL's watchdog dumps them itself on a
timeout (TORCH_FR_DUMP_ON_TIMEOUT, which this module turns on) and tells the other ranks' watchdogs
through the store. Gloo writes nothing, so here the first rank whose attempt fails sets a key in the
job's store, and a side thread on every rank, which waits on that key, writes its own rank's dump:
that thread answers while the rank's main thread is stuck (in a sleep, a lock, a collective), and a
rank killed or stuck holding Python's lock writes nothing, which the reader calls "no dump".
Dumps skip stack frames (about 4 s with them).
"""

import atexit
import os
import sys
import threading
import time
import warnings
import weakref

_KEY = "sdcprobe/flight_recorder/dump/%s"
_DONE = "sdcprobe/flight_recorder/dumped/%s"
_FILE = "nccl_trace_rank_%d"
_POLL_S = 1.0


def _c10d(torch):
    """torch's recorder functions, or None: torch 1.13 (Debian's) has no flight recorder."""
    c10d = getattr(getattr(torch, "_C", None), "_distributed_c10d", None)
    if not hasattr(c10d, "_dump_fr_trace") and not hasattr(c10d, "_dump_nccl_trace"):
        return None
    return c10d


_ENV_SET = {}  # the values this module set, which a later attempt may replace
_LIVE = weakref.WeakSet()  # the side threads running
_BY_FOLDER = {}  # (folder, attempt): the FlightRecorderDumps this process made for it


@atexit.register
def _stop_all():
    """Side threads end before the interpreter does: one still inside a store call while Python
    finalises would make torch call std::terminate (GoodputCallback never ends its attempt)."""
    for dumps in list(_LIVE):
        dumps.stop()


def _set_env(name, value):
    if os.environ.get(name, _ENV_SET.get(name)) == _ENV_SET.get(name):
        os.environ[name] = value
        _ENV_SET[name] = value


def dumps_for(directory, attempt):
    """This process's FlightRecorderDumps of `directory` and `attempt`, made once while it has not
    stopped: GoodputCallback and SDCCallback in one Trainer then share one side thread, so a rank
    dumps once and is counted once among the dumps a failing rank waits for."""
    key = (os.path.abspath(os.fspath(directory)), attempt)
    dumps = _BY_FOLDER.get(key)
    if dumps is None or dumps._stop.is_set():
        dumps = _BY_FOLDER[key] = FlightRecorderDumps(directory, attempt)
    return dumps


def _atomic_write(path, data):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class FlightRecorderDumps:
    """Dumps this rank's flight recorder into `directory` (nccl_trace_rank_R) when any rank asks.

    attempt: names this attempt's key in the store (torchrun 2.x shares one store between attempts).
    wait_s: how long the rank that asks waits for the others' dumps before it goes on failing.
    """

    def __init__(self, directory, attempt=0, wait_s=10.0):
        self.directory = os.fspath(directory)
        self.attempt = attempt
        self.wait_s = wait_s
        self.available = None  # known once torch.distributed has a process group
        self.c10d = None
        self._thread = None
        self._store = None
        self._stop = threading.Event()
        self._rank = None
        self._world = None
        self._backend = ""
        self._dumped = False
        self._lock = threading.Lock()
        self._requested = False
        # Read when the process group is made: NCCL's watchdog then dumps on a timeout, into the same
        # folder, without stack frames. A value the job set is kept.
        _set_env("TORCH_FR_DUMP_ON_TIMEOUT", "1")
        _set_env("TORCH_FR_DUMP_TEMP_FILE", os.path.join(self.directory, _FILE.replace("%d", "")))
        _set_env("TORCH_INCLUDE_STACK_TRACE", "0")

    def start(self):
        """Starts the side thread once the process group exists (torch is never imported here);
        False while it does not. On a torch without the recorder it warns once and stays off."""
        if self.available is not None:
            return self._thread is not None
        torch = sys.modules.get("torch")
        dist = getattr(torch, "distributed", None) if torch is not None else None
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return False
        self.c10d = _c10d(torch)
        self.available = self.c10d is not None
        if not self.available:
            warnings.warn("sdcprobe: torch %s has no flight recorder: a hang's rank will not be named" %
                          torch.__version__, RuntimeWarning, stacklevel=2)
            return False
        from torch.distributed.distributed_c10d import _get_default_store
        self._store = _get_default_store()
        self._rank = dist.get_rank()
        self._world = dist.get_world_size()
        self._backend = str(dist.get_backend())
        self._thread = threading.Thread(target=self._wait_for_request, name="sdcprobe-flight-recorder", daemon=True)
        self._thread.start()
        _LIVE.add(self)
        return True

    def _wait_for_request(self):
        # Polls: a thread blocked in the store's wait when the store's server exits (rank 0's process
        # ending) makes torch call std::terminate at the interpreter's exit. Once a second, as
        # NCCL's own watchdog polls the store for its dump signal.
        key = _KEY % self.attempt
        while not self._stop.wait(_POLL_S):
            try:
                if self._store.check([key]):
                    self.dump()
                    return
            except Exception:  # the store went away: the job ended
                return

    def end(self, exception=None):
        """The attempt is over, ended by `exception` (None: it finished): one that failed (any
        exception but a clean SystemExit) first asks every rank for its dump (request); then the
        side thread ends."""
        if exception is not None and not (isinstance(exception, SystemExit) and exception.code in (None, 0)):
            self.request()
        self.stop()

    def stop(self):
        """Ends the side thread (the attempt is over); waits for it at most one poll."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(_POLL_S + 1)

    def dump(self):
        """Writes this rank's dump once; True when written."""
        with self._lock:
            if self._dumped or self._rank is None:
                return self._dumped
            if "nccl" in self._backend and hasattr(self.c10d, "_dump_nccl_trace"):
                data = self.c10d._dump_nccl_trace(includeStackTraces=False)
            else:
                data = self.c10d._dump_fr_trace(includeStackTraces=False)
            os.makedirs(self.directory, exist_ok=True)  # only an attempt that failed has a folder
            _atomic_write(os.path.join(self.directory, _FILE % self._rank), data)
            self._dumped = True
        try:
            self._store.add(_DONE % self.attempt, 1)
        except Exception:
            pass
        return True

    def request(self):
        """Asks every rank to dump (the first rank whose attempt fails), dumps this one, and waits
        up to wait_s for the others'. Returns how many ranks dumped."""
        if self._store is None or self._requested:
            return 0
        self._requested = True
        try:
            self._store.set(_KEY % self.attempt, "1")
        except Exception:
            return 0
        self.dump()
        deadline = time.monotonic() + self.wait_s
        dumped = 0
        while True:
            try:
                dumped = self._store.add(_DONE % self.attempt, 0)
            except Exception:
                return dumped
            if dumped >= self._world or time.monotonic() >= deadline:
                return dumped
            time.sleep(0.05)
