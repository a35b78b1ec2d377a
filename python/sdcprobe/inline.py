"""InlineProbe: small SDC probes every N training steps, on the device the job already holds."""

import ctypes
import json

from sdcprobe import _library

_lib = None

SDC_OK = 0
SDC_ERR_BUFFER_TOO_SMALL = 3


class SDCProbeError(RuntimeError):
    """The library refused a call; the message is sdc_last_error()."""


class SDCDetected(RuntimeError):
    """A probe found silent data corruption on this device."""


def _library_handle():
    global _lib
    if _lib is None:
        _lib = _library.load()
    return _lib


def _check(status):
    if status != SDC_OK:
        raise SDCProbeError(_library_handle().sdc_last_error().decode())


def _stream_pointer(stream):
    """A CUDA stream as a pointer: None, an int (cudaStream_t), or a torch.cuda.Stream."""
    if stream is None:
        return None
    if hasattr(stream, "cuda_stream"):
        return ctypes.c_void_p(stream.cuda_stream)
    return ctypes.c_void_p(int(stream))


class InlineProbe:
    """Runs probes every `every` steps ("auto": the planner's cadence within `budget`).

    step() never blocks: a due step queues a probe that starts when `stream`'s queued work is done,
    and the previous probe's verdict is collected when it has finished.
    """

    def __init__(self, device=0, every="auto", budget=0.01, backend="auto", probes=None, event_log=None,
                 seed=0, sdc_rate=None, inject=None):
        lib = _library_handle()
        config = _library.Config()
        lib.sdc_inline_config_init(ctypes.byref(config))
        if every == "auto" or every is None:
            every = 0
        elif not isinstance(every, int) or every < 1:
            raise ValueError("every must be a positive int or 'auto', got %r" % (every,))
        self._keep = [s.encode() if s is not None else None for s in (backend, probes, event_log, inject)]
        config.backend, config.probes, config.event_log, config.inject = self._keep
        config.device = device
        config.budget_fraction = budget
        config.every = every
        config.seed = seed
        if sdc_rate is not None:
            config.sdc_rate_per_device_day = sdc_rate
        self._handle = ctypes.c_void_p()
        _check(lib.sdc_inline_create(ctypes.byref(config), ctypes.byref(self._handle)))
        self._buffer = ctypes.create_string_buffer(4096)

    def step(self, step, stream=None):
        _check(_lib.sdc_inline_step(self._handle, step, _stream_pointer(stream)))

    def log_event(self, event, **fields):
        """Appends {"event": event, **fields} to the event log, stamped by the library."""
        record = dict(fields, event=event)
        _check(_lib.sdc_inline_log_event(self._handle, json.dumps(record).encode()))

    @property
    def verdict(self):
        """The latest verdict: {"verdict": "none"|"pass"|"fail"|"error", "last_good_step": ..., ...}."""
        needed = ctypes.c_size_t(0)
        status = _lib.sdc_inline_poll(self._handle, self._buffer, len(self._buffer), ctypes.byref(needed))
        if status == SDC_ERR_BUFFER_TOO_SMALL:
            self._buffer = ctypes.create_string_buffer(needed.value)
            status = _lib.sdc_inline_poll(self._handle, self._buffer, len(self._buffer), ctypes.byref(needed))
        _check(status)
        return json.loads(self._buffer.value.decode())

    def close(self):
        """Waits for a probe in flight and frees the device buffers."""
        if self._handle:
            _lib.sdc_inline_destroy(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None):
            self.close()
