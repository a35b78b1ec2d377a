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

// A 32-bit bijection with good avalanche ("lowbias32"); 32-bit multiplies are cheap on every
// vector unit and native on GPUs, where 64-bit multiplies are emulated.
SDC_HD uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// A random 64-bit word for index `low` under a 64-bit key: two 32-bit hashes, each a bijection
// of `low`, so words never repeat within the 2^32 indices a key covers.
SDC_HD uint64_t keyed_random_word(uint64_t key, uint32_t low) {
  return static_cast<uint64_t>(hash32(low ^ static_cast<uint32_t>(key))) |
         (static_cast<uint64_t>(hash32(low ^ static_cast<uint32_t>(key >> 32))) << 32);
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
