// Element logic of the gemm.* probes, shared by host and device: the small float formats (fp16,
// bf16, fp8 e4m3 / e5m2, tf32), the counter-based input generators, and the bounds that keep exact
// GEMMs exact. The CPU tests exercise every function here; the CUDA kernels call the same code.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/common/random.hpp"
#include "kernels/common/sdc_hd.hpp"

#if !defined(__CUDACC__)
#include <cmath>
#endif

namespace sdc {

// Input element types of the GEMM probes. Outputs: fp64 for kFp64, int32 for kInt8, fp32 otherwise,
// so that exact GEMMs stay exact in the output.
enum class GemmType : uint8_t { kFp64, kFp32, kTf32, kFp16, kBf16, kE4m3, kE5m2, kInt8 };

enum class GemmInputs : uint8_t {
  kExact,   // bounded integers: exact in any summation order, checked bit for bit (int64 Freivalds)
  kDense,   // BF16 odd full significands, k <= 256, exact
  kScaled,  // exact integers scaled by powers of two per row of A and per column of B
  kRandom,  // full-significand random values, checked by FP64 Freivalds/ABFT against the bound tau
};

// A small binary float format: `exp_bits` exponent bits with `bias`, `man_bits` stored significand
// bits. e4m3 is the "fn" variant (no infinities; S.1111.111 is NaN).
struct MiniFloat {
  unsigned exp_bits;
  unsigned man_bits;
  int bias;
  bool has_inf;
};

inline constexpr MiniFloat kFp16Format{5, 10, 15, true};
inline constexpr MiniFloat kBf16Format{8, 7, 127, true};
inline constexpr MiniFloat kE4m3Format{4, 3, 7, false};
inline constexpr MiniFloat kE5m2Format{5, 2, 15, true};

SDC_HD float float_of_bits(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}
SDC_HD uint32_t bits_of_float(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

// 2^e as a float, for e in [-149, 127], built from bits (no libm on either side).
SDC_HD float exp2_float(int e) {
  if (e >= -126) return float_of_bits(static_cast<uint32_t>(e + 127) << 23);
  return float_of_bits(1u << (e + 149));
}

// Value of `bits` in format `f`, exactly (every value of these formats is a float).
SDC_HD float minifloat_to_float(uint32_t bits, MiniFloat f) {
  const uint32_t total = 1 + f.exp_bits + f.man_bits;
  const bool negative = (bits >> (total - 1)) & 1u;
  const uint32_t exp_max = (1u << f.exp_bits) - 1;
  const uint32_t exp = (bits >> f.man_bits) & exp_max;
  const uint32_t man = bits & ((1u << f.man_bits) - 1);
  float v;
  if (exp == exp_max && f.has_inf) {
    v = man == 0 ? float_of_bits(0x7f800000u) : float_of_bits(0x7fc00000u);
  } else if (exp == exp_max && !f.has_inf && man == (1u << f.man_bits) - 1) {
    v = float_of_bits(0x7fc00000u);
  } else if (exp == 0) {
    v = static_cast<float>(man) * exp2_float(1 - f.bias - static_cast<int>(f.man_bits));
  } else {
    v = static_cast<float>((1u << f.man_bits) + man) *
        exp2_float(static_cast<int>(exp) - f.bias - static_cast<int>(f.man_bits));
  }
  return negative ? -v : v;
}

// Bits of `v` in format `f`, for a finite `v` the format represents exactly (the generators only
// produce such values; anything else is a programming error and gives a NaN encoding).
SDC_HD uint32_t float_to_minifloat_exact(float v, MiniFloat f) {
  const uint32_t total = 1 + f.exp_bits + f.man_bits;
  const uint32_t sign = (bits_of_float(v) >> 31) << (total - 1);
  const uint32_t a = bits_of_float(v) & 0x7fffffffu;
  if (a == 0) return sign;
  int e = static_cast<int>(a >> 23) - 127;  // fp32 normal exponent
  uint32_t sig = (a & 0x7fffffu) | 0x800000u;
  if ((a >> 23) == 0) {  // fp32 subnormal: below every format's range here
    return sign | ((1u << (total - 1)) - 1);
  }
  const int biased = e + f.bias;
  if (biased >= 1) {
    const uint32_t man = (sig & 0x7fffffu) >> (23 - f.man_bits);
    return sign | (static_cast<uint32_t>(biased) << f.man_bits) | man;
  }
  // Subnormal in the format: value = man * 2^(1 - bias - man_bits).
  const int shift = 23 - static_cast<int>(f.man_bits) + (1 - biased);
  const uint32_t man = shift >= 32 ? 0u : sig >> shift;
  return sign | man;
}

SDC_HD float bf16_to_float(uint16_t b) { return float_of_bits(static_cast<uint32_t>(b) << 16); }
SDC_HD float fp16_to_float(uint16_t b) { return minifloat_to_float(b, kFp16Format); }
SDC_HD float e4m3_to_float(uint8_t b) { return minifloat_to_float(b, kE4m3Format); }
SDC_HD float e5m2_to_float(uint8_t b) { return minifloat_to_float(b, kE5m2Format); }

// Bytes per input element, and per output element.
SDC_HD unsigned gemm_input_bytes(GemmType t) {
  switch (t) {
    case GemmType::kFp64: return 8;
    case GemmType::kFp32:
    case GemmType::kTf32: return 4;
    case GemmType::kFp16:
    case GemmType::kBf16: return 2;
    default: return 1;
  }
}
SDC_HD unsigned gemm_output_bytes(GemmType t) { return t == GemmType::kFp64 ? 8 : 4; }

// Converts one stored input element to float (fp64 inputs are read as doubles by the callers).
SDC_HD float gemm_input_to_float(GemmType t, const void* data, uint64_t i) {
  switch (t) {
    case GemmType::kFp32:
    case GemmType::kTf32: return static_cast<const float*>(data)[i];
    case GemmType::kFp16: return fp16_to_float(static_cast<const uint16_t*>(data)[i]);
    case GemmType::kBf16: return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    case GemmType::kE4m3: return e4m3_to_float(static_cast<const uint8_t*>(data)[i]);
    case GemmType::kE5m2: return e5m2_to_float(static_cast<const uint8_t*>(data)[i]);
    case GemmType::kInt8: return static_cast<float>(static_cast<const int8_t*>(data)[i]);
    case GemmType::kFp64: return static_cast<float>(static_cast<const double*>(data)[i]);
  }
  return 0;
}

// Stores float `v` (exactly representable in `t`) as element i of a buffer of type `t`.
SDC_HD void gemm_store_input(GemmType t, void* data, uint64_t i, float v) {
  switch (t) {
    case GemmType::kFp32:
    case GemmType::kTf32: static_cast<float*>(data)[i] = v; break;
    case GemmType::kFp16:
      static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(float_to_minifloat_exact(v, kFp16Format));
      break;
    case GemmType::kBf16: static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(bits_of_float(v) >> 16); break;
    case GemmType::kE4m3:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(float_to_minifloat_exact(v, kE4m3Format));
      break;
    case GemmType::kE5m2:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(float_to_minifloat_exact(v, kE5m2Format));
      break;
    case GemmType::kInt8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v); break;
    case GemmType::kFp64: static_cast<double*>(data)[i] = v; break;
  }
}

// --- Counter-based generator --------------------------------------------------------------------

// 32 random bits for element i of a stream keyed by `key` (a 32-bit hash that vectorises: the
// inputs of an n = 8192 GEMM cost a few milliseconds to generate). key = gemm_stream_key(seed, s).
// gemm_random32 with the index split into its low and high 32-bit halves (loops over 32-bit lanes).
SDC_HD uint32_t gemm_random32_parts(uint32_t key, uint32_t low, uint32_t high) {
  uint32_t x = low ^ (high * 0x85ebca6bu) ^ key;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x + key * 0x9e3779b9u;
}

SDC_HD uint32_t gemm_random32(uint32_t key, uint64_t i) {
  return gemm_random32_parts(key, static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32));
}

