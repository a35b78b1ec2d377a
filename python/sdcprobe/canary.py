"""CanaryCheck: every replica runs forward and backward on the same fixed batch and compares the
gradients bit for bit, which catches wrong compute in the model's own kernels (docs/replica.md,
"Canary step").

    canary = CanaryCheck(model.module, loss_fn, batch=None, every="auto", event_log=log, on_sdc="raise")
    for step, batch in enumerate(loader):
        train_step(batch)                   # forward, backward, all-reduce, optimizer.step()
        canary.step(step, batch)            # the first real batch becomes the canary batch

loss_fn(module, batch) returns the scalar loss. The digest, the exchange and the cadence are the
replica check's (sdcprobe.replica); the vote is the replica check's within each equivalence class
of devices and libraries, so replicas that round differently are never compared.
"""

import collections
import contextlib
import sys
import time

from sdcprobe.callback import before_every_save
from sdcprobe.inline import INT64_MAX, SDCDetected, SDCProbeError, SDCStop, _int_in
from sdcprobe.replica import (ReplicaCheck, _as_uint64, _local, _named, _signed, _torch, combine_digests,
                              decided, device_identity, tensor_digest_table)

# The seed of the random generators inside the canary (dropout masks): the same on every replica
# and every run; the training's own generators are saved and restored around it.
CANARY_SEED = 0x5D_C0_CA_AA

DETERMINISM_FIX = ("make the model deterministic: torch.use_deterministic_algorithms(True), and on CUDA "
                   "CUBLAS_WORKSPACE_CONFIG=:4096:8 in the environment before cuBLAS starts")


