"""InlineProbe: small SDC probes every N training steps, on the device the job already holds."""

import ctypes
import json
import sys
import threading

from sdcprobe import _library

_lib = None

SDC_OK = 0
SDC_ERR_BUFFER_TOO_SMALL = 3

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


class SDCProbeError(RuntimeError):
    """The library refused a call; the message is sdc_last_error()."""


class SDCDetected(RuntimeError):
    """A probe found silent data corruption on this device."""


# The status of a process that on_sdc="stop" ends under Lightning: sysexits' EX_TEMPFAIL ("a
# temporary failure: retry"), apart from 1 (any Python error) and 2 (bad input), so a launcher can
# requeue the job away from the suspect node (docs/replica.md, "Stopping for SDC").
SDC_EXIT_STATUS = 75


class SDCStop(SystemExit):
    """Ends a Lightning fit for SDC with on_sdc="stop": Lightning tears down and calls on_exception
    (GoodputCallback logs the fault), then the process exits with SDC_EXIT_STATUS. Its message is
    written to stderr, since SystemExit prints none."""

    def __init__(self, message):
        super().__init__(SDC_EXIT_STATUS)
        self.message = message
        sys.stderr.write("sdcprobe: stopping for SDC (exit status %d): %s\n" % (SDC_EXIT_STATUS, message))

    def __str__(self):
        return self.message


def _library_handle():
    global _lib
    if _lib is None:
        _lib = _library.load()
    return _lib


def _check(status):
    if status != SDC_OK:
        raise SDCProbeError(_library_handle().sdc_last_error().decode())


def _int_in(name, value, low, high):
    """`value` as an int in [low, high]; ctypes would wrap it silently."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s must be an int, got %r" % (name, value))
    if not low <= value <= high:
        raise ValueError("%s must be in [%d, %d], got %d" % (name, low, high, value))
    return value


def _stream_pointer(stream):
    """A CUDA stream as a pointer: None, an int (cudaStream_t), or a torch.cuda.Stream."""
    if stream is None:
        return None
    if hasattr(stream, "cuda_stream"):
        stream = stream.cuda_stream
    return ctypes.c_void_p(_int_in("stream", stream, 0, UINT64_MAX))


def _torch_cuda():
    """torch.cuda when the process already uses torch with CUDA, else None (torch is not imported)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda


def _job_ranks():
    """The world size of torch.distributed's process group when the process uses one, else 1."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return 1
    return dist.get_world_size()


class InlineProbe:
    """Runs probes every `every` steps ("auto": the planner's cadence within `budget`).

    step() never blocks: a due step queues a probe that starts when `stream`'s queued work is done,
    and the previous probe's verdict is collected when it has finished.

    device defaults to the job's own GPU (torch.cuda.current_device()) when torch uses CUDA, else 0;
    stream (checked to belong to `device`) defaults to that GPU's current torch stream.

    ranks: the devices of the job, every one probing at the same step, for every="auto": a fault on
    any of them corrupts the model through the reductions, so the job's SDC rate is `ranks` times
    one device's and the planner's optimum sqrt(ranks) times shorter. None: the world size of
    torch.distributed's process group when one is initialised, else 1.

    Safe to share between threads: calls are serialised, close() waits for a step() in progress,
    and after close() the final verdict stays readable.
    """

    def __init__(self, device=None, every="auto", budget=0.01, backend="auto", probes=None, event_log=None,
                 seed=0, sdc_rate=None, inject=None, stream=None, ranks=None):
        lib = _library_handle()
        self._lock = threading.Lock()
        self._handle = ctypes.c_void_p()
        self._final = None
        config = _library.Config()
        lib.sdc_inline_config_init(ctypes.byref(config))
        if every == "auto" or every is None:
            every = 0
        else:
            every = _int_in("every", every, 1, INT64_MAX)
        cuda = _torch_cuda() if backend != "cpu" else None
        if device is None:
            device = cuda.current_device() if cuda is not None else 0
        device = _int_in("device", device, 0, INT32_MAX)
        if stream is None and cuda is not None:
            stream = cuda.current_stream(device)
        self._keep = [s.encode() if s is not None else None for s in (backend, probes, event_log, inject)]
        config.backend, config.probes, config.event_log, config.inject = self._keep
        config.device = device
        config.budget_fraction = budget
        config.every = every
        config.seed = _int_in("seed", seed, 0, UINT64_MAX)
        if sdc_rate is not None:
            config.sdc_rate_per_device_day = sdc_rate
        config.stream = _stream_pointer(stream)
        config.ranks = _job_ranks() if ranks is None else _int_in("ranks", ranks, 1, INT64_MAX)
        self._buffer = ctypes.create_string_buffer(4096)
        _check(lib.sdc_inline_create(ctypes.byref(config), ctypes.byref(self._handle)))
        self.backend = self._poll()["backend"]

    def _require_open(self):
        if not self._handle:
            raise SDCProbeError("the probe is closed")

    def step(self, step, stream=None):
        step = _int_in("step", step, 0, INT64_MAX)
        pointer = _stream_pointer(stream)
        with self._lock:
            self._require_open()
            _check(_lib.sdc_inline_step(self._handle, step, pointer))

    def log_event(self, event, **fields):
        """Appends {"event": event, **fields} to the event log, stamped by the library; an event the
        goodput schema rejects (an unknown event, a step_end without step) raises SDCProbeError."""
        text = json.dumps(dict(fields, event=event)).encode()
        with self._lock:
            self._require_open()
            _check(_lib.sdc_inline_log_event(self._handle, text))

    def _poll(self):
        needed = ctypes.c_size_t(0)
        status = _lib.sdc_inline_poll(self._handle, self._buffer, len(self._buffer), ctypes.byref(needed))
        if status == SDC_ERR_BUFFER_TOO_SMALL:
            self._buffer = ctypes.create_string_buffer(needed.value)
            status = _lib.sdc_inline_poll(self._handle, self._buffer, len(self._buffer), ctypes.byref(needed))
        _check(status)
        return json.loads(self._buffer.value.decode())

    @property
    def verdict(self):
        """The latest verdict: {"verdict": "none"|"pass"|"fail"|"error", "last_good_step": ..., ...};
        after close(), the final one."""
        with self._lock:
            if not self._handle:
                return dict(self._final)
            return self._poll()

    def finish(self):
        """Waits for a step() in progress and a probe in flight, and collects its verdict; the probe
        stays open (log_event, step)."""
        with self._lock:
            self._require_open()
            _check(_lib.sdc_inline_finish(self._handle))

    def close(self):
        """Waits for a step() in progress and a probe in flight, records the final verdict and frees
        the device buffers. Later calls do nothing."""
        with self._lock:
            if not self._handle:
                return
            try:
                _check(_lib.sdc_inline_finish(self._handle))
                self._final = self._poll()
            finally:
                if self._final is None:
                    self._final = {"verdict": "error", "reason": _lib.sdc_last_error().decode()}
                _lib.sdc_inline_destroy(self._handle)
                self._handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None):
            self.close()