SDC_HD uint32_t gemm_stream_key(uint64_t seed, uint32_t stream) {
  return static_cast<uint32_t>(mix64(seed ^ (0x6a09e667f3bcc909ULL * (stream + 1))) >> 32);
}

// Streams of one GEMM's inputs.
inline constexpr uint32_t kGemmStreamA = 0;
inline constexpr uint32_t kGemmStreamB = 1;
inline constexpr uint32_t kGemmStreamRowScale = 2;
inline constexpr uint32_t kGemmStreamColScale = 3;

// An integer uniform in [-m, m].
SDC_HD int32_t gemm_uniform_int(uint32_t r, uint32_t m) {
  return static_cast<int32_t>((static_cast<uint64_t>(r) * (2u * m + 1)) >> 32) - static_cast<int32_t>(m);
}

// --- Exactness bounds ---------------------------------------------------------------------------

// Largest integer magnitude the input type holds exactly with all smaller integers.
SDC_HD uint32_t gemm_type_integer_limit(GemmType t) {
  switch (t) {
    case GemmType::kFp64: return 1u << 12;
    case GemmType::kFp32: return 1u << 12;
    case GemmType::kTf32: return 2048;
    case GemmType::kFp16: return 2048;
    case GemmType::kBf16: return 256;
    case GemmType::kE4m3: return 16;
    case GemmType::kE5m2: return 8;
    case GemmType::kInt8: return 127;
  }
  return 1;
}

