// The gemm.* probes' seeded inputs, generated on the host by the SDC_HD generators
// (kernels/common/gemm_elements.hpp): the same values on every backend.
#pragma once

#include <cstdint>
#include <vector>

#include "host/gemm.hpp"

namespace sdc {

struct GemmHostInputs {
  GemmSpec spec;
  std::vector<uint8_t> a, bt;             // stored in the input type
  std::vector<float> a_wide, bt_wide;     // exact float copies (empty for fp64)
  std::vector<int32_t> row_exp, col_exp;  // scaled: C_ij = 2^(row_exp_i + col_exp_j) * Cint_ij
  std::vector<int32_t> a_int, bt_int;     // exact families: the unscaled integer inputs
  uint64_t exact_bound = 0;               // exact families: bound on |Cint_ij|
};

GemmHostInputs generate_gemm_inputs(const GemmSpec& spec, int threads);
// The same into `in`, reusing its storage (no page faults when the previous run had the same size).
void generate_gemm_inputs_into(const GemmSpec& spec, int threads, GemmHostInputs& in);

}  // namespace sdc
