// Arithmetic chains for the ALU probes. Each chain is seeded from (seed, k) and iterated; the host
// computes one golden per seed with scalar code, and the device runs many copies of each seed on
// every SM and lane (or core and SIMD lane) and must match it bit for bit.
//
// Every chain's state map is (nearly) injective, so a fault mid-chain is not washed out before the
// output: the FMA chains are a symplectic rotation (area preserving, perturbations neither decay
// nor grow), the integer chain is a bijection, and the div/sqrt chain, which contracts, folds
// every intermediate into a 64-bit hash.
#pragma once

#include <cmath>
#include <cstring>

#include "kernels/common/random.hpp"
#include "kernels/common/sdc_hd.hpp"

namespace sdc {

// Each chain copy writes this many 64-bit-or-narrower output elements.
inline constexpr unsigned kChainOutputsPerCopy = 2;

template <typename T>
struct RotationChain {
  T x, y, s;
};

template <typename T>
SDC_HD RotationChain<T> rotation_chain_seed(uint64_t seed, uint64_t k) {
  RotationChain<T> c;
  if constexpr (sizeof(T) == 4) {
    c.x = random_float(seed, 3 * k, 0.5f, 2.0f);
    c.y = random_float(seed, 3 * k + 1, -2.0f, 2.0f);
    c.s = random_float(seed, 3 * k + 2, 0.05f, 1.0f);
  } else {
    c.x = random_double(seed, 3 * k, 0.5, 2.0);
    c.y = random_double(seed, 3 * k + 1, -2.0, 2.0);
    c.s = random_double(seed, 3 * k + 2, 0.05, 1.0);
  }
  return c;
}

// One symplectic-Euler rotation step: two dependent, correctly rounded FMAs.
SDC_HD void rotation_step(float& x, float& y, float s) {
  x = fmaf(-s, y, x);
  y = fmaf(s, x, y);
}
SDC_HD void rotation_step(double& x, double& y, double s) {
  x = fma(-s, y, x);
  y = fma(s, x, y);
}

SDC_HD uint64_t mul_hi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

SDC_HD uint64_t popcount64(uint64_t x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__popcll(x));
#else
  return static_cast<uint64_t>(__builtin_popcountll(x));
#endif
}

SDC_HD uint64_t bitfield_extract(uint64_t x, unsigned pos, unsigned len) { return (x >> pos) & ((1ULL << len) - 1u); }

struct Int64Chain {
  uint64_t x, y, k;
};

SDC_HD Int64Chain int64_chain_seed(uint64_t seed, uint64_t k) {
  return {counter_random(seed, 3 * k), counter_random(seed, 3 * k + 1), counter_random(seed, 3 * k + 2) | 1u};
}

// Multiply-add, xorshift, mul-hi, popcount and bit-field extract. Each update is a bijection of the
// word it writes given the other, so the step is a bijection of the state.
SDC_HD void int64_step(uint64_t& x, uint64_t& y, uint64_t k) {
  x = x * 0x5851f42d4c957f2dULL + k;
  y ^= y << 13;
  y ^= y >> 7;
  y ^= y << 17;
  y += mul_hi64(x, y | 1u) + popcount64(x);
  x ^= bitfield_extract(y, static_cast<unsigned>(y & 31u), 16) << 5;
}

SDC_HD float ieee_sqrt(float v) { return sqrtf(v); }
SDC_HD double ieee_sqrt(double v) { return sqrt(v); }

template <typename T>
struct DivSqrtChain {
  T x, d;
  uint64_t fold;
};

template <typename T>
SDC_HD DivSqrtChain<T> divsqrt_chain_seed(uint64_t seed, uint64_t k) {
  DivSqrtChain<T> c;
  c.x = static_cast<T>(random_double(seed, 2 * k, 1.0, 4.0));
  c.d = static_cast<T>(random_double(seed, 2 * k + 1, 1.0, 2.0));
  c.fold = 0;
  return c;
}

SDC_HD uint64_t bits_of(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof(u));
  return u;
}
SDC_HD uint64_t bits_of(double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof(u));
  return u;
}

// x' = sqrt(x + c_j) + d / x stays in [1, 6); c_j varies the operands from step to step. The map
// contracts, so every intermediate is folded in (fold' = fold * odd + bits) to keep faults visible.
template <typename T>
SDC_HD void divsqrt_step(T& x, T d, uint64_t& fold, uint32_t j) {
  const T c = static_cast<T>(j & 15u) * static_cast<T>(0.25);
  x = ieee_sqrt(x + c) + d / x;
  fold = fold * 0x100000001b3ULL + bits_of(x);
}

// Iterates one chain copy and writes its two output words: (x, y) or (x bits, fold).
template <typename T>
SDC_HD void rotation_chain_run(RotationChain<T> c, uint32_t iterations, T* out) {
  for (uint32_t j = 0; j < iterations; ++j) rotation_step(c.x, c.y, c.s);
  out[0] = c.x;
  out[1] = c.y;
}

// N rotation chains stepped together, each exactly as rotation_chain_run steps it (the same FMAs
// in the same order per chain), so the outputs are the same bits. Interleaved, a GPU thread has N
// independent FMAs to issue back to back, where one chain leaves it waiting on each FMA's result.
template <typename T, unsigned N>
SDC_HD void rotation_chains_run(RotationChain<T> (&c)[N], uint32_t iterations) {
  for (uint32_t j = 0; j < iterations; ++j) {
    for (unsigned k = 0; k < N; ++k) rotation_step(c[k].x, c[k].y, c[k].s);
  }
}

SDC_HD void int64_chain_run(Int64Chain c, uint32_t iterations, uint64_t* out) {
  for (uint32_t j = 0; j < iterations; ++j) int64_step(c.x, c.y, c.k);
  out[0] = c.x;
  out[1] = c.y;
}

template <typename T>
SDC_HD void divsqrt_chain_run(DivSqrtChain<T> c, uint32_t iterations, uint64_t* out) {
  for (uint32_t j = 0; j < iterations; ++j) divsqrt_step(c.x, c.d, c.fold, j);
  out[0] = bits_of(c.x);
  out[1] = c.fold;
}

}  // namespace sdc
