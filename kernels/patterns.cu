// Memory pattern kernels: fill and March-style verify. Expected words come from pattern_word_of,
// never from a reference buffer. Accesses are 16 bytes (two words), kSweepUnroll in flight per
// thread, in the order of kernels/common/sweep.hpp; an odd last word goes to grid thread 0, last
// when ascending and first when descending, so that thread's order holds too. The kind and the
// operation are template parameters so that the inner loops carry no switch.
#include <type_traits>

#include "kernels/common/sweep.hpp"
#include "kernels/device_util.cuh"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

enum class Op {
  kFill,            // write the pattern
  kCheck,           // compare with the pattern
  kCheckInverse,    // compare, then write its inverse (every March element the probes run)
  kCheckWrite,      // compare, then write another pattern of any kind
  kCheckWriteKind,  // compare, then write another pattern of the same kind (mem.modulo20's offsets)
};

// Registers a thread, by operation: as few as the kernel needs without spilling (check_sass.sh
// fails on any spill), so that many blocks of 256 threads fit on an SM with kSweepUnroll x 16 bytes
// in flight per thread. On sm_80 and sm_90 a fill, a check and a March element to the inverse 64
// (4 blocks), one to another pattern of the same kind 80 (3; 64 spills for kRandom), one to a
// pattern of any kind, which computes the second pattern per word through pattern_word's switch,
// 128 (2). The compiler for Blackwell (sm_100, sm_120) needs more: 96, 112, 112, 168 (mem.modulo20's
// spilled at 128 on sm_120) and 128. The grid is one wave of what fits (one_wave_blocks): a kernel
// that needs fewer registers gets more blocks.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
inline constexpr bool kBlackwell = true;
#else
inline constexpr bool kBlackwell = false;
#endif
template <Op O>
constexpr int sweep_registers() {
  switch (O) {
    case Op::kFill: return kBlackwell ? 96 : 64;
    case Op::kCheck: return kBlackwell ? 112 : 64;
    case Op::kCheckInverse: return kBlackwell ? 112 : 64;
    case Op::kCheckWrite: return 128;
    case Op::kCheckWriteKind: return kBlackwell ? 168 : 80;
  }
  return 128;
}
// mem.random_blocks' unit kernels carry the block's pattern too, and a check kUnitUnroll vectors
// a lane in flight: a check 128 registers (2 blocks, 16 warps with 8 loads each), a March element
// to the inverse 80 (3), a fill 64 (4). A fill gains nothing from more stores in a group, and a
// March element with 8 spills at 128 on sm_90: they keep kSweepUnroll.
template <Op O>
constexpr int unit_registers() {
  if (kBlackwell || O == Op::kCheck || O == Op::kCheckWrite) return 128;
  return O == Op::kFill ? 64 : 80;
}
template <Op O>
constexpr unsigned kUnitGroup = O == Op::kCheck ? kUnitUnroll : kSweepUnroll;

struct Sweep {
  uint64_t* data;
  uint64_t words;
  Pattern expect;   // the pattern written (kFill) or compared
  uint64_t invert;  // ~0 when expect is inverted
  Pattern write;    // kCheckWrite's and kCheckWriteKind's pattern
  bool descending;
  DeviceMismatchLog* log;
  uint64_t steps = 0;  // sweep_steps of the whole buffer for sweep_kernel's grid, from the host
};

inline constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ ulonglong2* vectors_of(uint64_t* data) { return reinterpret_cast<ulonglong2*>(data); }

// One group: the vectors v[u] with ok[u]. Whole warps call it (every lane of a sweep takes the
// same number of groups, and blocks are whole warps), so the vote takes the full mask and
// mismatch counting stays warp-aggregated. All loads are issued before the first check, so U
// are in flight; `seen` keeps the last group's words where ok[u] is false (never
// compared), so no zeroing per group.
template <PatternKind K, Op O, unsigned U>
__device__ __forceinline__ void sweep_group(const Sweep& s, PairSource<K>& src, PairSource<K>& next,
                                            const uint64_t (&v)[U], const bool (&ok)[U], ulonglong2 (&seen)[U]) {
  ulonglong2* vec = vectors_of(s.data);
  if constexpr (O != Op::kFill) {
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      if (ok[u]) seen[u] = vec[v[u]];
    }
  }
