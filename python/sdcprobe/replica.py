"""ReplicaCheck: compares the training state of data-parallel replicas every few steps (docs/replica.md).

    check = ReplicaCheck(group=None, every="auto", event_log="events-rank%d.jsonl" % rank, on_sdc="raise")
    ...
    optimizer.step()
    check.step(step, model.parameters())    # the optimizer's state may follow, e.g. [params, optim.state_dict()]
    ...
    check.before_commit(step, model.parameters())  # before logging the save's ckpt_commit

Each rank digests its tensors where they live (a kernel of libsdcprobe on the current CUDA stream, or
the same digest on the host), combines the digests in order, and exchanges 24 bytes with every
replica of `group`. Replicas whose digest differs from the majority are named; with no majority (two
replicas that differ) the inline probe catalogue runs on every device of the group and blames the
ones that fail, else the re-run after the alarm may decide (attribute()).
"""

import collections.abc
import ctypes
import json
import os
import socket
import statistics
import sys
import time

from sdcprobe import _library
from sdcprobe._exchange import Exchange
from sdcprobe.goodput_log import GoodputLog
from sdcprobe.inline import (INT64_MAX, InlineProbe, SDCDetected, SDCProbeError, _check, _int_in,
                             _library_handle)

# The same calibration as the inline probe (scheduler/inline/inline_probe.hpp): with every="auto",
# the first check runs at the first step, the next after this many steps, and from then on the
# planner's cadence, chosen again after each check from the median of the last kStepWindow step
# times and the mean of the last kCostWindow check times.
CALIBRATION_STEPS = 5
STEP_WINDOW = 64
COST_WINDOW = 4
BUDGET_MARGIN = 0.9  # kBudgetMargin: the budget is aimed at with this margin

# One row per tensor in the combined table: the digest's two words and the byte count.
_ROW_WORDS = 3


def _torch():
    import torch
    import torch.distributed
    return torch


def _as_uint64(value):
    return value & (2**64 - 1)


def _host_digest(pointer, nbytes):
    out = _library.Digest()
    _check(_library_handle().sdc_digest_host(ctypes.c_void_p(pointer), nbytes, ctypes.byref(out)))
    return out.lo, out.hi


def _flat_tensors(tensors):
    """The tensors in `tensors`, in order: tensors, and sequences or mappings of them (a mapping in
    sorted key order, as optimizer.state_dict() nests them); other values (ints, strings) are skipped."""
    torch = _torch()
    if isinstance(tensors, torch.Tensor):
        yield tensors
    elif isinstance(tensors, collections.abc.Mapping):
        for key in sorted(tensors, key=repr):
            yield from _flat_tensors(tensors[key])
    elif isinstance(tensors, collections.abc.Iterable) and not isinstance(tensors, (str, bytes)):
        for item in tensors:
            yield from _flat_tensors(item)


def _local(tensor):
    """A DTensor's local shard (FSDP2, tensor parallelism), or the tensor itself: each rank digests
    the bytes it holds."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) and hasattr(tensor, "placements") else tensor


def _readable(tensor):
    """The tensor's elements, contiguous and 8-byte aligned, as the digest kernel reads them."""
    t = tensor.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.data_ptr() % 8 != 0:
        t = t.clone()
    return t


def tensor_digest_table(tensors, stream=None):
    """One row (lo, hi, bytes) per tensor, as a list of int triples: the digest of each tensor's
    bytes where it lives (CUDA: enqueued on `stream`, by default the tensor's device's current
    stream; the table is read back once at the end)."""
    torch = _torch()
    lib = _library_handle()
    rows = []
    on_gpu = collections.defaultdict(list)  # device -> [(row, tensor)]
    for tensor in _flat_tensors(tensors):
        tensor = _local(tensor)
        nbytes = tensor.numel() * tensor.element_size()
        rows.append([0, 0, nbytes])
        if nbytes == 0:
            continue  # the digest of nothing is {0, 0}
        if tensor.device.type == "cpu":
            t = _readable(tensor)
            rows[-1][0], rows[-1][1] = _host_digest(t.data_ptr(), nbytes)
        elif tensor.device.type == "cuda":
            on_gpu[tensor.device].append((len(rows) - 1, tensor))
        else:
            raise SDCProbeError("tensor on %s: ReplicaCheck digests CPU and CUDA tensors" % tensor.device)
    for device, entries in on_gpu.items():
        s = stream if stream is not None else torch.cuda.current_stream(device)
        if not hasattr(s, "cuda_stream"):
            s = torch.cuda.ExternalStream(s, device=device)
        with torch.cuda.stream(s):
            # A contiguous or aligned copy is made here, on the digest's stream, so the kernel that
            # reads it is ordered after it; the copies stay alive until the table is read back.
            entries = [(row, _readable(t)) for row, t in entries]
            out = torch.empty((len(entries), 2), dtype=torch.int64, device=device)
            for slot, (_, t) in enumerate(entries):
                _check(lib.sdc_digest_cuda(ctypes.c_void_p(t.data_ptr()), t.numel() * t.element_size(),
                                           ctypes.c_void_p(out[slot].data_ptr()), ctypes.c_void_p(s.cuda_stream)))
            host = out.cpu().tolist()  # waits for the kernels, in the stream's order
        for slot, (row, _) in enumerate(entries):
            rows[row][0], rows[row][1] = _as_uint64(host[slot][0]), _as_uint64(host[slot][1])
    return rows


