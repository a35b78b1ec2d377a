"""The replica check's digests on the CPU: the same as the C ABI's for the same bytes, and as the
definition written out in Python; views, alignment and order handled. Needs torch (/usr/bin/python3)."""

import ctypes
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import torch.distributed as dist  # noqa: E402

from sdcprobe import ReplicaCheck, SDCProbeError, _library, inline  # noqa: E402
from sdcprobe.replica import choose_every, combine_digests, state_digest, tensor_digest_table  # noqa: E402

M = 2**64 - 1


def mix(x, constants):
    for k in constants:
        x ^= x >> 32
        x = (x + (x & 0xffffffff) * k) & M
    return x ^ (x >> 32)


def reference(data):
    """kernels/common/digest.hpp, written out: zero-padded little-endian words."""
    data = bytes(data) + b"\0" * (-len(data) % 8)
    lo = hi = 0
    for i in range(len(data) // 8):
        w = int.from_bytes(data[8 * i:8 * i + 8], "little")
        key = ((i + 1) * 0x9e3779b97f4a7c15) & M
        lo = (lo + mix(w ^ key, (0xd6e8feb8, 0xa0761d64, 0xefd540f2))) & M
        hi = (hi + mix((w + key) & M, (0xca5a8264, 0x9fb21c64, 0xfe3fd286))) & M
    return lo, hi


def abi_digest(data):
    buf = ctypes.create_string_buffer(bytes(data), len(data))
    out = _library.Digest()
    inline._check(inline._library_handle().sdc_digest_host(buf, len(data), ctypes.byref(out)))
    return out.lo, out.hi


def tensor_bytes(t):
    return t.contiguous().numpy().tobytes()


class DigestTest(unittest.TestCase):
    def test_tensor_digest_equals_the_abi_and_the_definition(self):
        g = torch.Generator().manual_seed(1)
        for t in (torch.randn(5, 7, generator=g),                # 140 bytes: a partial last word
                  torch.randn(3, generator=g).double(),
                  torch.randint(0, 255, (13,), dtype=torch.uint8, generator=g),
                  torch.randn(33, generator=g).half()):
            (lo, hi, nbytes), = tensor_digest_table([t])
            self.assertEqual(nbytes, len(tensor_bytes(t)))
            self.assertEqual((lo, hi), abi_digest(tensor_bytes(t)))
            self.assertEqual((lo, hi), reference(tensor_bytes(t)))

    def test_views_digest_their_elements(self):
        base = torch.arange(64, dtype=torch.float32).reshape(8, 8)
        transposed = base.t()                 # not contiguous
        offset = base.view(-1)[1:30]           # 4-byte aligned only
        for view in (transposed, offset):
            self.assertEqual(tensor_digest_table([view]), tensor_digest_table([view.clone().contiguous()]))
        self.assertNotEqual(tensor_digest_table([transposed]), tensor_digest_table([base]))

    def test_combined_digest_depends_on_order_and_on_every_bit(self):
        a, b = torch.ones(4), torch.full((4,), 2.0)
        self.assertNotEqual(state_digest([a, b]), state_digest([b, a]))
        self.assertEqual(state_digest([a, b]), state_digest([a.clone(), b.clone()]))
        flipped = b.clone()
        flipped.view(torch.int32)[3] ^= 1
        self.assertNotEqual(state_digest([a, b]), state_digest([a, flipped]))
        # An empty tensor still takes a row: [a] and [a, empty] differ.
        self.assertNotEqual(state_digest([a]), state_digest([a, torch.empty(0)]))

    def test_nested_state_is_walked_in_order(self):
        model = torch.nn.Linear(3, 2)
        optim = torch.optim.Adam(model.parameters())
        model(torch.ones(1, 3)).sum().backward()
        optim.step()
        tensors = [list(model.parameters()), optim.state_dict()]
        rows = tensor_digest_table(tensors)
        # weight, bias, then per parameter: exp_avg, exp_avg_sq, step (a tensor in this torch, else skipped).
        self.assertGreaterEqual(len(rows), 6)
        self.assertEqual(combine_digests(rows), state_digest(tensors))

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_cuda_digest_equals_the_cpu_digest_of_the_same_tensor(self):
        g = torch.Generator().manual_seed(2)
        halves = torch.randn(35, generator=g).half()
        host = [torch.randn(1001, generator=g), torch.randn(64, 33, generator=g).t(), halves[1:]]
        on_gpu = [host[0].cuda(), host[1].cuda(), halves.cuda()[1:]]      # odd, strided, misaligned
        self.assertEqual(tensor_digest_table(on_gpu), tensor_digest_table(host))
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):                                      # the caller's current stream
            self.assertEqual(state_digest(on_gpu), state_digest(host))


