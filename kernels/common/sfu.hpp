// Element logic of sfu.transcendental, shared by host and device: the seeded inputs of the six
// hardware approximations, the output layout, and the error bounds the CUDA documentation states for
// them. The approximations themselves are device-only intrinsics (kernels/sfu.cu) or the host's libm
// (host/cpu_sfu.cpp); they are not correctly rounded, so there is no bit-exact golden, only a loose
// check against FP64 here and bitwise consensus across devices.
#pragma once

#include <cstdint>

#include "kernels/common/gemm_elements.hpp"  // float_of_bits, bits_of_float
#include "kernels/common/random.hpp"
#include "kernels/common/sdc_hd.hpp"

#if !defined(__CUDACC__)
#include <cmath>
#endif

namespace sdc {

// Output layout: function f writes elements [f * n, (f + 1) * n), n elements per function.
enum class SfuFunction : uint32_t { kSin, kCos, kExp, kLog2, kRsqrt, kDivide };
inline constexpr uint32_t kSfuFunctions = 6;

// Input ranges, each inside the range where its documented bound holds.
inline constexpr float kSfuPiBelow = 0x1.921fb4p+1f;  // the largest float below pi: sin, cos in [-pi, pi]
inline constexpr float kSfuExpRange = 20.0f;          // exp in [-20, 20]: results stay normal
inline constexpr int kSfuLog2MinExp = -10;            // log2 in [2^-10, 2^10): 2 of 20 binades in [0.5, 2)
inline constexpr int kSfuLog2MaxExp = 10;
inline constexpr int kSfuOperandMinExp = -20;  // rsqrt and both division operands: |v| in [2^-20, 2^20)
inline constexpr int kSfuOperandMaxExp = 20;

// One element's operands; y is the divisor of kDivide and 1 otherwise.
struct SfuArgs {
  float x;
  float y;
};

SDC_HD SfuFunction sfu_function_of(uint64_t element, uint64_t per_function) {
  return static_cast<SfuFunction>(element / per_function);
}

// The warp lane that computes `element` on a GPU: launch_sfu's threads take elements grid-stride
// (thread t: t, t + stride, ...) in blocks of a multiple of 32 threads, so the stride is one too.
SDC_HD int sfu_lane_of(uint64_t element) { return static_cast<int>(element % 32); }

// Draw `draw` (0 or 1) of element k of function f: each (function, element, draw) has its own counter.
SDC_HD uint64_t sfu_random(uint64_t seed, SfuFunction f, uint64_t k, uint32_t draw) {
  return counter_random(seed, ((static_cast<uint64_t>(f) * 2 + draw) << 48) | k);
}

// Uniform in [0, 1) from bits 40..63: 24 bits, exact in float.
SDC_HD float sfu_unit(uint64_t r) { return static_cast<float>(r >> 40) * 0x1p-24f; }

// Log-uniform over [2^lo, 2^hi): a binade from bits 32..63 and 23 significand bits from bits 0..22,
// assembled as bits, so no rounding can differ between host and device.
SDC_HD float sfu_log_uniform(uint64_t r, int lo, int hi) {
  const uint64_t binade = ((r >> 32) * static_cast<uint64_t>(hi - lo)) >> 32;
  const int e = lo + static_cast<int>(binade);
  return float_of_bits((static_cast<uint32_t>(e + 127) << 23) | static_cast<uint32_t>(r & 0x7fffffu));
}

SDC_HD float sfu_negate_if(bool negate, float v) { return negate ? -v : v; }

// The operands of element k of function f. Uniform inputs take one IEEE multiply (no contraction
// possible), so host and device generate the same bits.
SDC_HD SfuArgs sfu_input(uint64_t seed, SfuFunction f, uint64_t k) {
  const uint64_t r = sfu_random(seed, f, k, 0);
  switch (f) {
    case SfuFunction::kSin:
    case SfuFunction::kCos: return {sfu_negate_if((r >> 39) & 1u, kSfuPiBelow * sfu_unit(r)), 1.0f};
    case SfuFunction::kExp: return {sfu_negate_if((r >> 39) & 1u, kSfuExpRange * sfu_unit(r)), 1.0f};
    case SfuFunction::kLog2: return {sfu_log_uniform(r, kSfuLog2MinExp, kSfuLog2MaxExp), 1.0f};
    case SfuFunction::kRsqrt: return {sfu_log_uniform(r, kSfuOperandMinExp, kSfuOperandMaxExp), 1.0f};
    case SfuFunction::kDivide: {
      const uint64_t s = sfu_random(seed, f, k, 1);
      return {sfu_negate_if((r >> 31) & 1u, sfu_log_uniform(r, kSfuOperandMinExp, kSfuOperandMaxExp)),
              sfu_negate_if((s >> 31) & 1u, sfu_log_uniform(s, kSfuOperandMinExp, kSfuOperandMaxExp))};
    }
  }
  return {0.0f, 1.0f};
}

// The exact function in FP64 (every float input is exact in double).
SDC_HD double sfu_reference(SfuFunction f, SfuArgs a) {
  const double x = a.x;
  switch (f) {
    case SfuFunction::kSin: return sin(x);
    case SfuFunction::kCos: return cos(x);
    case SfuFunction::kExp: return exp(x);
    case SfuFunction::kLog2: return log2(x);
    case SfuFunction::kRsqrt: return 1.0 / sqrt(x);
    case SfuFunction::kDivide: return x / static_cast<double>(a.y);
  }
  return 0.0;
}

// A documented bound: an absolute error, or ulps of the correctly rounded result.
struct SfuBound {
  bool absolute;
  double limit;
};

// The bounds as documented for the CUDA Math API's Single Precision Intrinsics and Single Precision
// Mathematical Functions: the CUDA C++ Programming Guide, Mathematical Functions appendix, tables
// "Single-Precision Floating-Point Intrinsic Functions" and (rsqrtf) "Single-Precision Mathematical
// Standard Library Functions", to which those API pages refer for accuracy:
//   __sinf(x)      "For x in [-pi, pi], the maximum absolute error is 2^-21.41, and larger otherwise."
//   __cosf(x)      "For x in [-pi, pi], the maximum absolute error is 2^-21.19, and larger otherwise."
//   __expf(x)      "The maximum ulp error is 2 + floor(abs(1.173 * x))."
//   __log2f(x)     "For x in [0.5, 2], the maximum absolute error is 2^-22, otherwise, the maximum
//                  ulp error is 2."
//   rsqrtf(x)      "2 (full range)" ulps (standard single-precision functions table)
//   __fdividef(x,y) "For |y| in [2^-126, 2^126], the maximum ulp error is 2."
// Ulp errors there are measured against the correctly rounded result. 2^-21.41 and 2^-21.19 are
// written rounded up in the last place of a double.
SDC_HD SfuBound sfu_bound(SfuFunction f, SfuArgs a) {
  switch (f) {
    case SfuFunction::kSin: return {true, 0x1.8157d9d08a78ep-22};
    case SfuFunction::kCos: return {true, 0x1.c0d2771113e53p-22};
    // Exact in double for |x| <= 20: where 1.173 * |x| >= 1, x is a multiple of 2^-24, so 1.173 * x
    // lies at least 1 / (1000 * 2^24) from any integer (1173 is prime to 10), far beyond its rounding.
    case SfuFunction::kExp: return {false, 2.0 + floor(fabs(1.173 * static_cast<double>(a.x)))};
    case SfuFunction::kLog2: return a.x >= 0.5f && a.x <= 2.0f ? SfuBound{true, 0x1p-22} : SfuBound{false, 2.0};
    case SfuFunction::kRsqrt:
    case SfuFunction::kDivide: return {false, 2.0};
  }
  return {true, 0.0};
}

// One ulp of the float nearest to v (v in the normal range, as every output here is).
SDC_HD double sfu_ulp(double v) {
  const int e = static_cast<int>((bits_of_float(static_cast<float>(v)) >> 23) & 0xffu);
  return ldexp(1.0, (e == 0 ? 1 : e) - 150);
}

// The error the bound allows around the FP64 reference. Measured from the FP64 reference, an ulp
// bound k against the correctly rounded result allows k + 1/2 ulps. The reference itself may be off
// by an ulp of a double (2^-52 relative: glibc's sin, cos, exp and log2; sqrt and '/' are correctly
// rounded), so 2^-50 of |reference| is added: a 2^-26 fraction of a float ulp, no looser in practice.
SDC_HD double sfu_allowed_error(SfuFunction f, SfuArgs a, double reference) {
  const SfuBound b = sfu_bound(f, a);
  return (b.absolute ? b.limit : (b.limit + 0.5) * sfu_ulp(reference)) + 0x1p-50 * fabs(reference);
}

// |observed - reference| as a fraction of `allowed`: at most 1 within the bound; +inf for NaN or
// infinity. The host keeps reference and allowed per input set, so a repeated check costs this alone.
SDC_HD double sfu_ratio_to_allowed(float observed, double reference, double allowed) {
  const double error = fabs(static_cast<double>(observed) - reference);
  if (!(error <= 1e300)) return HUGE_VAL;
  return error / allowed;
}

SDC_HD double sfu_error_ratio(SfuFunction f, SfuArgs a, float observed, double reference) {
  return sfu_ratio_to_allowed(observed, reference, sfu_allowed_error(f, a, reference));
}

SDC_HD bool sfu_within_bound(SfuFunction f, SfuArgs a, float observed, double reference) {
  return sfu_error_ratio(f, a, observed, reference) <= 1.0;
}

}  // namespace sdc