def _map_batch(fn, batch):
    """`batch` with fn applied to each tensor, through tuples, lists and dicts; other values kept."""
    torch = _torch()
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, dict):
        return {k: _map_batch(fn, v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(_map_batch(fn, v) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_map_batch(fn, v) for v in batch)
    return batch


def equivalence_class(backend, device):
    """What must be equal for two replicas' kernels to round alike: the device model, torch and its
    CUDA/cuDNN libraries, and on the CPU the thread count (it sets the reductions' split)."""
    torch = _torch()
    key = {"device": device_identity(backend, device)["name"], "torch": torch.__version__}
    if backend == "cuda":
        key["cuda"] = torch.version.cuda
        key["cudnn"] = torch.backends.cudnn.version()
        key["capability"] = list(torch.cuda.get_device_capability(device))
    else:
        key["threads"] = torch.get_num_threads()
    return key


def _cudnn_heuristics():
    """cuDNN with benchmark off for the canary's run. With torch.backends.cudnn.benchmark on, each
    replica times the candidate algorithms and keeps the fastest, which may differ between GPUs of
    one class: each replica is deterministic on its own, so the double run at the first check
    agrees, and a later vote would blame a healthy GPU. Off, cuDNN's heuristic picks the same
    algorithm for the same shapes, GPU model and library on every replica."""
    cudnn = _torch().backends.cudnn
    kept = {"benchmark_limit": cudnn.benchmark_limit} if hasattr(cudnn, "benchmark_limit") else {}
    return cudnn.flags(enabled=cudnn.enabled, benchmark=False, deterministic=cudnn.deterministic,
                       allow_tf32=cudnn.allow_tf32, **kept)


def _fsdp_groups(module):
    """The FSDP2 (fully_shard) parameter groups under `module`, whose gradient sync the canary turns
    off for its run."""
    groups = []
    for m in module.modules():
        state = getattr(m, "_get_fsdp_state", None)
        if callable(state) and hasattr(m, "set_requires_gradient_sync"):
            s = state()
            groups += [g for g in getattr(s, "_fsdp_param_groups", None) or [getattr(s, "_fsdp_param_group", None)]
                       if g is not None]
    return groups


class _Unsharded:
    """Records, during one forward, the parameters each module computes with: under FSDP2 the
    unsharded ones that fully_shard's pre-forward hook swaps in (the same on every data-parallel
    rank), under tensor parallelism the rank's local shards, else the module's own. Their bytes are
    digested there, before FSDP2 frees them again."""

    _FSDP_SYNC = ("reduce_grads", "all_reduce_grads", "_post_backward_pending")

    def __init__(self, module):
        self.module = module
        self.names, self.params, self.rows = [], [], []
        self._seen = set()  # ids of self.params: a module called twice records its parameters once
        self._hooks = []
        self._sync = []

    def _record(self, prefix):
        def hook(m, inputs):
            for name, p in m.named_parameters(recurse=False):
                if p.requires_grad and id(p) not in self._seen:
                    self._seen.add(id(p))
                    self.names.append("gradient of " + prefix + ("." if prefix else "") + name)
                    self.params.append(p)
                    self.rows += tensor_digest_table([p])
        return hook

    def __enter__(self):
        # After fully_shard's own pre-forward hook (it is prepended), so the parameters are unsharded.
        self._hooks = [m.register_forward_pre_hook(self._record(name)) for name, m in self.module.named_modules()]
        # Gradient sync off: the local gradients are compared, not reduced; the groups' flags are
        # put back exactly as they were after the run.
        self._sync = [(g, {a: getattr(g, a) for a in self._FSDP_SYNC if hasattr(g, a)})
                      for g in _fsdp_groups(self.module)]
        if self._sync:
            self.module.set_requires_gradient_sync(False)
        return self

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()
        for g, flags in self._sync:
            for a, v in flags.items():
                setattr(g, a, v)


class CanaryCheck(ReplicaCheck):
    """On due steps every replica of `group` computes the loss and gradients of `module` on the same
    batch with its current parameters, digests them where they live and votes as ReplicaCheck does.

    module: the model inside DDP (ddp.module), or the model itself without DDP. Its forward and
        backward run outside DDP's hooks: no all-reduce, no .grad, no optimizer. Each run uses the
        group's first rank's buffers, and the module's own (batch norm's running statistics) are
        restored after it; the random generators are forked and seeded alike on every replica.
        Training goes on exactly as without the canary.
    loss_fn: loss_fn(module, batch) -> a scalar loss tensor.
    batch: the canary batch, identical on every replica; None: the first batch given to step(), as
        the group's first rank has it (broadcast), cut to its first `samples` rows (all by default).
    every, budget, sdc_rate, ranks, event_log, on_sdc, transient, probe_options: as ReplicaCheck;
        the check's time is blocking probe time (probe "canary"), a mismatch an sdc_detected with
        check "canary". Before a mismatch is reported every replica runs the canary again on the
        same parameters, buffers and batch: the suspect's answer right this time is "transient",
        wrong again "persistent"; a healthy peer that does not reproduce its own answer makes it
        "not_hardware", and the canary is disabled as at the first check.

    mesh, dp_dims: instead of group, a DeviceMesh (torch 2.2 or later) and its data-parallel
        dimensions, e.g. ("dp",): the vote runs among the ranks that differ only along dp_dims (the
        same tensor- and pipeline-parallel coordinate). The gradients compared are those each rank
        computes with the parameters its forward uses: under FSDP2 (fully_shard) the unsharded
        ones, with gradient sync off for the run; under tensor parallelism its local shards. Every
        rank of the mesh must call step() at the same steps: the forward's collectives span the
        groups, and the groups adopt one cadence.

    At the first check every replica runs the canary twice; when any replica's two runs differ, its
    kernels are not deterministic and the canary is disabled on every replica with a message naming
    the first tensor that differed (verdict "disabled"): never a false alarm.
    """

    def __init__(self, module, loss_fn, batch=None, group=None, every="auto", budget=0.01, sdc_rate=None,
                 event_log=None, on_sdc="raise", samples=None, probe_options=None, mesh=None, dp_dims=None,
                 ranks=None, transient="stop"):
        if not callable(loss_fn):
            raise TypeError("loss_fn must be callable: loss_fn(module, batch) -> scalar loss")
        if samples is not None:
            samples = _int_in("samples", samples, 1, INT64_MAX)
        super().__init__(group=group, every=every, event_log=event_log, on_sdc=on_sdc, budget=budget,
                         sdc_rate=sdc_rate, probe_options=probe_options, mesh=mesh, dp_dims=dp_dims, ranks=ranks,
                         transient=transient)
        group = self.group
        self._on_mesh = mesh is not None
        self.module = module
        self.loss_fn = loss_fn
        self.samples = samples
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise SDCProbeError("CanaryCheck: the module has no parameters that require gradients")
        self._names = ["loss"] + ["gradient of " + name for name, _ in named]
        self._params = [p for _, p in named]
        self._buffers = [_local(b) for b in module.buffers()]
        self._rng_devices = sorted({p.device.index for p in self._params if p.device.type == "cuda"})
        self._batch = None if batch is None else _map_batch(lambda t: t.detach(), batch)
        device = _local(self._params[0]).device
        if device.type == "cuda" and self._backend != "cuda":
            # A CUDA model over a gloo group: the canary's suspect is the GPU that computed.
            self._backend, self._device = "cuda", device.index
            identity = device_identity("cuda", device.index)
            me = dict(self.members[self.ranks.index(self.rank)], device=identity["uuid"],
                      pci_bus_id=identity["pci_bus_id"])
            self.members = self._exchange.gather_objects(me)
        self.classes = self._exchange.gather_objects(equivalence_class(self._backend, self._device))  # in group order
        self.disabled = None  # the reason, once the canary is off
        self._checked_step = None
        self._cadence_step = None  # the last check due by the cadence (not by a restore or a save)

    # ---- the canary batch --------------------------------------------------------------------

    def _take_batch(self, batch):
        """The group's first rank's `batch`, cut to `samples` rows, on every replica (a collective)."""
        if batch is None:
            raise SDCProbeError("CanaryCheck has no batch: pass batch= to CanaryCheck or the real batch to step()")
        n = self.samples
        mine = _map_batch(lambda t: (t.detach()[:n] if t.dim() else t.detach()).to("cpu", copy=True), batch)
        box = [mine if self.rank == self.ranks[0] else None]
        self._dist.broadcast_object_list(box, src=self.ranks[0], group=self.group)
        device = _local(self._params[0]).device
        return _map_batch(lambda t: t.to(device), box[0])

    # ---- one canary run ----------------------------------------------------------------------

    def _agreed_buffers(self):
        """The group's first rank's buffers (a collective). Replicas' buffers may differ between
        steps (DDP broadcasts them at the next forward; batch norm's statistics follow each rank's
        own batch), so the canary runs every replica on the same ones."""
        copies = [b.detach().clone() for b in self._buffers]
        for c in copies:
            self._exchange.collective(self._dist.broadcast, c, src=self.ranks[0])
        return copies

    def _run(self, buffers):
        """The loss and the gradients of this replica on the canary batch with `buffers`, as a list
        of tensors, and the digest table of the parameters it computed with (None off a mesh, where
        they are the module's own); the module's own buffers are restored after."""
        torch = _torch()
        saved = [b.detach().clone() for b in self._buffers]
        used = _Unsharded(self.module) if self._on_mesh else contextlib.nullcontext()
        try:
            with torch.no_grad():
                for b, agreed in zip(self._buffers, buffers):
                    b.copy_(agreed)
            with torch.random.fork_rng(devices=self._rng_devices), torch.enable_grad(), _cudnn_heuristics(), used:
                torch.random.default_generator.manual_seed(CANARY_SEED)
                for d in self._rng_devices:
                    torch.cuda.default_generators[d].manual_seed(CANARY_SEED)
                loss = self.loss_fn(self.module, self._batch)
                if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.requires_grad:
                    raise SDCProbeError("CanaryCheck: loss_fn must return a scalar tensor that needs gradients, "
                                        "got %r" % (type(loss).__name__ if not isinstance(loss, torch.Tensor) else
                                                    "a tensor of shape %s" % list(loss.shape)))
                params = self._params if not self._on_mesh else used.params
                # autograd.grad returns the gradients without running the parameters' AccumulateGrad
                # nodes, so neither .grad nor DDP's reducer hooks (its all-reduce) are touched.
                grads = torch.autograd.grad(loss, params, allow_unused=True)
        finally:
            with torch.no_grad():
                for b, s in zip(self._buffers, saved):
                    b.copy_(s)
        if self._on_mesh:
            self._names = ["loss"] + used.names
        empty = torch.empty(0)
        return ([_local(loss).detach()] + [_local(g).detach() if g is not None else empty for g in grads],
                used.rows if self._on_mesh else None)

    def _first_difference(self, a, b):
        for name, row_a, row_b in zip(self._names, a, b):
            if row_a != row_b:
                return name
        return None

    # ---- the check ---------------------------------------------------------------------------

    def _due(self, step):
        """Why `step` is due ("restore", "cadence") or None. The first call and each call whose step
        goes back (a restore within the process) check at once, before the next optimizer step: a
        bad restore or a bad new node shows there. Then every multiple of `every`; with "auto" only
        a multiple at least `every` steps after the last such check, since the interval changes and
        the next multiple alone could come sooner than the budget allows (on average after half an
        interval). A step already checked is not checked again."""
        if step == self._checked_step:
            return None
        if self._last_call_step is None or step <= self._last_call_step:
            return "restore"
        if step % self.every:
            return None
        if self._every is None and self._cadence_step is not None and step - self._cadence_step < self.every:
            return None
        return "cadence"

    def step(self, step, batch=None):
        """Runs the canary on a due step (every replica must call it with the same steps) and returns
        the verdict, or None when the step is not due or the canary is disabled. `batch`: this
        step's real batch, taken as the canary batch at the first call when none was given."""
        step = _int_in("step", step, 0, INT64_MAX)
        due = None if self.disabled is not None else self._due(step)
        self._time_step(step, time.perf_counter())
        if due is None:
            self._last_call_end = time.perf_counter()
            return None
        if due == "cadence":
            self._cadence_step = step
        return self._check_canary(step, batch)

    def before_commit(self, step, batch=None):
        """Runs the canary on the state about to be saved at `step`, whatever the cadence, and
        returns the verdict; log the save's ckpt_commit only after it passes. A check already made
        at this step is not repeated; a disabled canary returns its "disabled" verdict. Every
        replica must call it at the same saves. A failure acts as `on_sdc` says."""
        step = _int_in("step", step, 0, INT64_MAX)
        if self.disabled is not None or step == self._checked_step:
            return self.verdict
        self._time_step(step, time.perf_counter())
        return self._check_canary(step, batch)

    def _check_canary(self, step, batch):
        if self._batch is None:
            self._batch = self._take_batch(batch)
        self._event("probe_begin", probe="canary", step=step, blocking=True)
        start = time.perf_counter()
        first = self._checked_step is None
        if first and _torch().backends.cudnn.benchmark:
            sys.stderr.write("sdcprobe: torch.backends.cudnn.benchmark is on: the canary runs with it off, so "
                             "every replica uses cuDNN's heuristic algorithms (docs/replica.md)\n")
        buffers = self._agreed_buffers()
        error, out, inputs, differs, second_s = None, (0, 0), (0, 0), None, 0.0
        try:
            results, used = self._run(buffers)
            rows = tensor_digest_table(results)
            # The inputs: the parameters the forward computed with (on a mesh, as it unsharded them) and the batch.
            inputs = combine_digests((used or tensor_digest_table(self._params)) + tensor_digest_table(self._batch))
            second = time.perf_counter()
            differs = self._first_difference(rows, tensor_digest_table(self._run(buffers)[0])) if first else None
            second_s = time.perf_counter() - second  # measuring determinism is not the steady cost
            out = combine_digests(rows)
        except Exception as e:  # raised below, on every rank together
            error = e
        # On a mesh every group adopts the world's cadence, the world's decision to disable, and
        # stops when any rank's run failed.
        proposal, nondeterministic, failed = self._agreed([self._proposal(), int(differs is not None),
                                                           self._failure(error)])
        if self._world_agrees:
            self._raise_failure(step, "canary", error, failed)
        gathered = self._exchange.gather([_signed(out[0]), _signed(out[1]), _signed(inputs[0]), _signed(inputs[1]),
                                 proposal, int(differs is not None), self._failure(error)])
        self._raise_failure(step, "canary", error, max(w[6] for w in gathered))
        self.every = max(w[4] for w in gathered)
        self._checked_step = step
        if first and (nondeterministic or any(w[5] for w in gathered)):
            self._disable(step, differs, [i for i, w in enumerate(gathered) if w[5]], start)
            return self.verdict
        digests = [(_as_uint64(w[0]), _as_uint64(w[1])) for w in gathered]
        input_digests = [(_as_uint64(w[2]), _as_uint64(w[3])) for w in gathered]
        if first:
            # A group that is not made of true replicas stops every group of the mesh with it.
            mismatch = None
            if len(set(input_digests)) > 1:
                mismatch = SDCProbeError(
                    "CanaryCheck: the replicas' parameters or canary batch differ at the first check (%s): "
                    "the group is not made of true replicas (docs/replica.md)"
                    % ", ".join("rank %d" % self.members[i]["rank"] for i in range(len(digests))
                                if input_digests[i] != collections.Counter(input_digests).most_common(1)[0][0]))
            self._raise_failure(step, "canary", mismatch, self._agreed([self._failure(mismatch)])[0])
        verdict, suspects, failures, unchecked = self._vote_by_class(digests)
        attributions, rerun_s = self._rerun(step, "canary", verdict, digests,
                                            lambda: combine_digests(tensor_digest_table(self._run(buffers)[0])),
                                            suspects, self.classes)
        verdict, suspects = decided(verdict, suspects, attributions, self.classes)
        seconds = time.perf_counter() - start
        self._costs.append(seconds - second_s - rerun_s)  # the steady cost: one run
        self.checks += 1
        self.verdict = self._job_verdict({
            "verdict": verdict,
            "step": step,
            "last_good_step": self.last_good_step,
            "replicas": len(digests),
            "digest": "%016x%016x" % (out[1], out[0]),
            "suspects": [dict(self.members[i], cause=self._cause(i, input_digests),
                              **({"attribution": attributions[i]} if attributions else {})) for i in suspects],
            "probe_failures": [self.members[i]["rank"] for i in failures],
            "unchecked": [self.members[i]["rank"] for i in unchecked],
            "seconds": seconds,
            "rerun_seconds": rerun_s,
            "every": self.every,
            "auto": self._every is None,
        }, attributions is not None)
        self._settle("canary")
        self._last_call_end = time.perf_counter()
        return self.verdict

    def _cause(self, i, input_digests):
        """"compute" when the suspect started from the same parameters and batch as its class's
        majority (its kernels computed wrong), "state" when its inputs already differed."""
        same_class = [d for j, d in enumerate(input_digests) if self.classes[j] == self.classes[i]]
        return "compute" if input_digests[i] == collections.Counter(same_class).most_common(1)[0][0] else "state"

    def _vote_by_class(self, digests):
        """ReplicaCheck's vote within each equivalence class: the minority of a strict majority, else
        the replicas whose devices fail the probe catalogue, else all ("inconclusive"). A replica
        alone in its class is compared with nobody: "unchecked", never "pass"."""
        by_class = collections.OrderedDict()
        for i, key in enumerate(self.classes):
            by_class.setdefault(repr(sorted(key.items())), []).append(i)
        suspects, tied, unchecked = [], [], []
        for positions in by_class.values():
            if len(positions) == 1:
                unchecked += positions
                continue
            counts = collections.Counter(digests[i] for i in positions)
            if len(counts) == 1:
                continue
            (top, n), (_, second) = counts.most_common(2)
            if n > second:
                suspects += [i for i in positions if digests[i] != top]
            else:
                tied.append(positions)
        failures, inconclusive = [], []
        if tied:  # every replica tests its own device, and they share the results
            failed = {i for i, (flag,) in enumerate(self._exchange.gather([int(self._probe_catalogue_fails())])) if flag}
            for positions in tied:
                blamed = [i for i in positions if i in failed]
                failures += blamed
                suspects += blamed
                inconclusive += [] if blamed else positions
        if suspects:
            return "sdc", sorted(suspects), sorted(failures), unchecked
        if inconclusive:
            return "inconclusive", inconclusive, [], unchecked
        return ("unchecked" if len(unchecked) == len(digests) else "pass"), [], [], unchecked

    def _disable(self, step, differs, positions, start):
        """Turns the canary off on every replica: some replica's two runs differed."""
        names = self._exchange.gather_objects(differs)
        where = "; ".join("rank %d (%s, %s) first in %s" % (self.members[i]["rank"], self.members[i]["host"],
                                                             self.members[i]["device"], names[i]) for i in positions)
        where = where or "a rank of another vote group of the mesh"
        self.disabled = ("sdcprobe: the canary step is disabled: two runs on the same parameters and batch gave "
                         "different results on %s. The model's kernels are not deterministic (atomics in scatter "
                         "or index_add, some attention backward kernels, cuBLAS without a fixed workspace), so "
                         "replicas cannot be compared bit for bit; %s." % (where, DETERMINISM_FIX))
        sys.stderr.write(self.disabled + "\n")
        self._event("probe_end", probe="canary", verdict="disabled", step=step, blocking=True)
        self.verdict = {"verdict": "disabled", "step": step, "last_good_step": self.last_good_step,
                        "replicas": len(self.ranks), "message": self.disabled, "nondeterministic":
                        [self.members[i]["rank"] for i in positions], "first_difference": names[positions[0]] if positions else None,
                        "seconds": time.perf_counter() - start, "every": self.every, "auto": self._every is None}
        self._last_call_end = time.perf_counter()

    def _not_hardware(self):
        """Turns the canary off: a healthy replica's re-run on the same inputs differed from its
        first run, so the model's kernels are not deterministic after all (never an eviction)."""
        v = self.verdict
        self.disabled = ("sdcprobe: the canary step is disabled: the replicas' gradients differ at step %d, and "
                         "a re-run on the same parameters and batch does not reproduce them on a healthy replica: "
                         "not hardware (a nondeterministic op), no device is blamed; %s."
                         % (v["step"], DETERMINISM_FIX))
        sys.stderr.write(self.disabled + "\n")
        v["message"] = self.disabled

    def _message(self):
        v = self.verdict
        what = "inconclusive, all suspect: " if v["verdict"] == "inconclusive" else "wrong compute on "
        return ("silent data corruption at step %d (last good step %d, %s): the canary's gradients differ between "
                "replicas on the same parameters and batch, %s%s"
                % (v["step"], v["last_good_step"], v.get("attribution", "not re-run"), what,
                   ", ".join(_named(s) for s in v["suspects"])))


def _lightning_callback_base():
    """Lightning's Callback when Lightning is importable (either package name), else object."""
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return __import__(name, fromlist=["Callback"]).Callback
        except ImportError:
            continue
    return object


class CanaryCallback(_lightning_callback_base()):
    """Runs a CanaryCheck in a Lightning Trainer: once before the first optimizer step of each fit
    (after a restore, at the restored step), after the optimizer steps the cadence makes due, and
    before every save.

        trainer = Trainer(callbacks=[CanaryCallback(lambda module, batch: module.training_step(batch, 0),
                                                    event_log=log)])

    loss_fn, batch and the keyword options are CanaryCheck's; the check is built at the start of
    fit, on pl_module (the LightningModule, which Lightning's strategy wraps in DDP). Step N is the
    optimizer step after which trainer.global_step is N, as GoodputCallback and ModelCheckpoint's
    every_n_train_steps count, so a save of step N is made from the state checked as step N.

    A save (before_save, on every rank before Lightning writes the file, weights-only saves too:
    sdcprobe.callback.before_every_save) runs the canary on the state being saved unless that step
    was just checked; after an alarm every save is refused (an exception in before_save: the file
    is never written, so never committed). on_sdc="stop" ends fit, and the process, with SDCStop:
    exit status SDC_EXIT_STATUS (75).
    """

    def __init__(self, loss_fn, batch=None, **options):
        if not callable(loss_fn):
            raise TypeError("loss_fn must be callable: loss_fn(module, batch) -> scalar loss")
        self.loss_fn = loss_fn
        self.batch = batch
        self.options = options
        self.canary = None
        self._started = None  # global_step at the start of the optimizer step in flight
        self._restored = False  # fit has started, its first optimizer step has not

    def on_fit_start(self, trainer, pl_module):
        options = dict(self.options)
        if options.get("on_sdc") == "stop":
            options["on_sdc"] = self._stop
        self.canary = CanaryCheck(pl_module, self.loss_fn, batch=self.batch, **options)
        self._restored = True
        before_every_save(trainer, self.before_save)

    def _stop(self, verdict):
        raise SDCStop("the canary's gradients differ between replicas at step %d (last good step %d, %s): %s"
                      % (verdict["step"], verdict["last_good_step"], verdict.get("attribution", "not re-run"),
                         ", ".join(_named(s) for s in verdict["suspects"])))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx, *args):
        if self.canary is None:
            return
        if self._restored:  # the state loaded (or initialised), before any optimizer step changes it
            self._restored = False
            self.canary.step(int(trainer.global_step), batch)
        if self._started is None:
            self._started = int(trainer.global_step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        if self.canary is None or self._started is None or int(trainer.global_step) == self._started:
            return  # accumulating gradients: the optimizer step has not run yet
        self._started = None
        self.canary.step(int(trainer.global_step), batch)

    def before_save(self, trainer):
        step = int(trainer.global_step)
        if self.canary is None or step < 1:
            return  # after fit, or nothing trained yet
        self.canary.before_commit(step)
        if self.canary._reported:
            v = self.canary.verdict
            message = ("the save of step %d is refused: the canary found SDC at step %d (last good step %d)"
                       % (step, v["step"], v["last_good_step"]))
            raise SDCStop(message) if self.options.get("on_sdc") == "stop" else SDCDetected(message)

    def on_fit_end(self, trainer, pl_module):
        self._close()

    def on_exception(self, trainer, pl_module, exception):
        self._close()

    def _close(self):
        if self.canary is not None:
            self.canary.close()
        self.canary = None