// Bound on every partial sum |sum_p a_ip b_pj| that keeps the accumulation exact in any order:
// 2^24 for FP32 accumulation (DESIGN "exact golden by construction"), INT32 for int8, and 2^13 for
// fp8, whose tensor-core accumulation on Hopper keeps only about 14 significant bits inside a block
// (a conservative allowance: exactness must never depend on the accumulator being better than that).
SDC_HD uint64_t gemm_exact_sum_limit(GemmType t) {
  switch (t) {
    case GemmType::kInt8: return (1ULL << 31) - 1;
    case GemmType::kE4m3:
    case GemmType::kE5m2: return 1ULL << 13;
    default: return 1ULL << 24;
  }
}

SDC_HD uint32_t isqrt64(uint64_t v) {
  uint64_t r = 0;
  for (int b = 31; b >= 0; --b) {
    const uint64_t c = r | (1ULL << b);
    if (c * c <= v) r = c;
  }
  return static_cast<uint32_t>(r);
}

// Input magnitude for exact GEMMs of depth k: k * m^2 <= the sum limit, m <= the type's limit.
SDC_HD uint32_t gemm_exact_magnitude(GemmType t, uint32_t k) {
  const uint32_t by_sum = isqrt64(gemm_exact_sum_limit(t) / (k == 0 ? 1 : k));
  const uint32_t lim = gemm_type_integer_limit(t);
  const uint32_t m = by_sum < lim ? by_sum : lim;
  return m == 0 ? 1 : m;
}

// Power-of-two scaling ranges for gemm.scaled: row and column exponents in [-r, r], and the
// integer magnitude cap, chosen so scaled inputs stay normal and finite in the input type and every
// scaled output stays normal and finite in the output type.
SDC_HD int gemm_scale_range(GemmType t) {
  switch (t) {
    case GemmType::kFp64: return 60;
    case GemmType::kFp32:
    case GemmType::kTf32:
    case GemmType::kBf16: return 20;
    case GemmType::kFp16: return 8;
    case GemmType::kE4m3: return 3;
    case GemmType::kE5m2: return 6;
    case GemmType::kInt8: return 0;
  }
  return 0;
}
SDC_HD uint32_t gemm_scaled_magnitude_cap(GemmType t) {
  switch (t) {
    case GemmType::kFp16: return 64;
    case GemmType::kE4m3:
    case GemmType::kE5m2: return 4;
    default: return 1u << 12;
  }
}

// --- Generators ---------------------------------------------------------------------------------

// Exact GEMM input: an integer in [-mag, mag].
SDC_HD float gemm_exact_value(uint32_t key, uint64_t i, uint32_t mag) {
  return static_cast<float>(gemm_uniform_int(gemm_random32(key, i), mag));
}

