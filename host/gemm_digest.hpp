// The digest of a GEMM output, compared between repeats and devices.
#pragma once

#include <cstdint>

#include "kernels/common/digest.hpp"

namespace sdc {

// Order-independent digest of C's words.
Digest128 gemm_digest(const void* c, uint64_t bytes, int threads);

}  // namespace sdc