#pragma unroll
  for (unsigned u = 0; u < U; ++u) {
    const WordPair w = src.at(2 * v[u]);
    const ulonglong2 want{w.lo ^ s.invert, w.hi ^ s.invert};
    if constexpr (O == Op::kFill) {
      if (ok[u]) vec[v[u]] = want;
    } else {
      // No SM or lane: they are the reader's; the word's address (8 * index) locates the fault.
      const bool bad = ok[u] && ((seen[u].x ^ want.x) | (seen[u].y ^ want.y)) != 0;
      if (__any_sync(kFullWarp, bad)) {
        record_mismatch_if(bad && seen[u].x != want.x, s.log, 2 * v[u], want.x, seen[u].x, kNoUnit, kNoUnit);
        record_mismatch_if(bad && seen[u].y != want.y, s.log, 2 * v[u] + 1, want.y, seen[u].y, kNoUnit, kNoUnit);
      }
      if constexpr (O == Op::kCheckInverse) {
        if (ok[u]) vec[v[u]] = ulonglong2{~want.x, ~want.y};
      } else if constexpr (O == Op::kCheckWrite) {
        if (ok[u]) vec[v[u]] = ulonglong2{pattern_word(s.write, 2 * v[u]), pattern_word(s.write, 2 * v[u] + 1)};
      } else if constexpr (O == Op::kCheckWriteKind) {
        const WordPair x = next.at(2 * v[u]);
        const uint64_t flip = s.write.inverted ? ~0ULL : 0;
        if (ok[u]) vec[v[u]] = ulonglong2{x.lo ^ flip, x.hi ^ flip};
      }
    }
  }
}

// Vectors [first, first + count) swept by `threads` threads in `steps` steps (sweep_steps, whole
// groups of U), this one being `thread`, in sweep_vector's order taken by addition (sweep_first,
// sweep_delta).
template <PatternKind K, Op O, unsigned U>
__device__ __forceinline__ void sweep_range(const Sweep& s, PairSource<K>& src, PairSource<K>& next, uint64_t first,
                                            uint64_t count, uint64_t steps, uint64_t thread, uint64_t threads) {
  const uint64_t delta = sweep_delta(threads, s.descending);
  uint64_t local = sweep_first(steps, thread, threads, s.descending);
  ulonglong2 seen[U] = {};
  for (uint64_t groups = steps / U; groups > 0; --groups) {
    uint64_t v[U];
    bool ok[U];
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      ok[u] = local < count;  // past the end: the last group ascending, the first descending
      v[u] = first + local;
      local += delta;
    }
    sweep_group<K, O, U>(s, src, next, v, ok, seen);
  }
}

// The odd last word, if any, on grid thread 0.
template <PatternKind K, Op O>
__device__ __forceinline__ void sweep_tail(const Sweep& s) {
  if (s.words % 2 == 0 || grid_thread() != 0) return;
  const uint64_t i = s.words - 1;
  const uint64_t want = pattern_word_of<K>(s.expect, i) ^ s.invert;
  if constexpr (O == Op::kFill) {
    s.data[i] = want;
  } else {
    const uint64_t seen = s.data[i];
    record_mismatch_if(seen != want, s.log, i, want, seen, kNoUnit, kNoUnit);
    if constexpr (O == Op::kCheckInverse) s.data[i] = ~want;
    if constexpr (O == Op::kCheckWrite || O == Op::kCheckWriteKind) s.data[i] = pattern_word(s.write, i);
  }
}