def combine_digests(rows):
    """The digests combined in order: the digest of the table of (lo, hi, bytes) rows as 64-bit
    words. Each word's term depends on its index, so swapping two tensors changes the result."""
    words = (ctypes.c_uint64 * (max(1, len(rows)) * _ROW_WORDS))()
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            words[i * _ROW_WORDS + j] = _as_uint64(value)
    return _host_digest(ctypes.addressof(words), ctypes.sizeof(words))


def state_digest(tensors, stream=None):
    """The combined 128-bit digest of `tensors` as (lo, hi)."""
    return combine_digests(tensor_digest_table(tensors, stream))


def device_identity(backend, device):
    """{"backend", "index", "name", "uuid", "pci_bus_id"} of a device, from the library."""
    lib = _library_handle()
    buf = ctypes.create_string_buffer(1024)
    needed = ctypes.c_size_t(0)
    status = lib.sdc_device_identity(backend.encode(), device, buf, len(buf), ctypes.byref(needed))
    if status == 3:  # SDC_ERR_BUFFER_TOO_SMALL
        buf = ctypes.create_string_buffer(needed.value)
        status = lib.sdc_device_identity(backend.encode(), device, buf, len(buf), ctypes.byref(needed))
    _check(status)
    return json.loads(buf.value.decode())


def merge_group_verdicts(verdict, gathered):
    """The job's verdict from every vote group's alarm (`gathered`: one entry per rank, None where
    its group passed): "sdc" when any group decided, the suspects of decided groups first (the
    first names suspect_rank, never a member of an undecided vote), each by rank, and the earliest
    last good step."""
    found = list({repr(v["suspects"]): v for v in gathered if v is not None}.values())  # one per group
    ordered = sorted(((v["verdict"] != "sdc", s["rank"]), s) for v in found for s in v["suspects"])
    return dict(verdict,
                verdict="sdc" if any(v["verdict"] == "sdc" for v in found) else "inconclusive",
                suspects=[s for _, s in ordered],
                last_good_step=min(v["last_good_step"] for v in found),
                groups=len(found))


def detected_fields(verdict, check):
    """The sdc_detected event of a failing verdict. An undecided vote ("inconclusive": two replicas
    that differ, all suspect) names no suspect_rank or device: automation keyed on them would evict
    a healthy node half the time."""
    fields = {"step": verdict["step"], "check": check, "verdict": verdict["verdict"],
              "suspects": verdict["suspects"]}
    if verdict.get("attribution"):
        fields["attribution"] = verdict["attribution"]
    if verdict["verdict"] == "sdc":
        first = verdict["suspects"][0]
        fields.update(device=first["device"], suspect_rank=first["rank"])
        if "mesh" in first:
            fields["mesh"] = first["mesh"]
        if "cause" in first:
            fields["cause"] = first["cause"]
    if verdict["last_good_step"] >= 0:
        fields["last_good_step"] = verdict["last_good_step"]
    return fields


