// The order in which the memory kernels visit a buffer of 64-bit words: 16-byte vectors (two
// words), kSweepUnroll of them in flight per thread. Pure index arithmetic, shared with the CPU
// tests that check every vector is visited exactly once, in the promised order.
//
// A sweep lays `threads` consecutive vectors per step (so a warp's accesses are coalesced) and
// gives thread t vector step * threads + t. Steps go in groups of kSweepUnroll: a thread loads the
// group's vectors, then checks and rewrites them one by one. Descending reverses both the steps and
// the thread map (thread 0 takes the top of each step), so every thread's vectors are visited in
// ascending or descending address order, and each is read before it is rewritten. Threads still
// run concurrently: the order is per thread, not global.
#pragma once

#include <cstdint>

#include "kernels/common/patterns.hpp"
#include "kernels/common/sdc_hd.hpp"

namespace sdc {

inline constexpr unsigned kSweepUnroll = 4;

// Steps that cover `vectors` with `threads` per step, rounded up to whole groups of `unroll`.
SDC_HD uint64_t sweep_steps(uint64_t vectors, uint64_t threads, unsigned unroll = kSweepUnroll) {
  const uint64_t per_group = threads * unroll;
  return (vectors + per_group - 1) / per_group * unroll;
}

// The vector thread `thread` visits at position k (0, 1, ...) of `steps` steps. Callers skip
// vectors at or past the end.
SDC_HD uint64_t sweep_vector(uint64_t k, uint64_t steps, uint64_t thread, uint64_t threads, bool descending) {
  return descending ? (steps - 1 - k) * threads + (threads - 1 - thread) : k * threads + thread;
}

// The same walk by addition, as the kernels take it: position k of a thread is
// sweep_first + k * sweep_delta (mod 2^64), so a step costs an add, not a multiply and a select.
SDC_HD uint64_t sweep_first(uint64_t steps, uint64_t thread, uint64_t threads, bool descending) {
  return sweep_vector(0, steps, thread, threads, descending);
}
SDC_HD uint64_t sweep_delta(uint64_t threads, bool descending) { return descending ? 0 - threads : threads; }

// kRandomBlocks by unit: a warp takes one unit of 2^shift words at a time, computes the block
// pattern once for it, and sweeps the unit with its 32 lanes; a check takes groups of kUnitUnroll
// vectors a lane, so a 4 KiB block (mem.random_blocks') is one group, all its loads in flight. Units
// are whole blocks up to 2^kMaxUnitShift words, so that huge blocks still spread over the grid,
// and at least half a warp's group (32 lanes x kUnitUnroll / 2 vectors x 2 words =
// 2^kMinUnitShift). Smaller blocks take the plain per-word path.
inline constexpr unsigned kUnitUnroll = 8;
inline constexpr unsigned kMinUnitShift = 8;
inline constexpr unsigned kMaxUnitShift = 12;

SDC_HD unsigned block_shift(const Pattern& p) { return static_cast<unsigned>(p.param & 63u); }
SDC_HD bool sweeps_by_unit(const Pattern& p) {
  return p.kind == PatternKind::kRandomBlocks && block_shift(p) >= kMinUnitShift;
}
SDC_HD unsigned unit_shift(const Pattern& p) { return block_shift(p) < kMaxUnitShift ? block_shift(p) : kMaxUnitShift; }
// The random block that unit `unit` lies in (a unit never straddles two).
SDC_HD uint64_t unit_block(const Pattern& p, uint64_t unit) { return unit >> (block_shift(p) - unit_shift(p)); }

}  // namespace sdc