// Every kind: the grid sweeps the whole buffer (kRandomBlocks here only for blocks too small for
// units, recomputing the block pattern per word).
template <PatternKind K, Op O>
__global__ void __maxnreg__(sweep_registers<O>()) sweep_kernel(Sweep s) {
  if (s.descending) sweep_tail<K, O>(s);
  PairSource<K> src(s.expect), next(s.write);
  sweep_range<K, O, kSweepUnroll>(s, src, next, 0, s.words / 2, s.steps, grid_thread(), grid_stride());
  if (!s.descending) sweep_tail<K, O>(s);
}

template <PatternKind K, Op O>
__device__ __forceinline__ void sweep_unit_as(const Sweep& s, const Pattern& sub, uint64_t first, uint64_t count) {
  PairSource<K> src(sub);
  constexpr unsigned kUnroll = kUnitGroup<O>;
  // `next` is kCheckWriteKind's, which never runs by unit.
  sweep_range<K, O, kUnroll>(s, src, src, first, count, sweep_steps(count, 32, kUnroll), threadIdx.x % 32, 32);
}

// kRandomBlocks by unit (sweep.hpp): each warp computes the block pattern once per unit and
// sweeps the unit's vectors with its lanes; units go to warps as vectors go to threads.
template <Op O>
__global__ void __maxnreg__(unit_registers<O>()) sweep_units_kernel(Sweep s) {
  if (s.descending) sweep_tail<PatternKind::kRandomBlocks, O>(s);
  const unsigned shift = unit_shift(s.expect);
  const uint64_t unit_vectors = uint64_t{1} << (shift - 1);
  const uint64_t vectors = s.words / 2;
  const uint64_t units = (vectors + unit_vectors - 1) >> (shift - 1);
  const uint64_t warp = grid_thread() / 32, warps = grid_stride() / 32;
  const uint64_t rounds = (units + warps - 1) / warps;
  for (uint64_t r = 0; r < rounds; ++r) {
    const uint64_t unit = sweep_vector(r, rounds, warp, warps, s.descending);
    if (unit >= units) continue;  // the same for the whole warp
    const Pattern sub = random_block_pattern(s.expect, unit_block(s.expect, unit));
    const uint64_t first = unit * unit_vectors;
    const uint64_t count = vectors - first < unit_vectors ? vectors - first : unit_vectors;
    switch (sub.kind) {
      case PatternKind::kOwnAddress: sweep_unit_as<PatternKind::kOwnAddress, O>(s, sub, first, count); break;
      case PatternKind::kWalkingOnes: sweep_unit_as<PatternKind::kWalkingOnes, O>(s, sub, first, count); break;
      case PatternKind::kWalkingZeros: sweep_unit_as<PatternKind::kWalkingZeros, O>(s, sub, first, count); break;
      case PatternKind::kSolid: sweep_unit_as<PatternKind::kSolid, O>(s, sub, first, count); break;
      case PatternKind::kCheckerboard: sweep_unit_as<PatternKind::kCheckerboard, O>(s, sub, first, count); break;
      default: sweep_unit_as<PatternKind::kRandom, O>(s, sub, first, count); break;
    }
  }
  if (!s.descending) sweep_tail<PatternKind::kRandomBlocks, O>(s);
}

// Calls f with the pattern kind as a compile-time constant.
template <typename F>
void with_kind(PatternKind kind, F&& f) {
  switch (kind) {
    case PatternKind::kOwnAddress: f(std::integral_constant<PatternKind, PatternKind::kOwnAddress>{}); break;
    case PatternKind::kWalkingOnes: f(std::integral_constant<PatternKind, PatternKind::kWalkingOnes>{}); break;
    case PatternKind::kWalkingZeros: f(std::integral_constant<PatternKind, PatternKind::kWalkingZeros>{}); break;
    case PatternKind::kSolid: f(std::integral_constant<PatternKind, PatternKind::kSolid>{}); break;
    case PatternKind::kCheckerboard: f(std::integral_constant<PatternKind, PatternKind::kCheckerboard>{}); break;
    case PatternKind::kWalking8: f(std::integral_constant<PatternKind, PatternKind::kWalking8>{}); break;
    case PatternKind::kModulo20: f(std::integral_constant<PatternKind, PatternKind::kModulo20>{}); break;
    case PatternKind::kRandom: f(std::integral_constant<PatternKind, PatternKind::kRandom>{}); break;
    case PatternKind::kRandomBlocks: f(std::integral_constant<PatternKind, PatternKind::kRandomBlocks>{}); break;
  }
}

