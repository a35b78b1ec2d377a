// The host's verification of a GEMM output: Freivalds/ABFT checks per tile, then location and
// confirmation (gemm_confirm.hpp).
#pragma once

#include "host/gemm.hpp"
#include "host/gemm_confirm.hpp"
#include "host/gemm_inputs.hpp"

namespace sdc {

// Verifies output C (gemm_output_bytes(type) per element, row-major m x n) against the inputs
// without an O(n^3) reference: Freivalds per column tile of the output (int64 modulo 2^64 with zero
// tolerance and two odd random vectors for exact inputs; FP64 with the deterministic bound tau of
// `acc` for random inputs), then the same check on the transpose per row tile to locate the wrong
// elements, each confirmed by an O(k) recomputation. Random fp8 is checked per element instead,
// against exact FP64 reference GEMMs of C and |A||B| (gemm_reference_check).
GemmVerdict verify_gemm(const GemmHostInputs& in, const void* c, const GemmAccumulation& acc, int threads);

}  // namespace sdc