def mesh_vote_group(mesh, dp_dims):
    """(process group, mesh coordinate) of this rank's vote: the ranks of `mesh` that differ from it
    only along `dp_dims`, i.e. those at its tensor-, pipeline- and context-parallel coordinate.
    Every rank of the world builds every group (dist.new_group is collective), so the mesh must
    span the world."""
    dist = _torch().distributed
    names = list(getattr(mesh, "mesh_dim_names", None) or ())
    if not hasattr(mesh, "get_coordinate") or not names:
        raise SDCProbeError("mesh= takes a torch.distributed.device_mesh.DeviceMesh with mesh_dim_names "
                            "(torch 2.2 or later), got %r" % (mesh,))
    if isinstance(dp_dims, str) or not dp_dims or any(d not in names for d in dp_dims):
        raise ValueError("dp_dims must name dimensions of the mesh %s, got %r" % (names, dp_dims))
    layout = mesh.mesh
    if layout.numel() != dist.get_world_size():
        raise SDCProbeError("mesh= must span the world (%d ranks), it has %d" % (dist.get_world_size(),
                                                                                  layout.numel()))
    keep = [i for i, n in enumerate(names) if n not in dp_dims]
    dp = [names.index(d) for d in dp_dims]
    size = 1
    for i in dp:
        size *= layout.shape[i]
    mine = None
    for ranks in layout.permute(*keep, *dp).reshape(-1, size).tolist():
        group = dist.new_group(ranks)
        if dist.get_rank() in ranks:
            mine = group
    return mine, dict(zip(names, mesh.get_coordinate()))


def _named(s):
    """A suspect as the messages name it: rank, host, mesh coordinate, UUID, PCI bus id."""
    where = ",".join("%s=%d" % kv for kv in s["mesh"].items()) if "mesh" in s else None
    return "rank %d (%s)" % (s["rank"], ", ".join(x for x in (s["host"], where and "mesh " + where, s["device"],
                                                                s["pci_bus_id"]) if x))


def choose_every(step_s, check_s, budget, sdc_rate=None, ranks=1):
    """The inline probe's "auto" cadence (the planner's optimum within `budget`) for a check made on
    all `ranks` devices of a job at once: their SDC rate is `ranks` times one device's."""
    every = ctypes.c_int64(0)
    _check(_library_handle().sdc_choose_job_every(step_s, check_s, sdc_rate or 0.0, budget, ranks,
                                                  ctypes.byref(every)))
    return every.value


def _signed(word):
    return word - 2**64 if word >= 2**63 else word


# What a re-run tells of a suspect (docs/replica.md, "Re-run before eviction"), the worst first.
ATTRIBUTIONS = ("persistent", "transient", "not_hardware")


def attribute(digests, reruns, suspects, classes=None):
    """{position: attribution} for each suspect, from every replica's first digest and its re-run's
    on the same inputs. A healthy peer (not a suspect) whose re-run differs from its first answer, or
    no majority and two replicas that do not reproduce themselves: the computation itself is not
    reproducible, "not_hardware" (a nondeterministic op), never an eviction. Else the suspect's
    re-run gives the peers' answer: "transient"; a wrong answer again: "persistent". With no majority
    (every replica of the class a suspect), the strict majority of the re-runs is the right answer:
    a suspect whose first answer was it is cleared (left out of the result), one whose re-run gives
    it is "transient", the others "persistent". With no such majority either, nothing is decided (the
    vote stays inconclusive): a suspect that does not reproduce itself is "transient", the others
    "persistent". `classes`: the equivalence class of each position (the canary's), within which
    answers are compared."""
    def same_class(i, j):
        return classes is None or classes[i] == classes[j]

    out = {}
    for i in suspects:
        members = [j for j in range(len(digests)) if same_class(i, j)]
        peers = [j for j in members if j not in suspects]
        unstable = [j for j in members if reruns[j] != digests[j]]
        if any(j in unstable for j in peers) or (not peers and len(unstable) > 1):
            out[i] = "not_hardware"
        elif peers:
            right = collections.Counter(digests[j] for j in peers).most_common(1)[0][0]
            out[i] = "transient" if reruns[i] == right else "persistent"
        else:
            right = _strict_majority([reruns[j] for j in members])
            if right is None:
                out[i] = "transient" if i in unstable else "persistent"
            elif digests[i] != right:
                out[i] = "transient" if reruns[i] == right else "persistent"
    return out


def _strict_majority(answers):
    """The answer given by more than half of `answers`, or None."""
    answer, n = collections.Counter(answers).most_common(1)[0]
    return answer if 2 * n > len(answers) else None