class Recorder:
    """An event log object, as the goodput recorder or an InlineProbe offers one."""

    def __init__(self):
        self.events = []

    def log_event(self, event, **fields):
        self.events.append(dict(fields, event=event))


class SingleReplicaTest(unittest.TestCase):
    def test_arguments_are_checked(self):
        with self.assertRaises(ValueError):
            ReplicaCheck(on_sdc="ignore")
        with self.assertRaises(ValueError):
            ReplicaCheck(every=0)
        if not dist.is_initialized():
            with self.assertRaises(SDCProbeError):
                ReplicaCheck()

    def test_choose_every_refuses_infinite_times(self):
        # inf / inf was a NaN cast to int64: SDC_OK with every = -2^63.
        for step_s, check_s in [(float("inf"), float("inf")), (float("nan"), 1.0), (0.1, float("inf"))]:
            with self.assertRaises(SDCProbeError):
                choose_every(step_s, check_s, 0.01)
        self.assertGreaterEqual(choose_every(0.1, 1.0, 0.01), 1000)

    def test_due_steps_check_and_log_to_an_event_object(self):
        with tempfile.TemporaryDirectory() as tmp:
            dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rdzv"), rank=0, world_size=1)
            try:
                log = Recorder()
                check = ReplicaCheck(every=3, event_log=log)
                verdicts = [check.step(s, [torch.ones(3)]) for s in range(7)]
            finally:
                dist.destroy_process_group()
        self.assertEqual([v is not None for v in verdicts], [True, False, False, True, False, False, True])
        self.assertEqual(verdicts[-1]["verdict"], "pass")
        self.assertEqual(verdicts[-1]["last_good_step"], 6)
        self.assertEqual([(e["event"], e["step"]) for e in log.events],
                         [(kind, s) for s in (0, 3, 6) for kind in ("probe_begin", "probe_end")])


    def test_cadence_falls_on_multiples_after_a_restore(self):
        # A run resumed after step 20 checks on 25, 30, ... as its saves every 5 steps fall, not on
        # 21, 26, ...; a check before a commit runs off the cadence, and is not repeated at a step
        # already checked.
        with tempfile.TemporaryDirectory() as tmp:
            dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rdzv"), rank=0, world_size=1)
            try:
                log = Recorder()
                check = ReplicaCheck(every=5, event_log=log)
                checked = [s for s in range(21, 52) if check.step(s, [torch.ones(3)]) is not None]
                before_commit = check.before_commit(52, [torch.ones(3)])
                again = check.before_commit(52, [torch.ones(3)])
                same_step = check.step(55, [torch.ones(3)])
                reused = check.before_commit(55, [torch.ones(3)])
            finally:
                dist.destroy_process_group()
        self.assertEqual(checked, list(range(25, 51, 5)))
        self.assertEqual((before_commit["step"], before_commit["verdict"]), (52, "pass"))
        self.assertIs(again, before_commit)
        self.assertIs(reused, same_step)
        begins = [e for e in log.events if e["event"] == "probe_begin"]
        self.assertEqual([e["step"] for e in begins], [25, 30, 35, 40, 45, 50, 52, 55])
        self.assertTrue(all(e["blocking"] is True for e in begins))


class CudaStreamTest(unittest.TestCase):
    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_non_contiguous_tensor_written_on_a_side_stream(self):
        # The tensor is produced on a side stream and digested there at once: the contiguous copy
        # must be ordered on the digest's stream, after the producer, not on the current stream.
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            base = torch.empty(4096, 1024, device="cuda")
            base.copy_(torch.arange(4096 * 1024, dtype=torch.float32, device="cuda").view(4096, 1024))
            strided = base.t()
            got = tensor_digest_table([strided], stream=side)
        side.synchronize()
        self.assertEqual(got, tensor_digest_table([strided.cpu()]))


if __name__ == "__main__":
    unittest.main()
