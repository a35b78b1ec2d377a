// The check at speed's fast path (docs/probes.md, "The check at speed"): the arithmetic of the row
// check's reference computed over A in A's own type, its bound, the vectorised pass over C, and the
// verdicts of a batch of repeats read back together. kernels/gemm_fast_check.cu runs these
// functions on the GPU; the CPU tests run them on every random type.
#pragma once

#include <cstdint>

#include "kernels/common/gemm_check.hpp"
#include "kernels/common/sdc_hd.hpp"

namespace sdc {

// ---- The reference r = A Y, one pass over A in its own type ----------------------------------

// Every random input but fp64's is exact in FP32, so each term a_p Y_p runs on the FP32 units (Y
// rounded to FP32 once), summed by FMAs over kGemmRefChunk depth steps, the chunk sums added in FP64:
// the FP32 rate, with an error far below the bound's (gemm_ref_error). fp64 sums in FP64.
inline constexpr uint32_t kGemmRefChunk = 64;

struct GemmRefSum {
  double total = 0;
  float part = 0;
};
SDC_HD void gemm_ref_add(GemmRefSum& s, float a, float y) { s.part = fmaf(a, y, s.part); }
SDC_HD void gemm_ref_fold(GemmRefSum& s) {
  s.total += static_cast<double>(s.part);
  s.part = 0;
}

// r of one line and tile in the order the kernel sums it: depth p ascending, a fold after every
// kGemmRefChunk steps and at the end (fp64: one FMA chain in FP64).
SDC_HD double gemm_ref_dot32(const float* a, const float* y, uint32_t k) {
  GemmRefSum s;
  for (uint32_t p = 0; p < k; ++p) {
    gemm_ref_add(s, a[p], y[p]);
    if ((p + 1) % kGemmRefChunk == 0) gemm_ref_fold(s);
  }
  gemm_ref_fold(s);
  return s.total;
}

// The reference kernel's tiling (kernels/gemm_fast_check.cu), index arithmetic only, shared with the
// CPU test of its cover: a block of kRefThreads takes kRefEdge lines by kRefEdge tiles, staging
// kRefDepth depth steps a round; thread t loads depth ref_load_depth(t) of rows ref_load_row(t, i)
// (of A and of Y), the same rows for every lane of a warp, so that a warp's sum of its loads' squares
// is whole rows' (the lines' norms); and sums kRefMicro x kRefMicro outputs, lines ref_out_line(t, i)
// by tiles ref_out_tile(t, j), each read as one 16-byte run of the staged rows.
inline constexpr int kRefEdge = 64, kRefDepth = 32, kRefMicro = 4, kRefThreads = 256;
inline constexpr int kRefGrid = kRefEdge / kRefMicro;                 // threads along each edge
inline constexpr int kRefLoads = kRefEdge * kRefDepth / kRefThreads;  // staged elements a thread
static_assert(kGemmRefChunk % kRefDepth == 0, "a chunk is whole rounds");
static_assert(kRefGrid * kRefGrid == kRefThreads, "one output block per thread");
static_assert(kRefDepth == 32, "a warp's lanes load one row's depths");
SDC_HD int ref_load_depth(int t) { return t % kRefDepth; }
SDC_HD int ref_load_row(int t, int i) { return t / kRefDepth + i * (kRefThreads / kRefDepth); }
SDC_HD int ref_out_line(int t, int i) { return (t / kRefGrid) * kRefMicro + i; }
SDC_HD int ref_out_tile(int t, int j) { return (t % kRefGrid) * kRefMicro + j; }
// Whether the chunks fold after the round that starts at depth p0.
SDC_HD bool ref_folds_after(uint32_t p0) { return (p0 + kRefDepth) % kGemmRefChunk == 0; }

// |r~ - r| <= gemm_ref_error * sum_p |a_p| |Y_p| + gemm_ref_underflow: Y's rounding to FP32 and a
// chunk's FMAs (gamma_{c+1}(2^-24)), the chunk sums' FP64 additions (doubled: generous); near zero,
// 2^-150 per rounding of Y and of each FMA, |a| < 2. fp64's FP64 sum is in gemm_check_slack already.
SDC_HD double gemm_ref_error(GemmType t, uint32_t k) {
  if (t == GemmType::kFp64) return 0;
  const uint32_t c = k < kGemmRefChunk ? k : kGemmRefChunk;
  return gemm_gamma(c + 1.0, 0x1p-24) + 2 * gemm_gamma(k / kGemmRefChunk + 2.0, 0x1p-53);
}
SDC_HD double gemm_ref_underflow(GemmType t, uint32_t k) { return t == GemmType::kFp64 ? 0 : (k + 1.0) * 0x1p-148; }

// The bound's sum q = sum_p |a_p| (|B||w|)_p is at most ||a|| ||(|B||w|)|| (Cauchy-Schwarz): a norm
// per line of A, summed in the reference's pass, and one per tile, instead of a second thin GEMM.
// It is looser by rms(a) rms(ya) / E(|a| ya), about 1.27 for the random inputs (docs/probes.md).
// The norms are square roots of sums of squares in FP64, any order, of A's values and of |B||w| as
// kept in FP32; the factor covers those roundings (2^-23 for FP32's, and 2 gemm_check_slack >=
// 4 gamma_{k + width + 8}(2^-53) for the sums, |B||w|'s own and the square roots).
SDC_HD double gemm_norm_factor(uint32_t k, uint32_t width) { return 1 + 0x1p-23 + 2 * gemm_check_slack(k, width); }
SDC_HD double gemm_norm_q(double line_norm, double tile_norm, double factor) { return line_norm * tile_norm * factor; }

struct GemmFastBound {
  GemmFloatBound base;
  double ref_error = 0, ref_underflow = 0, norm_factor = 1;
};
SDC_HD GemmFastBound gemm_fast_bound(const GemmCheckShape& s, const GemmAccumulation& acc) {
  GemmFastBound b;
  b.base = gemm_float_bound(s, acc);
  b.ref_error = gemm_ref_error(s.out_type, s.k);
  b.ref_underflow = gemm_ref_underflow(s.out_type, s.k);
  b.norm_factor = gemm_norm_factor(s.k, s.width);
  return b;
}

// tau of one row check of the fast path: the check's tau with q from the norms, plus the
// reference's own error.
SDC_HD double gemm_fast_tau(const GemmFastBound& b, uint32_t k, double q, double wsum) {
  return gemm_tile_tau(b.base.acc, b.base.rel, b.base.slack, k, q, wsum) + b.ref_error * q + b.ref_underflow;
}

// Random fp8: each element against the exact INT32 reference C_ref = A B as before, but its bound's
// sum_p |a_p b_p| from the norms of its row of A and column of B (Cauchy-Schwarz) instead of a second
// INT32 GEMM |A| |B|: one reference GEMM, and 8 bytes an element read a repeat instead of 12. Looser
// by about 1.56 for the random inputs (docs/probes.md). `ref` is exact; the norms are square roots of
// the int8 operands' exact sums of squares, times `unscale` (2^-2shift) together, so the factor covers
// two square roots and a product.
SDC_HD GemmElementCheck gemm_norm_element(const GemmAccumulation& acc, double rel, uint32_t k, double ref,
                                          double norm_product, double obs) {
  GemmElementCheck e;
  const double obs_abs = obs < 0 ? -obs : obs;
  e.residual = obs - ref < 0 ? ref - obs : obs - ref;
  e.tau = gemm_element_tau(acc, rel, gemm_element_slack(k), k, norm_product * (1 + 0x1p-50), obs_abs);
  e.fails = gemm_check_fails(e.residual, e.tau) || !(obs - obs == 0);  // NaN and infinity fail
  return e;
}

// ---- The pass over C, vectorised ---------------------------------------------------------------

// A tile's columns [lo, hi) of a row starting at element row_base, read `per` elements at a time
// where aligned: [lo, head) one by one up to an element whose index is a multiple of `per`,
// [head, body) in whole vectors, [body, hi) one by one. The FMAs still run in column order, so
// the sums are the scalar loop's to the bit.
struct GemmVectorSpan {
  uint32_t head = 0, body = 0;
};
SDC_HD GemmVectorSpan gemm_vector_span(uint64_t row_base, uint32_t lo, uint32_t hi, uint32_t per) {
  GemmVectorSpan v;
  const uint32_t misalign = static_cast<uint32_t>((row_base + lo) % per);
  const uint32_t head = lo + (misalign == 0 ? 0 : per - misalign);
  v.head = head < hi ? head : hi;
  v.body = v.head + (hi - v.head) / per * per;
  return v;
}

// One element of a check: C w over the tile and the sum of C^2 (the rms of C).
SDC_HD void gemm_compare_add(double v, double w, double& cw, double& squares) {
  cw = fma(v, w, cw);
  squares = fma(v, v, squares);
}

struct GemmFastCheck {
  double residual = 0, tau = 0, detectable = 0;
  bool fails = false;
};
// Row check (line, tile) of the fast path: C w over the tile (cw) against r, tau from the line's
// and the tile's norms, the tile's sum and least of w.
SDC_HD GemmFastCheck gemm_fast_check(const GemmFastBound& b, uint32_t k, double cw, double r, double line_norm,
                                     double tile_norm, double wsum, double wmin) {
  GemmFastCheck c;
  c.tau = gemm_fast_tau(b, k, gemm_norm_q(line_norm, tile_norm, b.norm_factor), wsum);
  c.residual = fabs(cw - r);
  c.fails = gemm_check_fails(c.residual, c.tau);
  c.detectable = gemm_detectable_error(c.tau, c.residual, wmin);
  return c;
}

// ---- Verdicts of a batch of repeats, read back together -----------------------------------------

// Each repeat's check writes its summary to its own slot, and each failed check (a row tile, or a
// random fp8 element) is captured with its repeat and the bits of its elements, so that the host
// reads a batch's verdicts once and still names the failing repeat and locates its elements after
// later repeats overwrote C.
inline constexpr uint32_t kGemmCaptureSlots = 64;
struct GemmCapture {
  unsigned long long first;  // index of its first element in C, row * n + column
  unsigned rep;              // the repeat whose check failed
  unsigned count;            // elements from `first` on: the tile's, or 1
};

// The capture of row check (line, tile) of repeat rep, tiles `tile` wide in rows of `width`.
SDC_HD GemmCapture gemm_capture_of(unsigned rep, uint32_t line, uint32_t t, uint32_t tile, uint32_t width) {
  GemmCapture c;
  const uint32_t lo = t * tile;
  const uint32_t hi = lo + tile < width ? lo + tile : width;
  c.first = static_cast<unsigned long long>(line) * width + lo;
  c.rep = rep;
  c.count = hi - lo;
  return c;
}

}  // namespace sdc
