#include "host/mismatch.hpp"

#include <algorithm>

namespace sdc {

std::vector<int> MismatchRecord::bit_positions() const {
  std::vector<int> bits;
  const uint64_t s = syndrome();
  for (int b = 0; b < 64; ++b) {
    if ((s >> b) & 1u) bits.push_back(b);
  }
  return bits;
}

void MismatchReport::keep(const MismatchRecord& r) {
  auto by_index = [](const MismatchRecord& a, const MismatchRecord& b) { return a.index < b.index; };
  records.insert(std::upper_bound(records.begin(), records.end(), r, by_index), r);
  if (records.size() > kMaxRecords) records.pop_back();
}

void MismatchReport::merge(const MismatchReport& other) {
  checked += other.checked;
  mismatches += other.mismatches;
  for (const auto& r : other.records) keep(r);
}

}  // namespace sdc
