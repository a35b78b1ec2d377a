// Counter-based random numbers: value i of stream `seed` is a pure function of (seed, i), so any
// thread on any device regenerates any element without state or a reference buffer.
#pragma once

#include "kernels/common/sdc_hd.hpp"

namespace sdc {

// SplitMix64 finaliser: a bijection on 64-bit words with full avalanche.
SDC_HD uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

SDC_HD uint64_t counter_random(uint64_t seed, uint64_t index) {
  return mix64(mix64(seed) + index * 0x9e3779b97f4a7c15ULL);
}

// Uniform in [lo, hi) with 24 random significand bits.
SDC_HD float random_float(uint64_t seed, uint64_t index, float lo, float hi) {
  const float unit = static_cast<float>(counter_random(seed, index) >> 40) * (1.0f / 16777216.0f);
  return lo + (hi - lo) * unit;
}

// Uniform in [lo, hi) with 53 random significand bits.
SDC_HD double random_double(uint64_t seed, uint64_t index, double lo, double hi) {
  const double unit = static_cast<double>(counter_random(seed, index) >> 11) * (1.0 / 9007199254740992.0);
  return lo + (hi - lo) * unit;
}

}  // namespace sdc
