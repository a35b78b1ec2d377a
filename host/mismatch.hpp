// A mismatch is data, not an exception: verification ops return how many elements they checked,
// how many differed, and the first few differences in index order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdc {

struct MismatchRecord {
  uint64_t index = 0;     // element index (memory probes: 64-bit word index; byte offset = 8 * index)
  uint64_t expected = 0;  // zero-extended element bits
  uint64_t observed = 0;
  unsigned width_bits = 64;
  int unit = -1;  // CUDA: SM id (%smid) that computed it; CPU: core id; -1 for memory words
  int lane = -1;  // CUDA: warp lane (%laneid); CPU: SIMD lane
  // CUDA chains: the producing warp read a different %smid at its end than at its start (it was
  // preempted and moved), so no SM can be named (unit is -1).
  bool preempted = false;

  uint64_t syndrome() const { return expected ^ observed; }
  std::vector<int> bit_positions() const;
};

struct MismatchReport {
  static constexpr size_t kMaxRecords = 16;

  uint64_t checked = 0;
  uint64_t mismatches = 0;
  std::vector<MismatchRecord> records;  // at most kMaxRecords, lowest indices first

  // Adds a record if it is among the kMaxRecords lowest indices seen (counts are not touched).
  void keep(const MismatchRecord& r);
  void merge(const MismatchReport& other);
};

}  // namespace sdc
