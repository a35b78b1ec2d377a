"""GoodputLog: writes the goodput event schema (docs/goodput.md) from any training loop.

    from sdcprobe import GoodputLog
    log = GoodputLog("events.rank{rank}.jsonl")
    with log.job(), log.attempt():
        with log.restore(resume_step):
            load_checkpoint()
        for step in range(resume_step + 1, steps):
            with log.step(step):
                train_step()
            if step % 100 == 0:
                with log.checkpoint(step):
                    save()
                log.commit(step)

Then `sdcprobe goodput 'events.rank*.jsonl'` gives the breakdown.
"""

import contextlib
import json
import os
import socket
import sys
import threading
import time

from sdcprobe.flight_recorder import dumps_for
from sdcprobe.inline import INT64_MAX, _int_in

# The schema's events (docs/goodput.md, goodput/event.cpp), those that need "step", and
# those worth an fsync.
_EVENTS = frozenset([
    "job_eligible", "alloc_granted", "alloc_released", "job_end", "process_start", "init_begin", "init_end",
    "restore_begin", "restore_end", "step_begin", "step_end", "ckpt_begin", "ckpt_end", "ckpt_commit",
    "eval_begin", "eval_end", "data_wait_begin", "data_wait_end", "probe_begin", "probe_end", "fault_detected",
    "sdc_detected", "teardown_end", "node_quarantined"])
_NEEDS_STEP = frozenset(["restore_end", "step_begin", "step_end", "ckpt_begin", "ckpt_end", "ckpt_commit"])
_DURABLE = frozenset(["fault_detected", "sdc_detected", "ckpt_commit"])


def _default_rank():
    """torch.distributed's rank when it is initialised, else $RANK, else 0."""
    import sys

    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    text = os.environ.get("RANK", "0")
    try:
        return int(text)
    except ValueError:
        raise ValueError("RANK must be an integer, got %r" % text) from None


def _attempt_from_launcher():
    """The launcher's restart count: torchrun's $TORCHELASTIC_RESTART_COUNT, else Slurm's
    $SLURM_RESTART_COUNT, else 0."""
    for name in ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"):
        text = os.environ.get(name, "")
        if text:
            try:
                return int(text)
            except ValueError:
                raise ValueError("%s must be an integer, got %r" % (name, text)) from None
    return 0


def _slurm_restart():
    """Slurm's requeue count ($SLURM_RESTART_COUNT), which names the job's sacct record; None
    outside Slurm. Slurm sets it only after a requeue: inside a job ($SLURM_JOB_ID) it is 0 before."""
    text = os.environ.get("SLURM_RESTART_COUNT", "")
    if not text:
        return 0 if os.environ.get("SLURM_JOB_ID") else None
    try:
        return _int_in("SLURM_RESTART_COUNT", int(text), 0, INT64_MAX)
    except ValueError:
        raise ValueError("SLURM_RESTART_COUNT must be an integer, got %r" % text) from None


def attempt_folder(attempt=None):
    """The name of an attempt's folder of flight-recorder dumps, as `sdcprobe goodput` reads it:
    attempt<N>, requeue<S>.attempt<N> inside Slurm. attempt: default the launcher's restart count."""
    if attempt is None:
        attempt = _attempt_from_launcher()
    slurm_restart = _slurm_restart()
    return "attempt%d" % attempt if slurm_restart is None else "requeue%d.attempt%d" % (slurm_restart, attempt)


