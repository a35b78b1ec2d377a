// Mismatch records as a CUDA kernel writes them: a fixed array in device memory, slots claimed in
// the order threads find mismatches. The host converts them into MismatchRecords and keeps the
// lowest indices.
#pragma once

#include <cstdint>

namespace sdc {

// More slots than MismatchReport keeps, so that the lowest indices are usually among those
// claimed even though slots go to whichever thread finds a mismatch first.
inline constexpr unsigned kDeviceMismatchSlots = 64;

struct DeviceMismatch {
  unsigned long long index;
  unsigned long long expected;
  unsigned long long observed;
  unsigned unit;  // %smid
  unsigned lane;  // %laneid
};

struct DeviceMismatchLog {
  unsigned long long mismatches;  // all mismatches; records[0, min(mismatches, slots)) are valid
  DeviceMismatch records[kDeviceMismatchSlots];
};

}  // namespace sdc
