// The instruction sets the host GEMM loops are compiled for besides the baseline, chosen at run
// time (like the chain kernels): input generation and the FP64 checks.
#pragma once

namespace sdc {

inline bool gemm_have_avx2() {
#if defined(__x86_64__)
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
#else
  return false;
#endif
}

inline bool gemm_have_avx512() {
#if defined(__x86_64__)
  static const bool have = __builtin_cpu_supports("avx512f");
  return have;
#else
  return false;
#endif
}

#if defined(__x86_64__)
#define SDC_GEMM_AVX2 __attribute__((target("avx2")))
#define SDC_GEMM_AVX512 __attribute__((target("avx512f,prefer-vector-width=512")))
#else
#define SDC_GEMM_AVX2
#define SDC_GEMM_AVX512
#endif

}  // namespace sdc