def process_start_ns():
    """When this process started, in Unix nanoseconds, from the OS: /proc/self/stat field 22 (clock
    ticks after boot) plus the boot time. /proc/stat's btime is in whole seconds, which would put
    the start up to 1 s early (before the allocation that started it), so the boot time is taken
    from the clocks instead: now less CLOCK_BOOTTIME. None where the OS does not say."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        # The command name (field 2) may hold spaces and parentheses: count from the last ")".
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        boot = time.time_ns() - time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        return boot + ticks * 10**9 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def device_fields(device=None):
    """Where this rank runs, for process_start: {"device": "GPU-<uuid>", "pci_bus_id": ...} for a CUDA
    device, {"device": "cpu"} for the CPU, {} when it is not known yet (never guessed).

    device: a torch.device, "cuda:1", an index of a CUDA device, or None: the current CUDA device
    once this process has initialised CUDA (the job chose its device), the CPU where torch has no
    CUDA; torch is never imported here."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"device": "cpu"} if device is not None and str(device) == "cpu" else {}
    if device is None:
        if not torch.cuda.is_available():
            return {"device": "cpu"}
        if not torch.cuda.is_initialized():
            return {}
        device = torch.cuda.current_device()
    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if device.type == "cpu":
        return {"device": "cpu"}
    if device.type != "cuda":
        return {}
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if device.index is None else device.index)
    uuid = str(props.uuid)
    return {"device": uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid,
            "pci_bus_id": "%08X:%02X:%02X.0" % (props.pci_domain_id, props.pci_bus_id, props.pci_device_id)}


def _last_time_in(fd):
    """The "t" of the last whole line of the file open at `fd` (an earlier process's log), or 0."""
    size = os.fstat(fd).st_size
    tail = os.pread(fd, min(size, 65536), max(0, size - 65536)) if size else b""
    lines = tail.rstrip(b"\n").rsplit(b"\n", 1)
    try:
        t = json.loads(lines[-1])["t"]
    except (ValueError, KeyError, TypeError, IndexError):
        return 0
    return t if isinstance(t, int) and not isinstance(t, bool) else 0


class _AnchoredClock:
    """Unix nanoseconds that never go backwards: the wall time at open plus monotonic time since.
    A wall-clock step (NTP, an operator) during the run cannot reorder the log."""

    def __init__(self):
        self._wall0 = time.time_ns()
        self._mono0 = time.monotonic_ns()

    def __call__(self):
        return self._wall0 + time.monotonic_ns() - self._mono0