// Dense-bit BF16 input: an odd integer in [129, 255] (all eight significand bits in play, the
// lowest always set) with a random sign. With k <= 256 every partial sum is below 255^2 * 256 < 2^24.
inline constexpr uint32_t kGemmDenseMaxK = 256;
SDC_HD float gemm_dense_bf16_value(uint32_t key, uint64_t i) {
  const uint32_t r = gemm_random32(key, i);
  const float v = static_cast<float>(129 + 2 * ((r >> 1) & 63));
  return (r & 1u) ? -v : v;
}

// Scale exponent for row or column i, in [-range, range].
SDC_HD int gemm_scale_exponent(uint32_t key, uint64_t i, int range) {
  return range == 0 ? 0 : gemm_uniform_int(gemm_random32(key, i), static_cast<uint32_t>(range));
}

// Random full-significand input: random sign, exponent in [-3, 0], every stored significand bit
// random, so magnitudes lie in [1/8, 2). Exactly representable in the type. fp64 uses
// gemm_random_double. int8 uses the full range [-127, 127].
SDC_HD float gemm_random_value_of(GemmType t, uint32_t r) {
  const uint32_t sign = r >> 31;
  const uint32_t exp = (r >> 29) & 3u;  // 0..3 -> 2^-3 .. 2^0
  unsigned man_bits = 23;
  switch (t) {
    case GemmType::kFp32: man_bits = 23; break;
    case GemmType::kTf32:
    case GemmType::kFp16: man_bits = 10; break;
    case GemmType::kBf16: man_bits = 7; break;
    case GemmType::kE4m3: man_bits = 3; break;
    case GemmType::kE5m2: man_bits = 2; break;
    case GemmType::kInt8: return static_cast<float>(gemm_uniform_int(r, 127));
    case GemmType::kFp64: man_bits = 23; break;
  }
  const uint32_t man = (r & 0x7fffffu) >> (23 - man_bits) << (23 - man_bits);
  return float_of_bits((sign << 31) | ((124u + exp) << 23) | man);
}

SDC_HD float gemm_random_value(GemmType t, uint32_t key, uint64_t i) {
  return gemm_random_value_of(t, gemm_random32(key, i));
}

