// The host's GEMM output digest (gemm_digest.hpp).
#include "host/gemm_digest.hpp"

namespace sdc {

Digest128 gemm_digest(const void* c, uint64_t bytes, int threads) {
  const uint64_t words = bytes / 8;
  const uint64_t* w = static_cast<const uint64_t*>(c);
  uint64_t lo = 0, hi = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : lo, hi)
  for (int64_t i = 0; i < static_cast<int64_t>(words); ++i) {
    lo += digest_term_lo(w[i], static_cast<uint64_t>(i));
    hi += digest_term_hi(w[i], static_cast<uint64_t>(i));
  }
  Digest128 d;
  d.lo = lo;
  d.hi = hi;
  return d;
}

}  // namespace sdc
