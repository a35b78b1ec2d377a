"""Finds and loads libsdcprobe.so.1; no compiler is needed at install time."""

import ctypes
import glob
import os

ABI_VERSION = 3


class Config(ctypes.Structure):
    """Mirrors sdc_inline_config in host/include/sdcprobe/sdcprobe.h (fields are only appended)."""

    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("backend", ctypes.c_char_p),
        ("device", ctypes.c_int32),
        ("probes", ctypes.c_char_p),
        ("budget_fraction", ctypes.c_double),
        ("every", ctypes.c_int64),
        ("event_log", ctypes.c_char_p),
        ("seed", ctypes.c_uint64),
        ("sdc_rate_per_device_day", ctypes.c_double),
        ("inject", ctypes.c_char_p),
        ("stream", ctypes.c_void_p),
        ("ranks", ctypes.c_int64),
    ]


class Digest(ctypes.Structure):
    """Mirrors sdc_digest."""

    _fields_ = [("lo", ctypes.c_uint64), ("hi", ctypes.c_uint64)]


SONAME = "libsdcprobe.so.1"


def _candidates():
    explicit = os.environ.get("SDCPROBE_LIBRARY")
    if explicit:
        yield explicit
        return
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    # A build tree next to the package (cmake presets put builds under build/<preset>).
    yield from sorted(glob.glob(os.path.join(repo, "build", "*", "scheduler", "inline", SONAME)))
    # The installed library, by its SONAME through the dynamic loader's search path (ld.so.cache,
    # LD_LIBRARY_PATH): /usr/lib/<triplet>/libsdcprobe.so.1 from the package or `cmake --install`.
    yield SONAME


def load():
    """Returns the loaded library with its functions typed; raises OSError naming where it looked."""
    tried = []
    for path in _candidates():
        tried.append(path)
        if not os.path.exists(path) and os.sep in path:
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            if os.sep in path:
                raise
            continue
        _declare(lib)
        return lib
    raise OSError(SONAME + " not found (install the sdcprobe package, set SDCPROBE_LIBRARY, or build with "
                  "cmake); tried: " + ", ".join(tried))


def _declare(lib):
    handle = ctypes.c_void_p
    lib.sdc_inline_config_init.argtypes = [ctypes.POINTER(Config)]
    lib.sdc_inline_config_init.restype = None
    lib.sdc_inline_create.argtypes = [ctypes.POINTER(Config), ctypes.POINTER(handle)]
    lib.sdc_inline_create.restype = ctypes.c_int
    lib.sdc_inline_step.argtypes = [handle, ctypes.c_int64, ctypes.c_void_p]
    lib.sdc_inline_step.restype = ctypes.c_int
    lib.sdc_inline_finish.argtypes = [handle]
    lib.sdc_inline_finish.restype = ctypes.c_int
    lib.sdc_inline_poll.argtypes = [handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    lib.sdc_inline_poll.restype = ctypes.c_int
    lib.sdc_inline_log_event.argtypes = [handle, ctypes.c_char_p]
    lib.sdc_inline_log_event.restype = ctypes.c_int
    lib.sdc_inline_destroy.argtypes = [handle]
    lib.sdc_inline_destroy.restype = None
    lib.sdc_digest_host.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(Digest)]
    lib.sdc_digest_host.restype = ctypes.c_int
    lib.sdc_digest_cuda.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]
    lib.sdc_digest_cuda.restype = ctypes.c_int
    lib.sdc_device_identity.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t,
                                        ctypes.POINTER(ctypes.c_size_t)]
    lib.sdc_device_identity.restype = ctypes.c_int
    lib.sdc_choose_every.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_double,
                                     ctypes.POINTER(ctypes.c_int64)]
    lib.sdc_choose_every.restype = ctypes.c_int
    lib.sdc_choose_job_every.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_double,
                                         ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)]
    lib.sdc_choose_job_every.restype = ctypes.c_int
    lib.sdc_last_error.argtypes = []
    lib.sdc_last_error.restype = ctypes.c_char_p
    lib.sdc_version.argtypes = []
    lib.sdc_version.restype = ctypes.c_char_p