class GoodputLog:
    """Appends goodput events for one rank to its own file.

    path: the file; "{rank}" in it is replaced by the rank (default "events.rank{rank}.jsonl").
    rank: defaults to torch.distributed's rank, else $RANK, else 0; every event carries it, which is
        how `sdcprobe goodput` tells the ranks' files apart.
    clock: a callable returning Unix nanoseconds (tests inject one); default: wall time at open plus
        monotonic time since.
    flight_recorder: the folder, beside the log, of each attempt's flight-recorder dumps
        (FOLDER/attempt<N>/nccl_trace_rank_<R>, for `sdcprobe hang`): when an attempt fails, every
        rank writes its own (sdcprobe.flight_recorder); None: off.

    Each event is one write() to a file opened with O_APPEND, so a killed process leaves only whole
    lines. Faults, commits and the ends of attempts and of the job are also fsynced, so even a lost
    machine keeps what the ledger needs most. Writes are serialised by a lock, so other threads may
    log too (a fault from a watchdog thread); spans of one kind belong to one thread.
    """

    def __init__(self, path="events.rank{rank}.jsonl", rank=None, clock=None, flight_recorder="flight_recorder"):
        self.rank = _int_in("rank", _default_rank() if rank is None else rank, 0, INT64_MAX)
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError("path must be a string, got %r" % (path,))
        self.path = os.fspath(path).replace("{rank}", str(self.rank))
        if not self.path:
            raise ValueError("path must not be empty")
        if clock is not None and not callable(clock):
            raise TypeError("clock must be callable, got %r" % (clock,))
        self._clock = clock or _AnchoredClock()
        self._lock = threading.Lock()
        self._last_t = 0
        self._open = set()  # activities running now ("step", "ckpt", ...), each once
        self._saved = set()  # steps whose save ended, so commit(step) has something to commit
        self._faulted = False  # a fault was logged in this attempt; exiting with it adds none
        if flight_recorder is not None and not isinstance(flight_recorder, (str, os.PathLike)):
            raise TypeError("flight_recorder must be a folder or None, got %r" % (flight_recorder,))
        self._fr_folder = flight_recorder
        self.flight_recorder = None  # this attempt's FlightRecorderDumps
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self._file_last_t = _last_time_in(self._fd)  # a restarted process appends after its predecessor

    # -- writing ------------------------------------------------------------------------------

    def _write(self, event, durable=False, at=None, **fields):
        reserved = {"t", "event"} & set(fields)
        if reserved:
            raise ValueError("%s are set by the log, not by the caller" % sorted(reserved))
        with self._lock:
            if self._fd is None:
                raise ValueError("the log %s is closed" % self.path)
            t = self._clock() if at is None else at
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= INT64_MAX:
                raise ValueError("the clock must return Unix nanoseconds as an int, got %r" % (t,))
            if t < self._last_t:
                raise ValueError("the clock went backwards: %d after %d" % (t, self._last_t))
            self._last_t = t
            record = {"t": t, "event": event, "rank": self.rank}
            record.update(fields)
            line = (json.dumps(record, allow_nan=False) + "\n").encode()
            # One write() of a whole line to an O_APPEND file: no other writer's line lands inside it.
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError("short write to %s (%d of %d bytes)" % (self.path, written, len(line)))
            if durable:
                os.fsync(self._fd)

    @contextlib.contextmanager
    def _span(self, name, begin_fields=None, end_fields=None):
        if name in self._open:
            raise ValueError("%s already running: %s spans do not nest" % (name, name))
        self._write(name + "_begin", **(begin_fields or {}))
        self._open.add(name)
        try:
            yield
        except BaseException:
            # The span did not finish: no *_end, the ledger sees it in flight at the fault.
            self._open.discard(name)
            raise
        self._open.discard(name)
        self._write(name + "_end", **(end_fields or {}))

    def _lifetime(self, end_event):
        """A context for a job or attempt: a fault (fsynced) when it ends by an exception, else
        `end_event` (if any) and an fsync."""

        @contextlib.contextmanager
        def span():
            try:
                yield self
            except BaseException as e:
                clean_exit = isinstance(e, SystemExit) and e.code in (None, 0)
                if not clean_exit and not self._faulted:
                    self.fault(type(e).__name__)
                if self.flight_recorder is not None:
                    self.flight_recorder.end(e)
                if clean_exit:
                    self._end(end_event)
                raise
            if self.flight_recorder is not None:
                self.flight_recorder.stop()
            self._end(end_event)

        return span()

    def _end(self, end_event):
        if end_event is not None:
            self._write(end_event, durable=True)
        else:
            self._sync()

    def job_end(self):
        """The job is finished (fsynced); job() writes this when it ends without an exception."""
        self._write("job_end", durable=True)

    def _sync(self):
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    # -- the schema -----------------------------------------------------------------------------

    def job(self):
        """The whole job in this process: `job_end` when it finishes, a fault if it raises. A process
        that will be restarted should not leave job() normally: only the last attempt ends the job."""
        return self._lifetime("job_end")

    def attempt(self, attempt=None, start_ns=None, device=None):
        """One process's run: `process_start` with `attempt` (default $TORCHELASTIC_RESTART_COUNT,
        else $SLURM_RESTART_COUNT, else 0), the host, and the device this rank runs on
        (device_fields(device): give it when the attempt starts before the job sets its CUDA
        device); a fault if it raises, an fsync when it ends.

        start_ns: when the attempt began. Default: the first event of a log on the default clock
        takes the process's own start time from the OS, so importing torch and building the model
        before the log opened count as warm-up; otherwise now."""
        if attempt is None:
            attempt = _attempt_from_launcher()
        attempt = _int_in("attempt", attempt, 0, INT64_MAX)
        if start_ns is None and isinstance(self._clock, _AnchoredClock) and self._last_t == 0:
            start_ns = process_start_ns()
        if start_ns is not None:
            start_ns = _int_in("start_ns", start_ns, 0, INT64_MAX)
            # Never after now, never before what this log already holds (a restarted process
            # appends to its predecessor's file).
            start_ns = max(self._last_t, self._file_last_t, min(start_ns, self._clock()))
        self._faulted = False
        # The host and device name the node and GPU of a rank that hangs the job (docs/goodput.md,
        # "Hangs").
        fields = {"attempt": attempt, "host": socket.gethostname(), **device_fields(device)}
        slurm_restart = _slurm_restart()
        if slurm_restart is not None:
            fields["slurm_restart"] = slurm_restart
        self._write("process_start", durable=True, at=start_ns, **fields)
        if self._fr_folder is not None:
            name = attempt_folder(attempt)
            folder = os.path.join(os.path.dirname(self.path), os.fspath(self._fr_folder), name)
            self.flight_recorder = dumps_for(folder, name)
            self.flight_recorder.start()
        return self._lifetime(None)

    def init(self):
        """Initialisation (model build, communicator set-up): part of restart & warm-up."""
        return self._span("init")

    def step(self, step):
        """One training step, numbered by the global step."""
        step = _int_in("step", step, 0, INT64_MAX)
        if self.flight_recorder is not None:
            self.flight_recorder.start()  # once the process group exists
        return self._span("step", {"step": step}, {"step": step})

    def checkpoint(self, step):
        """The blocking part of saving step `step`; call commit(step) when it is durable."""
        step = _int_in("step", step, 0, INT64_MAX)

        @contextlib.contextmanager
        def span():
            with self._span("ckpt", {"step": step}, {"step": step}):
                yield
            self._saved.add(step)

        return span()

    def commit(self, step):
        """Step `step`'s checkpoint is durable and can be restored (fsynced)."""
        step = _int_in("step", step, 0, INT64_MAX)
        if step not in self._saved:
            raise ValueError("commit(%d) without a finished checkpoint(%d) in this log" % (step, step))
        self._saved.discard(step)
        self._write("ckpt_commit", durable=True, step=step)

    def restore(self, step):
        """Loading a checkpoint; `step` is the step the run resumes after."""
        step = _int_in("step", step, 0, INT64_MAX)
        return self._span("restore", None, {"step": step})

    def eval(self):
        return self._span("eval")

    def data_wait(self):
        """A synchronous wait for input data."""
        return self._span("data_wait")

    def fault(self, kind, **fields):
        """A failure stopped training (fsynced). `kind` names it: "nccl_timeout", "oom", ..."""
        if not isinstance(kind, str) or not kind:
            raise ValueError("kind must be a non-empty string, got %r" % (kind,))
        if "rank" in fields:
            raise ValueError("['rank'] is set by the log, not by the caller")
        self._write("fault_detected", durable=True, kind=kind, **fields)
        self._faulted = True
        self._open.clear()

    def log_event(self, event, **fields):
        """Appends any event of the schema with the caller's fields: the interface of InlineProbe's
        log_event, so ReplicaCheck(event_log=log) writes the check's probe_begin/probe_end and
        sdc_detected into this file, on this clock. "rank" is the log's own (a suspect is named by
        `suspect_rank`). fault_detected, sdc_detected and ckpt_commit are fsynced."""
        if "rank" in fields:
            raise ValueError("['rank'] is set by the log, not by the caller")
        if event not in _EVENTS:
            raise ValueError("unknown event %r (docs/goodput.md)" % (event,))
        if event in _NEEDS_STEP or "step" in fields:
            if "step" not in fields:
                raise ValueError("%s needs step" % event)
            _int_in("step", fields["step"], 0, INT64_MAX)
        if "last_good_step" in fields:
            _int_in("last_good_step", fields["last_good_step"], 0, INT64_MAX)
        self._write(event, durable=event in _DURABLE, **fields)

    def close(self):
        """Fsyncs and closes the file; later events raise ValueError."""
        with self._lock:
            if self._fd is None:
                return
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            self.close()

