// Mismatch records as a CUDA kernel writes them: a fixed array in device memory, slots claimed in
// the order warps find mismatches. The host converts them into MismatchRecords and keeps the
// lowest indices.
#pragma once

#include <cstdint>

#include "kernels/common/sdc_hd.hpp"

namespace sdc {

// More slots than MismatchReport keeps, so that the lowest indices are usually among those
// claimed even though slots go to whichever warp finds a mismatch first.
inline constexpr unsigned kDeviceMismatchSlots = 64;

// DeviceMismatch::unit values that are not an SM: memory words (the SM that read a word says
// nothing about where it is wrong: the address does), and chain copies whose warp moved between
// SMs while it ran (preemption), whose SM is therefore unknown.
inline constexpr unsigned kNoUnit = 0xffffffffu;
inline constexpr unsigned kUnitMoved = 0xfffffffeu;

struct DeviceMismatch {
  unsigned long long index;
  unsigned long long expected;
  unsigned long long observed;
  unsigned unit;  // %smid, kNoUnit or kUnitMoved
  unsigned lane;  // %laneid, or kNoUnit
};

struct DeviceMismatchLog {
  unsigned long long mismatches;  // all mismatches; records[0, min(mismatches, slots)) are valid
  DeviceMismatch records[kDeviceMismatchSlots];
};

// Warp aggregation: the lanes of a warp that found a mismatch (`hits`, a ballot) take one
// atomicAdd for all of them, made by the lowest such lane, which returns `base`; each lane's slot
// is base plus the number of hit lanes below it. The count stays exact; slots at or past
// kDeviceMismatchSlots are not written, so a whole-buffer fault costs one atomic per warp.
SDC_HD unsigned popcount32(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__popc(x));
#else
  return static_cast<unsigned>(__builtin_popcount(x));
#endif
}
SDC_HD unsigned warp_leader(uint32_t hits) {
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__ffs(static_cast<int>(hits)) - 1);
#else
  return static_cast<unsigned>(__builtin_ctz(hits));
#endif
}
SDC_HD unsigned long long warp_slot(unsigned long long base, uint32_t hits, unsigned lane) {
  return base + popcount32(hits & ((1u << lane) - 1u));
}
SDC_HD bool slot_recorded(unsigned long long slot) { return slot < kDeviceMismatchSlots; }

// A chain copy's producer tag: the lane in bits 0-4, the SM the copy started on above them, and
// the top bit set when the SM read at the end differs from the one read at the start.
inline constexpr uint32_t kProducerMoved = 0x80000000u;
SDC_HD uint32_t producer_tag_of(unsigned start_sm, unsigned end_sm, unsigned lane) {
  return ((start_sm << 5) & ~kProducerMoved) | (lane & 31u) | (start_sm != end_sm ? kProducerMoved : 0u);
}
// The SM to name in a record: kUnitMoved for a copy that moved.
SDC_HD unsigned producer_unit(uint32_t tag) {
  return (tag & kProducerMoved) != 0 ? kUnitMoved : (tag & ~kProducerMoved) >> 5;
}
SDC_HD unsigned producer_lane(uint32_t tag) { return tag & 31u; }

}  // namespace sdc