template <Op O>
cudaError_t launch_sweep(const Sweep& s, LaunchShape shape, cudaStream_t stream) {
  // launch_verify never sends kCheckWriteKind to units: they carry one block pattern, not two.
  if constexpr (O != Op::kCheckWriteKind) {
    if (sweeps_by_unit(s.expect)) {
      const uint64_t unit_vectors = uint64_t{1} << (unit_shift(s.expect) - 1);
      const uint64_t units = (s.words / 2 + unit_vectors - 1) / unit_vectors;
      const auto kernel = sweep_units_kernel<O>;
      kernel<<<one_wave_blocks(kernel, units * 32, shape), shape.threads, 0, stream>>>(s);
      return cudaGetLastError();
    }
  }
  // One thread per group of vectors is enough; more would only idle.
  const uint64_t groups = (s.words + 2 * kSweepUnroll - 1) / (2 * kSweepUnroll);
  with_kind(s.expect.kind, [&](auto kind) {
    const auto kernel = sweep_kernel<decltype(kind)::value, O>;
    const unsigned blocks = one_wave_blocks(kernel, groups, shape);
    // The steps here: a 64-bit division by the grid's size is a subroutine call on the device.
    Sweep grid = s;
    grid.steps = sweep_steps(s.words / 2, uint64_t{blocks} * shape.threads);
    kernel<<<blocks, shape.threads, 0, stream>>>(grid);
  });
  return cudaGetLastError();
}

// 16-byte accesses need 16-byte alignment; every cudaMalloc pointer has it.
bool aligned(const uint64_t* data) { return reinterpret_cast<uintptr_t>(data) % sizeof(ulonglong2) == 0; }

}  // namespace

cudaError_t launch_fill(uint64_t* data, uint64_t words, const Pattern& p, LaunchShape shape, cudaStream_t stream) {
  if (words == 0) return cudaSuccess;
  if (static_cast<uint32_t>(p.kind) >= kPatternKinds || !aligned(data)) return cudaErrorInvalidValue;
  const Sweep s{data, words, p, p.inverted ? ~0ULL : 0, p, false, nullptr};
  return launch_sweep<Op::kFill>(s, shape, stream);
}

cudaError_t launch_verify(uint64_t* data, uint64_t words, const Pattern& expect, const Pattern* then_write,
                          bool descending, DeviceMismatchLog* log, LaunchShape shape, cudaStream_t stream) {
  if (static_cast<uint32_t>(expect.kind) >= kPatternKinds || !aligned(data)) return cudaErrorInvalidValue;
  const cudaError_t reset = cudaMemsetAsync(log, 0, sizeof(DeviceMismatchLog), stream);
  if (reset != cudaSuccess || words == 0) return reset;
  const Sweep s{data, words, expect, expect.inverted ? ~0ULL : 0, then_write ? *then_write : expect, descending, log};
  if (then_write == nullptr) return launch_sweep<Op::kCheck>(s, shape, stream);
  if (is_bitwise_inverse(expect, *then_write)) return launch_sweep<Op::kCheckInverse>(s, shape, stream);
  if (then_write->kind == expect.kind && !sweeps_by_unit(expect)) {
    return launch_sweep<Op::kCheckWriteKind>(s, shape, stream);
  }
  return launch_sweep<Op::kCheckWrite>(s, shape, stream);
}

}  // namespace sdc
