"""Exchange: the small collectives sdcprobe's checks run over torch.distributed (a process group, or
the world), each waited on where it is called, its tensors held past its end (Exchange.hold)."""

import collections
import pickle
import time

# How long a collective's tensors stay held after it ends (hold): the last HELD_LAST always, the
# others HELD_S seconds, at most HELD_MOST in all.
HELD_LAST = 4
HELD_S = 2.0
HELD_MOST = 256


class Exchange:
    """Collectives over `group` (None: the world). NCCL exchanges device tensors (on the current CUDA
    device), gloo host tensors."""

    def __init__(self, dist, group=None):
        import torch

        self._torch = torch
        self._dist = dist
        self.group = group
        self.rank = dist.get_rank()
        self.ranks = list(dist.get_process_group_ranks(group)) if group is not None else list(
            range(dist.get_world_size()))
        self.cuda = "nccl" in str(dist.get_backend(group))
        self.device = torch.device("cuda", torch.cuda.current_device()) if self.cuda else torch.device("cpu")
        self._held = collections.deque()  # recent collectives' works and tensors: see hold

    def collective(self, call, *tensors, world=False, **options):
        """call(*tensors, **options) over the group (world=True: the world), waited on here; its work
        and tensors are held (hold)."""
        work = call(*tensors, group=None if world else self.group, async_op=True, **options)
        work.wait()
        self.hold(work, tensors)

    def hold(self, work, tensors):
        """Keeps a finished collective's work and tensors referenced, so that their last reference
        is dropped on this thread. Gloo's worker thread drops its own only after the work completes,
        and were it the last, freeing a tensor whose Python object has gone needs the GIL, which the
        main thread holds while it joins that thread when the process group is destroyed
        (~ProcessGroupGloo, from DDP's reducer at exit): the process would never exit (seen on torch
        1.13, with the sizes of gather_objects dropped on its next collective). The worker drops
        its references within moments of the work's end, so each collective is kept HELD_S seconds,
        and the last HELD_LAST whatever their age (a job that ends right after its check)."""
        now = time.monotonic()
        self._held.append((now, work, tensors))
        while len(self._held) > HELD_LAST and (now - self._held[0][0] > HELD_S or len(self._held) > HELD_MOST):
            self._held.popleft()

    def maximum(self, words, world=False):
        """The element-wise maximum of every member's int64 `words` (world=True: every rank's)."""
        t = self._torch.tensor(words, dtype=self._torch.int64, device=self.device)
        self.collective(self._dist.all_reduce, t, world=world, op=self._dist.ReduceOp.MAX)
        return [int(v) for v in t.tolist()]

    def gather(self, words, world=False):
        """Every member's int64 words, in group order (NCCL: all_gather_into_tensor where torch has
        it; else all_gather, which every backend has: gloo lacks the former on older torch);
        world=True: every rank's, in rank order. The collective is chosen before it is issued, never
        by retrying after an error: a failed collective (an NCCL error) raises, and a second,
        different one would leave the ranks' sequences of collectives misaligned."""
        torch = self._torch
        n = self._dist.get_world_size() if world else len(self.ranks)
        mine = torch.tensor(words, dtype=torch.int64, device=self.device)
        if self.cuda and hasattr(self._dist, "all_gather_into_tensor"):
            out = torch.empty(n * len(words), dtype=torch.int64, device=self.device)
            self.collective(self._dist.all_gather_into_tensor, out, mine, world=world)
        else:
            parts = [torch.empty_like(mine) for _ in range(n)]
            self.collective(self._dist.all_gather, parts, mine, world=world)
            out = torch.cat(parts)
        return [[int(v) for v in out[i * len(words):(i + 1) * len(words)].tolist()] for i in range(n)]

    def gather_objects(self, obj, world=False):
        """Every member's picklable `obj`, in group order (world=True: every rank's): all_gather_object
        through collective, whose tensors are kept (all_gather_object's are not, and a process whose
        last exchange it was could hang at exit as hold says: seen on torch 1.13)."""
        torch = self._torch
        data = pickle.dumps(obj)
        sizes = [n for n, in self.gather([len(data)], world=world)]
        mine = torch.zeros(max(sizes), dtype=torch.uint8)
        mine[:len(data)] = torch.tensor(list(data), dtype=torch.uint8)
        mine = mine.to(self.device)
        parts = [torch.empty_like(mine) for _ in sizes]
        self.collective(self._dist.all_gather, parts, mine, world=world)
        return [pickle.loads(bytes(p[:n].tolist())) for p, n in zip(parts, sizes)]
