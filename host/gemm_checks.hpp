// The host's verification of a GEMM output: Freivalds/ABFT checks per tile, then location and
// confirmation (gemm_confirm.hpp).
#pragma once

#include <optional>
#include <vector>

#include "host/gemm.hpp"
#include "host/gemm_confirm.hpp"
#include "host/gemm_inputs.hpp"
#include "kernels/common/gemm_check.hpp"

namespace sdc {

// What one pass of the FP64 check needs of the inputs alone, per line i (a row of C, or a column
// to locate) and tile t of the line: r = A_i . Y_t with Y_t = B w_t (FP64), and q = the bound's sum
// |A_i| . |B||w_t| already scaled by gemm_float_sum_factor. O(n^3 / tile) to compute, O(n^2 / tile)
// to keep.
struct GemmLineReference {
  uint32_t lines = 0, tile = 0, tiles = 0;
  std::vector<double> w;            // the check vector, one weight per element of a line
  std::vector<GemmTileWeights> tw;  // per tile: the sum and the least of w
  std::vector<double> r, q;         // lines x tiles
};

// The reference of a random GEMM's checks, computed once per input set and kept while the inputs
// stay: a later GEMM on them costs one pass over its C (Freivalds: C_i . w_t against r, with tau
// from q; random fp8: each element against the exact reference).
struct GemmReference {
  GemmSpec spec;  // the inputs it belongs to (gemm_same_inputs)
  GemmAccumulation acc;
  std::optional<GemmLineReference> rows;     // random inputs
  std::optional<GemmLineReference> columns;  // computed when a failed row check is first located
  std::vector<double> element, element_abs;  // random fp8: C and |A||B| exactly (m x n)
  double compute_s = 0;                      // the time it took
};

// The reference of the inputs' checks (empty for exact families, whose check is in int64).
GemmReference gemm_reference(const GemmHostInputs& in, const GemmAccumulation& acc, int threads);
// Whether `ref` is the reference of `spec`'s inputs under `acc`.
bool gemm_reference_fits(const GemmReference& ref, const GemmSpec& spec, const GemmAccumulation& acc);

// Verifies output C (gemm_output_bytes(type) per element, row-major m x n) against the inputs
// without an O(n^3) reference: Freivalds per column tile of the output (int64 modulo 2^64 with zero
// tolerance and two odd random vectors for exact inputs; FP64 with the deterministic bound tau of
// `acc` for random inputs), then the same check on the transpose per row tile to locate the wrong
// elements, each confirmed by an O(k) recomputation. Random fp8 is checked per element instead,
// against exact FP64 reference GEMMs of C and |A||B| (gemm_reference_check).
// Computes the reference each call; the overload with `ref` (gemm_reference of these inputs) reuses it.
GemmVerdict verify_gemm(const GemmHostInputs& in, const void* c, const GemmAccumulation& acc, int threads);
GemmVerdict verify_gemm(const GemmHostInputs& in, const void* c, GemmReference& ref, int threads);

}  // namespace sdc
