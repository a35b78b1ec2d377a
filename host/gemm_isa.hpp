// The instruction sets the host GEMM loops are compiled for besides the baseline, chosen at run
// time (like the chain kernels): input generation and the FP64 checks.
#pragma once

namespace sdc {

#if defined(__x86_64__)
inline bool gemm_have_avx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}
inline bool gemm_have_avx512() {
  static const bool have = __builtin_cpu_supports("avx512f");
  return have;
}
#define SDC_GEMM_AVX2 __attribute__((target("avx2")))
// gcc takes the preferred vector width in target(), clang as an attribute of its own (and ignores
// a target() that names it).
#if defined(__clang__)
#define SDC_GEMM_AVX512 __attribute__((target("avx512f"), min_vector_width(512)))
#else
#define SDC_GEMM_AVX512 __attribute__((target("avx512f,prefer-vector-width=512")))
#endif
#else
inline bool gemm_have_avx2() { return false; }
inline bool gemm_have_avx512() { return false; }
#define SDC_GEMM_AVX2
#define SDC_GEMM_AVX512
#endif

}  // namespace sdc