def decided(verdict, suspects, attributions, classes=None):
    """(verdict, suspects) once the re-run has attributed the suspects (attribute()): those it
    cleared are left out, and an inconclusive vote becomes "sdc" when the re-runs decided it, i.e.
    cleared a replica of every class that still has a suspect."""
    if attributions is None:
        return verdict, suspects
    kept = [i for i in suspects if i in attributions]
    if verdict == "inconclusive" and kept:
        cleared = [None if classes is None else classes[i] for i in suspects if i not in attributions]
        if all((None if classes is None else classes[i]) in cleared for i in kept):
            verdict = "sdc"
    return verdict, kept


class ReplicaCheck:
    """Checks that the replicas of `group` (default: the world, as in DDP) hold bitwise identical
    state, every `every` steps ("auto": the planner's cadence for the measured check cost, within
    `budget` of step time).

    mesh, dp_dims: instead of group, a DeviceMesh (torch 2.2 or later) and the names of its
    data-parallel dimensions whose ranks hold the same state, e.g. HSDP's ("dp_replicate",): the
    vote runs among the ranks that differ only along dp_dims. Each member then carries its mesh
    coordinate.

    group must name true replicas (docs/replica.md): ranks whose tensors are bitwise identical when
    nothing is wrong, e.g. DDP's world or HSDP's replicate dimension, never FSDP/ZeRO shards.

    event_log: a path (this rank's JSON Lines file) or an object with log_event(event, **fields),
    e.g. an InlineProbe. The check's time is logged as probe_begin/probe_end (probe "replica"); a
    mismatch as sdc_detected with last_good_step, the suspects' ranks and devices.

    on_sdc: "raise" raises SDCDetected, "stop" sets should_stop, or a callable(verdict).

    probe_options: InlineProbe options (probes, inject, seed) for the probe catalogue that breaks a
    tie between replicas.

    ranks: the number of devices in the job, for every="auto" (all of them are checked at the same
        step, and a fault on any corrupts the model, so the job's SDC rate is `ranks` times one
        device's); None: the world size of the process group.

    On a mesh a verdict is the job's: every vote group's alarm is agreed over the world, so every
    rank reports the same suspects and acts at the same check. Before it is reported the check is
    re-run on every replica (docs/replica.md, "Re-run before eviction"); each suspect, and the
    verdict, carry an attribution: "persistent" and "transient" act as on_sdc says, unless
    transient="continue" (then should_restore is set, and the loop goes back to last_good_step);
    "not_hardware" (the computation does not reproduce on a healthy peer) is the verdict
    "not_hardware": no sdc_detected, no stop.
    """

    def __init__(self, group=None, every="auto", event_log=None, on_sdc="raise", budget=0.01, sdc_rate=None,
                 probe_options=None, mesh=None, dp_dims=None, ranks=None, transient="stop"):
        if on_sdc not in ("raise", "stop") and not callable(on_sdc):
            raise ValueError("on_sdc must be 'raise', 'stop' or a callable")
        if transient not in ("stop", "continue"):
            raise ValueError("transient must be 'stop' (act as on_sdc says) or 'continue', got %r" % (transient,))
        if every == "auto" or every is None:
            self._every = None
        else:
            self._every = _int_in("every", every, 1, INT64_MAX)
        if not 0 < budget <= 1:
            raise ValueError("budget must be in (0, 1], got %r" % (budget,))
        torch = _torch()
        dist = torch.distributed
        if not dist.is_available() or not dist.is_initialized():
            raise SDCProbeError("ReplicaCheck needs torch.distributed initialised (init_process_group)")
        self._dist = dist
        coordinate = None
        if mesh is not None:
            if group is not None:
                raise ValueError("pass group= or mesh=, not both")
            group, coordinate = mesh_vote_group(mesh, tuple(dp_dims or ()))
        elif dp_dims is not None:
            raise ValueError("dp_dims needs mesh=")
        # With a mesh, the groups must check on the same steps: a canary's forward runs collectives
        # (tensor parallelism) that span other groups than the vote.
        self._world_agrees = mesh is not None
        self.group = group
        self.on_sdc = on_sdc
        self.transient = transient
        self.job_ranks = dist.get_world_size() if ranks is None else _int_in("ranks", ranks, 1, INT64_MAX)
        self.budget = budget
        self.sdc_rate = sdc_rate
        self.probe_options = dict(probe_options or {})
        self._exchange = Exchange(dist, group)
        self.rank = self._exchange.rank
        self.ranks = self._exchange.ranks
        if self._exchange.cuda:
            self._backend, self._device = "cuda", torch.cuda.current_device()
        else:
            self._backend, self._device = "cpu", 0
        identity = device_identity(self._backend, self._device)
        me = {"rank": self.rank, "host": socket.gethostname(), "device": identity["uuid"],
              "pci_bus_id": identity["pci_bus_id"]}
        if coordinate is not None:
            me["mesh"] = coordinate
        self.members = self._exchange.gather_objects(me)  # in group order: who each replica is
        self._log = GoodputLog(event_log, rank=self.rank) if isinstance(event_log, (str, os.PathLike)) else event_log
        self._owns_log = isinstance(event_log, (str, os.PathLike))
        self._next_due = None  # unknown until the first step(): see _align
        self._last_call_end = None
        self._last_call_step = None
        self._step_times = collections.deque(maxlen=STEP_WINDOW)
        self._costs = collections.deque(maxlen=COST_WINDOW)
        self.every = self._every
        self.last_good_step = -1
        self.checks = 0
        self.should_stop = False
        self.should_restore = False  # a transient fault with transient="continue": go back to last_good_step
        self.verdict = {"verdict": "none", "last_good_step": -1}
        self._reported = False
        self._why = "every %d steps, as given" % self._every if self._every is not None else ""

    # ---- cadence ---------------------------------------------------------------------------------

    def _proposal(self):
        """This rank's next interval; every replica adopts the largest proposal, so they stay in step."""
        if self._every is not None:
            return self._every
        if not self._costs or len(self._step_times) < CALIBRATION_STEPS:
            self._why = "calibrating: %d steps until the step time is measured" % CALIBRATION_STEPS
            return CALIBRATION_STEPS
        cost = max(sum(self._costs) / len(self._costs), 1e-9)
        step_s = statistics.median(self._step_times)
        every = choose_every(step_s, cost, self.budget, self.sdc_rate, self.job_ranks)
        # The bounds sdc_choose_job_every takes the larger of (scheduler/inline/inline_probe.cpp).
        budget_steps = cost / (BUDGET_MARGIN * self.budget * step_s)
        self._why = ("every %d steps proposed by rank %d: step %.4g s (median of %d), check %.4g s (mean of %d), "
                     "SDC rate %s per device-day on %d ranks, budget %.3g: the budget allows one check per %.4g "
                     "steps, the planner's optimum for the job is the rest; the largest proposal of the replicas "
                     "is adopted"
                     % (every, self.rank, step_s, len(self._step_times), cost, len(self._costs),
                        "default" if self.sdc_rate is None else "%.3g" % self.sdc_rate, self.job_ranks,
                        self.budget, budget_steps))
        return every

    def _align(self, step):
        """The first due step at or after `step`: a multiple of the fixed interval (checks fall on
        the same global steps after a restore, as Lightning's every_n_train_steps saves do); with
        "auto" before the first check, `step` itself (the check's cost must be measured)."""
        if self.every is None:
            return step
        return -(-step // self.every) * self.every

    def _time_step(self, step, now):
        if self._last_call_end is not None and step > self._last_call_step:
            self._step_times.append((now - self._last_call_end) / (step - self._last_call_step))
        self._last_call_step = step

    # ---- the check -------------------------------------------------------------------------------

    def _agreed(self, words):
        """The element-wise maximum of `words` over the world when the check runs on a mesh (every
        vote group adopts the same cadence and decisions), else `words`."""
        if not self._world_agrees:
            return words
        return self._exchange.maximum(words, world=True)

    def _failure(self, error):
        """This rank's word in the agreement on failures: its rank + 1 when its part of the check
        raised, else 0 (the maximum over the ranks names the last that failed)."""
        return self.rank + 1 if error is not None else 0

    def _raise_failure(self, step, probe, error, failed):
        """Raises on every rank once the ranks agree that one failed (`failed`, the maximum of their
        _failure words): the failing rank its own error, the others an SDCProbeError naming it. So a
        rank's error ends every rank at the same check, and no rank, of its vote group or another
        group of the mesh, is left waiting in the next collective."""
        if not failed:
            return
        self._event("probe_end", probe=probe, verdict="error", step=step, blocking=True)
        if error is not None:
            raise error
        raise SDCProbeError("the %s check at step %d failed on rank %d (its own error says why): every rank "
                            "stops with it" % (probe, step, failed - 1))

    def _probe_catalogue_fails(self):
        """Runs the inline probe catalogue once on this rank's device; True if it found a fault."""
        options = dict(self.probe_options)
        options.setdefault("backend", self._backend)
        options.setdefault("device", self._device)
        try:
            probe = InlineProbe(every=1, **options)
        except SDCProbeError as e:
            # Every replica must reach the exchange of results, or the others would wait forever.
            sys.stderr.write("sdcprobe: the probe catalogue could not run on rank %d: %s\n" % (self.rank, e))
            return False
        try:
            probe.step(0)
        finally:
            probe.close()
        return probe.verdict["verdict"] == "fail"

    def _vote(self, digests):
        """(verdict, suspect positions, probe failures): the minority of a strict majority, else the
        replicas whose devices fail the probe catalogue, else all of them ("inconclusive")."""
        counts = collections.Counter(digests)
        if len(counts) == 1:
            return "pass", [], []
        (top, n), (_, second) = counts.most_common(2)
        if n > second:
            return "sdc", [i for i, d in enumerate(digests) if d != top], []
        # No majority: every replica tests its own device, and they share the results.
        failed = [i for i, (flag,) in enumerate(self._exchange.gather([int(self._probe_catalogue_fails())])) if flag]
        if failed:
            return "sdc", failed, failed
        return "inconclusive", list(range(len(digests))), []

    def _event(self, event, **fields):
        if self._log is not None:
            self._log.log_event(event, **fields)

    def step(self, step, tensors, stream=None):
        """Checks the replicas on a due step (every replica must call it with the same steps) and
        returns the verdict, or None when the step is not due. `tensors`: tensors, or sequences and
        mappings of them, in the same order on every replica."""
        step = _int_in("step", step, 0, INT64_MAX)
        now = time.perf_counter()
        if self._next_due is None or (self._last_call_step is not None and step <= self._last_call_step):
            self._next_due = self._align(step)  # the first call, or a restore within this process
        self._time_step(step, now)
        if step < self._next_due:
            self._last_call_end = time.perf_counter()
            return None
        return self._check(step, tensors, stream)

    def before_commit(self, step, tensors, stream=None):
        """Checks the state about to be saved at `step`, whatever the cadence, and returns the
        verdict; log the save's ckpt_commit only after it passes. A check already made at this step
        (the cadence's) is not repeated. Every replica must call it at the same saves. A mismatch
        acts as `on_sdc` says, so with "raise" the save never completes."""
        step = _int_in("step", step, 0, INT64_MAX)
        if self.verdict.get("step") == step:
            return self.verdict
        self._time_step(step, time.perf_counter())
        return self._check(step, tensors, stream)

    def _check(self, step, tensors, stream):
        self._event("probe_begin", probe="replica", step=step, blocking=True)
        start = time.perf_counter()
        tensors = list(_flat_tensors(tensors))  # read twice when a re-run is needed
        error = None
        try:
            lo, hi = state_digest(tensors, stream)
        except Exception as e:  # raised below, on every rank together
            error, lo, hi = e, 0, 0
        proposal, failed = self._agreed([self._proposal(), self._failure(error)])
        if self._world_agrees:
            self._raise_failure(step, "replica", error, failed)
        gathered = self._exchange.gather([_signed(lo), _signed(hi), proposal, self._failure(error)])
        self._raise_failure(step, "replica", error, max(w[3] for w in gathered))
        digests = [(_as_uint64(w[0]), _as_uint64(w[1])) for w in gathered]
        self.every = max(w[2] for w in gathered)
        self._next_due = (step // self.every + 1) * self.every
        verdict, suspects, probe_failures = self._vote(digests)
        attributions, rerun_s = self._rerun(step, "replica", verdict, digests,
                                            lambda: state_digest(tensors, stream), suspects)
        verdict, suspects = decided(verdict, suspects, attributions)
        seconds = time.perf_counter() - start
        self._costs.append(seconds - rerun_s)  # the re-run follows an alarm only: not the steady cost
        self.checks += 1
        self.verdict = self._job_verdict({
            "verdict": verdict,
            "step": step,
            "last_good_step": self.last_good_step,
            "replicas": len(digests),
            "digest": "%016x%016x" % (hi, lo),
            "suspects": [dict(self.members[i], attribution=attributions[i]) if attributions else self.members[i]
                         for i in suspects],
            "probe_failures": [self.members[i]["rank"] for i in probe_failures],
            "seconds": seconds,
            "rerun_seconds": rerun_s,
            "every": self.every,
            "auto": self._every is None,
            "why": self._why,
        }, attributions is not None)
        self._settle("replica")
        self._last_call_end = time.perf_counter()
        return self.verdict

    # ---- one verdict for the job -----------------------------------------------------------------

    def _rerun(self, step, probe, verdict, digests, again, suspects, classes=None):
        """Once a vote anywhere in the job found a mismatch (on a mesh agreed over the world: a
        canary's forward spans vote groups, so every rank re-runs or none does), every replica runs
        the check again on the same inputs (`again()` -> its digest) and each suspect is attributed
        (attribute()). Returns ({position: attribution} of this group's suspects, the re-run's
        seconds), or (None, 0.0) when nothing was found."""
        alarm = int(verdict in ("sdc", "inconclusive") and not self._reported)
        if not self._agreed([alarm])[0]:
            return None, 0.0
        start = time.perf_counter()
        error, again_digest = None, (0, 0)
        try:
            again_digest = again()
        except Exception as e:  # raised below, on every rank together
            error = e
        failed = self._agreed([self._failure(error)])[0]
        if self._world_agrees:
            self._raise_failure(step, probe, error, failed)
        gathered = self._exchange.gather([_signed(again_digest[0]), _signed(again_digest[1]), self._failure(error)])
        self._raise_failure(step, probe, error, max(w[2] for w in gathered))
        reruns = [(_as_uint64(w[0]), _as_uint64(w[1])) for w in gathered]
        return attribute(digests, reruns, suspects, classes), time.perf_counter() - start

    def _job_verdict(self, verdict, alarm):
        """The job's verdict at this check: on a mesh, when any group found a mismatch (`alarm`,
        agreed over the world), every group's alarm gathered over the world, so every rank names the
        same suspects, with their mesh coordinates, and the same last good step. The worst
        attribution of the suspects is the verdict's; "not_hardware" makes the verdict that."""
        mine = verdict["verdict"] in ("sdc", "inconclusive")
        if alarm and self._world_agrees:
            verdict = merge_group_verdicts(verdict, self._exchange.gather_objects(verdict if mine else None, world=True))
        if alarm and verdict["suspects"]:
            verdict["attribution"] = min((s["attribution"] for s in verdict["suspects"]), key=ATTRIBUTIONS.index)
            if verdict["attribution"] == "not_hardware":
                verdict["verdict"] = "not_hardware"
        elif verdict["verdict"] == "pass" and not self._reported:
            self.last_good_step = verdict["last_good_step"] = verdict["step"]
        return verdict

    def _settle(self, probe):
        """Logs the check's end and acts on the job's verdict, the same on every rank."""
        v = self.verdict
        alarm = v["verdict"] in ("sdc", "inconclusive", "not_hardware") and not self._reported
        self._event("probe_end", probe=probe, step=v["step"], blocking=True,
                    verdict="fail" if v["verdict"] in ("sdc", "inconclusive") else v["verdict"])
        if not alarm:
            return
        if v["verdict"] == "not_hardware":
            self._not_hardware()
            return
        self._event("sdc_detected", **detected_fields(v, probe))
        if v.get("attribution") == "transient" and self.transient == "continue":
            self.should_restore = True
            sys.stderr.write("sdcprobe: a transient fault at step %d (the re-run gave the right answer): training "
                             "goes back to the last good step %d\n" % (v["step"], v["last_good_step"]))
            return
        self._reported = True
        if self.on_sdc == "raise":
            raise SDCDetected(self._message())
        if self.on_sdc == "stop":
            self.should_stop = True
        else:
            self.on_sdc(dict(v))

    def _not_hardware(self):
        """The replicas' answers differ, and a healthy replica does not reproduce its own: no device
        is to blame, and nothing stops (the check goes on)."""
        sys.stderr.write("sdcprobe: the replicas' states differ at step %d, but a re-read does not reproduce them "
                         "(the state changed during the check?): not attributed to hardware\n" % self.verdict["step"])

    def _message(self):
        v = self.verdict
        what = "replicas differ, inconclusive, all suspect: " if v["verdict"] == "inconclusive" else \
            "replicas differ, suspect: "
        return "silent data corruption at step %d (last good step %d, %s): %s%s" % (
            v["step"], v["last_good_step"], v.get("attribution", "not re-run"), what,
            ", ".join(_named(s) for s in v["suspects"]))

    def close(self):
        if self._owns_log and self._log is not None:
            self._log.close()
        self._log = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
