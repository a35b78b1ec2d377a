// Arithmetic of the gemm.* verification, shared by the host's verify_gemm and the CUDA verify
// kernels: the check vectors, the bound tau of one Freivalds/ABFT check and of one element, and the
// conversion of an exact family's output back to its integer. The CPU tests exercise every
// function here; kernels/gemm_verify.cu calls the same code.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/common/gemm_elements.hpp"
#include "kernels/common/sdc_hd.hpp"

namespace sdc {

// Keys of the check vectors: independent of the input streams.
inline constexpr uint32_t kGemmStreamRowCheck = 16;
inline constexpr uint32_t kGemmStreamColCheck = 17;

// Exact families: column tiles of at least 256 columns, at most four per line (a check with zero
// tolerance needs no narrow tile).
inline constexpr uint32_t kGemmExactMaxTiles = 4;
SDC_HD uint32_t gemm_exact_tile_of(uint32_t n) {
  const uint32_t quarter = (n + 3) / 4;
  const uint32_t wide = quarter > 256u ? quarter : 256u;
  return n < wide ? n : wide;
}

// FP64 check vector: w_j in [1, 2) with 24 random bits.
SDC_HD double gemm_float_check_weight(uint32_t key, uint32_t j) {
  return 1.0 + static_cast<double>(gemm_random32(key, j) >> 8) * 0x1p-24;
}

// Exact families: two odd random vectors modulo 2^64.
inline constexpr uint32_t kGemmExactVectors = 2;
SDC_HD uint64_t gemm_exact_check_weight(uint32_t key, uint32_t j, uint32_t v) {
  const uint64_t idx = (static_cast<uint64_t>(j) * kGemmExactVectors + v) * 2;
  return ((static_cast<uint64_t>(gemm_random32(key, idx)) << 32) | gemm_random32(key, idx + 1)) | 1u;
}

// The bound's sum q = sum_p |a_p| (|B||w|)_p runs in FP32 on rounded factors: each factor rounded
// once (2^-24 each, at most 2^-23 with the product), then k additions in any order. Scaling the
// FP32 sum by this factor gives an upper bound of the exact sum.
SDC_HD double gemm_float_sum_factor(uint32_t k) { return (1 + 0x1p-22) / (1 - gemm_gamma(k + 1.0, 0x1p-24)); }

// Error of the FP64 check itself (Y, A Y, C w and the absolute sums, any summation order) for depth
// k and `width` columns: generous and rigorous.
SDC_HD double gemm_check_slack(uint32_t k, uint32_t width) {
  return 2 * gemm_gamma(static_cast<double>(k) + width + 8, 0x1p-53) + 0x1p-45;
}

// tau of one check |C w - A (B w)| over a column tile, where q bounds (|A|(|B||w|))_i (already
// scaled by gemm_float_sum_factor), `rel` = gemm_relative_bound(acc, k) and wsum is the sum of w
// over the tile. The output rounding term u_out (|C||w|)_i uses |C_ij| <= (1 + rel) (|A||B|)_ij,
// which holds for every correct result, so tau needs no pass over |C| (and an infinite or NaN
// output cannot inflate it: it makes the residual fail).
SDC_HD double gemm_tile_tau(const GemmAccumulation& acc, double rel, double slack, uint32_t k, double q, double wsum) {
  return (rel + acc.u_out * (1 + rel)) * q + (k + 2.0) * acc.underflow * wsum + slack * (2 + rel) * q;
}

// tau / q of one check: tau = gemm_tile_rel * q plus the underflow allowance.
SDC_HD double gemm_tile_rel(const GemmAccumulation& acc, uint32_t k, uint32_t width) {
  const double rel = gemm_relative_bound(acc, k);
  return rel + acc.u_out * (1 + rel) + gemm_check_slack(k, width) * (2 + rel);
}

// Random families: the column-tile width. q grows as k x tile while a typical |C| grows as sqrt(k),
// so a tile of T columns catches a single wrong element of about 1.5 E|a|E|b| / rms(a)rms(b) x
// T eps sqrt(k) times the rms of C (eps = gemm_tile_rel; the weights average 1.5, the inputs' moment
// ratio is 0.64): T = kGemmTileTarget / (eps sqrt(k)) puts that near 1.4x, and T is never wider
// than the exact families' tile (where that catches smaller changes, at small k). The check costs
// 1/T of the GEMM's multiply-adds (in FP64, and as many in FP32), so T is at least
// kGemmMinFloatTile, which binds only where the accumulation is coarse (the chunked fp8 model,
// whose random inputs are checked per element instead: gemm_reference_check; docs/probes.md).
inline constexpr double kGemmTileTarget = 1.5;
inline constexpr uint32_t kGemmMinFloatTile = 8;
SDC_HD uint32_t gemm_float_tile_of(const GemmAccumulation& acc, uint32_t k, uint32_t width) {
  const uint32_t widest = gemm_exact_tile_of(width);
  const double per_column = gemm_tile_rel(acc, k, width) * sqrt(static_cast<double>(k));
  const double t = per_column > 0 ? kGemmTileTarget / per_column : static_cast<double>(widest);
  uint32_t tile = t >= widest ? widest : static_cast<uint32_t>(t);
  if (tile < kGemmMinFloatTile) tile = kGemmMinFloatTile;
  return tile < width ? tile : width;
}

// The tile of a check over lines of `width` elements, for the inputs' family.
SDC_HD uint32_t gemm_check_tile_of(GemmInputs in, const GemmAccumulation& acc, uint32_t k, uint32_t width) {
  return gemm_inputs_exact(in) ? gemm_exact_tile_of(width) : gemm_float_tile_of(acc, k, width);
}

// A check fails unless its residual is within tau (a NaN residual fails).
SDC_HD bool gemm_check_fails(double residual, double tau) { return !(residual <= tau); }

// Slack of one element's O(k) FP64 recomputation.
SDC_HD double gemm_element_slack(uint32_t k) { return 2 * gemm_gamma(static_cast<double>(k) + 8, 0x1p-53) + 0x1p-45; }

// tau of one element with sum_p |a_p b_p| = ab and observed value obs.
SDC_HD double gemm_element_tau(const GemmAccumulation& acc, double rel, double slack, uint32_t k, double ab,
                               double obs_abs) {
  return rel * ab + acc.u_out * obs_abs + (k + 2.0) * acc.underflow + slack * (ab + obs_abs);
}

// 2^e as a double for e in [-1022, 1023], from bits.
SDC_HD double exp2_double(int e) {
  const uint64_t bits = static_cast<uint64_t>(e + 1023) << 52;
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

// Random fp8 inputs: checked per element against an exact reference, not by Freivalds. Their
// coarse accumulation model puts the per-element bound near the typical |C| at k = 8192, so any tile
// wider than one column misses a 2x change of one element (docs/probes.md). Every random e4m3 value
// times 2^6, and e5m2 times 2^5, is an integer of magnitude <= 120 (an int8), so C and |A||B| scaled
// by 2^(2 shift) are integer GEMMs, exact in any order for k < 2^31 / 120^2 (INT32 accumulation, or
// FP64: every partial sum needs at most 27 bits at k = 8192).
SDC_HD bool gemm_reference_check(GemmType t, GemmInputs in) {
  return in == GemmInputs::kRandom && (t == GemmType::kE4m3 || t == GemmType::kE5m2);
}
SDC_HD int gemm_reference_shift(GemmType t) { return t == GemmType::kE5m2 ? 5 : 6; }
inline constexpr uint32_t kGemmReferenceMaxK = 149130;  // (2^31 - 1) / 120^2
// A random fp8 input value as the reference's int8.
SDC_HD int8_t gemm_reference_int8(float v, int shift) { return static_cast<int8_t>(v * exp2_float(shift)); }

// One element against the reference: `ref` = sum a_p b_p and `ref_abs` = sum |a_p b_p| (exact, the
// integers times 2^-2shift), `obs` the output. Its bound is the element bound of the accumulation
// model; the residual's own rounding is in the slack.
struct GemmElementCheck {
  double residual = 0, tau = 0;
  bool fails = false;
};
SDC_HD GemmElementCheck gemm_reference_element(const GemmAccumulation& acc, double rel, uint32_t k, double ref,
                                               double ref_abs, double obs) {
  GemmElementCheck e;
  const double obs_abs = obs < 0 ? -obs : obs;
  e.residual = obs - ref < 0 ? ref - obs : obs - ref;
  e.tau = gemm_element_tau(acc, rel, gemm_element_slack(k), k, ref_abs, obs_abs);
  e.fails = gemm_check_fails(e.residual, e.tau) || !(obs - obs == 0);  // NaN and infinity fail
  return e;
}

// Exact families: an observed output that is not an integer within the bound after unscaling.
inline constexpr int64_t kGemmInvalid = INT64_MIN;

// The observed output `o` times `unscale` (an exact power of two) as an integer, or kGemmInvalid
// where that is not an integer within `bound` (NaN, a fraction, out of range) or where a nonzero
// output unscales to zero (underflow). Every exact bound is below 2^31, so an integer in range
// converts to int32 exactly.
SDC_HD int64_t gemm_unscale_output(double o, double unscale, double bound) {
  const double v = o * unscale;
  const bool in_range = (v < 0 ? -v : v) <= bound;  // false for NaN
  const int32_t iv = static_cast<int32_t>(in_range ? v : 0.0);
  const bool ok = in_range && static_cast<double>(iv) == v && (iv != 0 || o == 0);
  return ok ? iv : kGemmInvalid;
}

// Output element idx of C (gemm_output_bytes per element) as a value, and as its bits.
SDC_HD double gemm_output_value(GemmType t, const void* c, uint64_t idx) {
  if (t == GemmType::kFp64) return static_cast<const double*>(c)[idx];
  if (t == GemmType::kInt8) return static_cast<const int32_t*>(c)[idx];
  return static_cast<const float*>(c)[idx];
}
SDC_HD uint64_t gemm_output_bits(GemmType t, const void* c, uint64_t idx) {
  if (t == GemmType::kFp64) return static_cast<const uint64_t*>(c)[idx];
  return static_cast<const uint32_t*>(c)[idx];
}
// The value of an output element given its bits (as gemm_output_bits returns them).
SDC_HD double gemm_output_value_of_bits(GemmType t, uint64_t bits) {
  if (t == GemmType::kFp64) {
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
  }
  const uint32_t low = static_cast<uint32_t>(bits);
  if (t == GemmType::kInt8) return static_cast<int32_t>(low);
  return float_of_bits(low);
}

// One Freivalds/ABFT pass over `lines` lines of C: the rows (line = A's generator, other = B's,
// element (line, col) at line * n + col) or, to locate, the columns (roles swapped, at
// col * n + line). Y_t = sum over the columns j of tile t of other's row j times w_j; line r's check
// over tile t compares A_r . Y_t with sum over tile t of C(r, j) w_j.
struct GemmCheckShape {
  GemmGenerator line, other;
  GemmType out_type = GemmType::kFp32;
  uint32_t lines = 0, width = 0, k = 0;  // lines checked, elements per line, depth
  uint32_t tile = 0, tiles = 0;          // the line split into tiles (gemm_check_tile_of)
  uint64_t line_stride = 0, col_stride = 0;
  uint32_t key = 0;  // check vector key
};

// The row pass (columns = false) or the column pass of an m x n x k GEMM whose accumulation is
// `acc` (which fixes the tile of random inputs).
SDC_HD GemmCheckShape gemm_check_shape(GemmType t, GemmInputs in, uint32_t m, uint32_t n, uint32_t k, uint64_t seed,
                                       bool columns, const GemmAccumulation& acc) {
  GemmCheckShape s;
  const GemmGenerator ga = gemm_generator(t, in, k, seed, kGemmStreamA);
  const GemmGenerator gb = gemm_generator(t, in, k, seed, kGemmStreamB);
  s.line = columns ? gb : ga;
  s.other = columns ? ga : gb;
  s.out_type = t;
  s.lines = columns ? n : m;
  s.width = columns ? m : n;
  s.k = k;
  s.tile = gemm_check_tile_of(in, acc, k, s.width);
  s.tiles = (s.width + s.tile - 1) / s.tile;
  s.line_stride = columns ? 1 : n;
  s.col_stride = columns ? n : 1;
  s.key = gemm_stream_key(seed, columns ? kGemmStreamColCheck : kGemmStreamRowCheck);
  return s;
}

// The FP64 check's bound terms that do not depend on the data (the per-tile sums of w come with
// the check: gemm_tile_weights).
struct GemmFloatBound {
  GemmAccumulation acc;
  double rel = 0, slack = 0, sum_factor = 0;
};

SDC_HD GemmFloatBound gemm_float_bound(const GemmCheckShape& s, const GemmAccumulation& acc) {
  GemmFloatBound b;
  b.acc = acc;
  b.rel = gemm_relative_bound(acc, s.k);
  b.slack = gemm_check_slack(s.k, s.width);
  b.sum_factor = gemm_float_sum_factor(s.k);
  return b;
}

// Over columns [lo, hi): the sum of w (for the underflow allowance) and the smallest w.
struct GemmTileWeights {
  double sum = 0, min = 2;
};
SDC_HD GemmTileWeights gemm_tile_weights(uint32_t key, uint32_t lo, uint32_t hi) {
  GemmTileWeights t;
  for (uint32_t j = lo; j < hi; ++j) {
    const double w = gemm_float_check_weight(key, j);
    t.sum += w;
    t.min = w < t.min ? w : t.min;
  }
  return t;
}

// The smallest change of one element of a tile that its check is sure to catch: the change e at
// column j moves the residual r by e w_j, so |e| > (tau + |r|) / min w fails the check.
SDC_HD double gemm_detectable_error(double tau, double residual, double min_weight) {
  return (tau + residual) / min_weight;
}

// What a device's check returns to the host besides the per-(row, tile) flags.
struct GemmCheckSummary {
  unsigned long long flagged;          // failed checks
  unsigned long long max_ratio_bits;   // bits of the largest |r| / tau (nonnegative: orders as an integer)
  unsigned long long invalid;          // exact families: outputs that are no integer within the bound
  unsigned long long detectable_bits;  // random inputs: bits of the largest gemm_detectable_error
  double c_square_sum;                 // random inputs: sum of C^2 over the lines checked
};

}  // namespace sdc
