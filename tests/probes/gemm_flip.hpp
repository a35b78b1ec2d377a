// Test helper: which element of a GEMM's output a flip of the exponent's top bit must be caught at,
// for the GPU tests and their CPU counterparts.
#pragma once

#include <cmath>
#include <cstdint>

#include "host/gemm.hpp"
#include "kernels/common/gemm_elements.hpp"

namespace sdc {

// C(i, j) of spec's inputs, from the generators in FP64.
inline double expected_c(const GemmSpec& s, uint32_t i, uint32_t j) {
  const GemmGenerator ga = gemm_generator(s.type, s.inputs, s.k, s.seed, kGemmStreamA);
  const GemmGenerator gb = gemm_generator(s.type, s.inputs, s.k, s.seed, kGemmStreamB);
  double sum = 0;
  for (uint32_t p = 0; p < s.k; ++p) {
    sum += gemm_generated_double(ga, uint64_t{i} * s.k + p) * gemm_generated_double(gb, uint64_t{j} * s.k + p);
  }
  return sum;
}

// Random inputs tolerate a change of one element up to the bound tau (about detectable_multiple x
// rms(C)), and flipping the exponent's top bit (30; fp64: 62) of an element with |C| >= 2 only
// clears it, a change of |C|, often below that. Of an element with |C| in [1/4, 2) the flip
// multiplies it by 2^128 (fp64: 2^1024) or makes it infinite or NaN: far above any bound. The first
// such element from (i, j) on, along its row (or column); exact inputs catch any flip, so there the
// element is (i, j) itself.
inline constexpr const char* kFlipAboveTheBound =
    "a flip of the exponent's top bit of an element with |C| in [1/4, 2) changes it by at least 2^125 "
    "(or to Inf/NaN), above the documented bound tau of every family";
inline bool flip_is_above_the_bound(const GemmSpec& s, uint32_t i, uint32_t j) {
  if (gemm_inputs_exact(s.inputs)) return true;
  const double c = std::fabs(expected_c(s, i, j));
  return c >= 0.25 && c < 2;
}
inline uint32_t column_to_flip(const GemmSpec& s, uint32_t i, uint32_t j) {
  while (j + 1 < s.n && !flip_is_above_the_bound(s, i, j)) ++j;
  return j;
}
inline uint32_t row_to_flip(const GemmSpec& s, uint32_t i, uint32_t j) {
  while (i + 1 < s.m && !flip_is_above_the_bound(s, i, j)) ++i;
  return i;
}

}  // namespace sdc