SDC_HD double gemm_random_double(uint32_t key, uint64_t i) {
  const uint64_t r = (static_cast<uint64_t>(gemm_random32(key, 2 * i)) << 32) | gemm_random32(key, 2 * i + 1);
  const uint64_t sign = r >> 63;
  const uint64_t exp = (r >> 61) & 3u;
  const uint64_t man = r & ((1ULL << 52) - 1);
  const uint64_t bits = (sign << 63) | ((1020ULL + exp) << 52) | man;
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

// --- One operand's generator --------------------------------------------------------------------

// Everything that fixes the elements of one operand (A, or B stored transposed as Bt): element
// (r, p) of the rows x k matrix, at index r * k + p, is a pure function of this and the index, so
// the host and the device generate the same bits, and a verifier regenerates any row in O(k).
struct GemmGenerator {
  GemmType type = GemmType::kFp32;
  GemmInputs inputs = GemmInputs::kRandom;
  uint32_t k = 0;
  uint32_t key = 0;        // the operand's stream key
  uint32_t scale_key = 0;  // scaled inputs: the key of the row (A) or column (B) exponents
  uint32_t mag = 0;        // exact and scaled inputs: integers in [-mag, mag]
  int range = 0;           // scaled inputs: exponents in [-range, range]
};

SDC_HD bool gemm_inputs_exact(GemmInputs in) { return in != GemmInputs::kRandom; }

// Integer magnitude of the exact families (scaled ones are capped further).
SDC_HD uint32_t gemm_input_magnitude(GemmType t, GemmInputs in, uint32_t k) {
  const uint32_t mag = gemm_exact_magnitude(t, k);
  const uint32_t cap = gemm_scaled_magnitude_cap(t);
  return in == GemmInputs::kScaled && cap < mag ? cap : mag;
}

// Bound on |Cint_ij| of the exact families (0 for random inputs).
SDC_HD uint64_t gemm_exact_output_bound(GemmInputs in, uint32_t k, uint32_t mag) {
  if (!gemm_inputs_exact(in)) return 0;
  return in == GemmInputs::kDense ? uint64_t{k} * 255 * 255 : uint64_t{k} * mag * mag;
}

// The generator of operand `stream` (kGemmStreamA or kGemmStreamB) of a GEMM with depth k.
SDC_HD GemmGenerator gemm_generator(GemmType t, GemmInputs in, uint32_t k, uint64_t seed, uint32_t stream) {
  GemmGenerator g;
  g.type = t;
  g.inputs = in;
  g.k = k;
  g.key = gemm_stream_key(seed, stream);
  g.scale_key = gemm_stream_key(seed, stream == kGemmStreamA ? kGemmStreamRowScale : kGemmStreamColScale);
  g.mag = gemm_input_magnitude(t, in, k);
  g.range = in == GemmInputs::kScaled ? gemm_scale_range(t) : 0;
  return g;
}

// Scale exponent of row r (0 unless scaled).
SDC_HD int gemm_generated_exponent(const GemmGenerator& g, uint64_t r) {
  return g.inputs == GemmInputs::kScaled ? gemm_scale_exponent(g.scale_key, r, g.range) : 0;
}

// Exact families: the unscaled integer at index i.
SDC_HD int32_t gemm_generated_int(const GemmGenerator& g, uint64_t i) {
  const float v = g.inputs == GemmInputs::kDense ? gemm_dense_bf16_value(g.key, i) : gemm_exact_value(g.key, i, g.mag);
  return static_cast<int32_t>(v);
}

// The stored value at index i (in row i / k), for every type but fp64 with random inputs.
SDC_HD float gemm_generated_float(const GemmGenerator& g, uint64_t i) {
  if (!gemm_inputs_exact(g.inputs)) return gemm_random_value(g.type, g.key, i);
  const float scale = exp2_float(gemm_generated_exponent(g, i / g.k));
  return static_cast<float>(gemm_generated_int(g, i)) * scale;
}

// The stored value at index i as a double (every type).
SDC_HD double gemm_generated_double(const GemmGenerator& g, uint64_t i) {
  if (g.type == GemmType::kFp64 && !gemm_inputs_exact(g.inputs)) return gemm_random_double(g.key, i);
  return gemm_generated_float(g, i);
}

// Stores element i of the operand into `data` (the input type's encoding).
SDC_HD void gemm_generate_element(const GemmGenerator& g, void* data, uint64_t i) {
  if (g.type == GemmType::kFp64) {
    static_cast<double*>(data)[i] = gemm_generated_double(g, i);
  } else {
    gemm_store_input(g.type, data, i, gemm_generated_float(g, i));
  }
}

// --- Verification bounds ------------------------------------------------------------------------

// gamma_k(u) = k u / (1 - k u) (Higham); infinite when k u >= 1.
SDC_HD double gemm_gamma(double k, double u) {
  const double ku = k * u;
  return ku >= 1 ? 1e300 : ku / (1 - ku);
}

// How a backend accumulates a dot product of depth k: chunks of `chunk` products summed with unit
// roundoff `u_inner`, the chunk sums then accumulated with `u_acc` (chunk = 1: plain accumulation
// with u_acc). u_out is the output rounding. Bound on |fl(dot) - dot| / (sum |a||b|), with
// c = min(chunk, k): (1 + gamma_c(u_inner)) (1 + gamma_{k/chunk + 1}(u_acc)) - 1.
struct GemmAccumulation {
  double u_acc = 0x1p-24;
  double u_inner = 0;
  uint32_t chunk = 1;
  double u_out = 0x1p-24;
  double underflow = 0x1p-149;  // absolute error per operation near zero (smallest subnormal)
};

SDC_HD double gemm_relative_bound(const GemmAccumulation& a, uint32_t k) {
  if (a.chunk <= 1) return gemm_gamma(k, a.u_acc);
  const double inner = gemm_gamma(a.chunk < k ? a.chunk : k, a.u_inner);  // no chunk is longer than k
  const double outer = gemm_gamma(static_cast<double>((k + a.chunk - 1) / a.chunk) + 1, a.u_acc);
  return inner + outer + inner * outer;
}

}  // namespace sdc
