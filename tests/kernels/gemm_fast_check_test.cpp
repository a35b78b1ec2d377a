// The check at speed's fast path on the CPU (kernels/common/gemm_fast_check.hpp): the reference over A
// in A's own type and its bound, the vectorised pass over C, and a batch of repeats whose verdicts are
// read together. The batch runs the functions kernels/gemm_fast_check.cu runs, with the CUDA engine's
// accumulation models, on every random type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "host/gemm.hpp"
#include "host/gemm_confirm.hpp"
#include "kernels/common/gemm_fast_check.hpp"

namespace sdc {
namespace {

const GemmType kFloatTypes[] = {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16};

// The fast path's reference of an m x n x k GEMM's row checks, as the device computes it: Y and
// |B||w| per tile in FP64 (|B||w| kept in FP32), the tiles' norms, and per line its norm and r = A Y
// (gemm_ref_dot32).
struct Reference {
  GemmCheckShape s;
  GemmFastBound b;
  std::vector<double> r, line_norm, tile_norm;
  std::vector<GemmTileWeights> weights;
};

Reference fast_reference(const GemmSpec& spec, const GemmAccumulation& acc) {
  Reference ref;
  GemmCheckShape& s = ref.s;
  s = gemm_check_shape(spec.type, spec.inputs, spec.m, spec.n, spec.k, spec.seed, false, acc);
  ref.b = gemm_fast_bound(s, acc);
  std::vector<double> y(uint64_t{s.tiles} * s.k, 0.0);
  std::vector<float> y32(y.size());
  ref.tile_norm.assign(s.tiles, 0.0);
  for (uint32_t t = 0; t < s.tiles; ++t) {
    const uint32_t lo = t * s.tile, hi = std::min(lo + s.tile, s.width);
    ref.weights.push_back(gemm_tile_weights(s.key, lo, hi));
    for (uint32_t p = 0; p < s.k; ++p) {
      double sy = 0, sa = 0;
      for (uint32_t j = lo; j < hi; ++j) {
        const double bv = gemm_generated_double(s.other, uint64_t{j} * s.k + p);
        const double w = gemm_float_check_weight(s.key, j);
        sy = std::fma(bv, w, sy);
        sa = std::fma(std::fabs(bv), w, sa);
      }
      y[uint64_t{t} * s.k + p] = sy;
      y32[uint64_t{t} * s.k + p] = static_cast<float>(sy);
      const double kept = static_cast<float>(sa);
      ref.tile_norm[t] += kept * kept;
    }
    ref.tile_norm[t] = std::sqrt(ref.tile_norm[t]);
  }
  std::vector<double> a64(s.k);
  std::vector<float> a32(s.k);
  for (uint32_t line = 0; line < s.lines; ++line) {
    double sq = 0;
    for (uint32_t p = 0; p < s.k; ++p) {
      a64[p] = gemm_generated_double(s.line, uint64_t{line} * s.k + p);
      a32[p] = static_cast<float>(a64[p]);
      sq += a64[p] * a64[p];
    }
    ref.line_norm.push_back(std::sqrt(sq));
    for (uint32_t t = 0; t < s.tiles; ++t) {
      double r64 = 0;  // fp64: one FMA chain in FP64
      for (uint32_t p = 0; spec.type == GemmType::kFp64 && p < s.k; ++p)
        r64 = std::fma(a64[p], y[uint64_t{t} * s.k + p], r64);
      ref.r.push_back(spec.type == GemmType::kFp64 ? r64 : gemm_ref_dot32(a32.data(), &y32[uint64_t{t} * s.k], s.k));
    }
  }
  return ref;
}

// A correct C: each element's exact-order FP64 dot, rounded to the output type (within any bound).
std::vector<double> correct_output(const GemmSpec& spec) {
  const GemmGenerator ga = gemm_generator(spec.type, spec.inputs, spec.k, spec.seed, kGemmStreamA);
  const GemmGenerator gb = gemm_generator(spec.type, spec.inputs, spec.k, spec.seed, kGemmStreamB);
  std::vector<double> bt(uint64_t{spec.n} * spec.k);
  for (uint64_t i = 0; i < bt.size(); ++i) bt[i] = gemm_generated_double(gb, i);
  std::vector<double> c(uint64_t{spec.m} * spec.n), a(spec.k);
  for (uint32_t i = 0; i < spec.m; ++i) {
    for (uint32_t p = 0; p < spec.k; ++p) a[p] = gemm_generated_double(ga, uint64_t{i} * spec.k + p);
    for (uint32_t j = 0; j < spec.n; ++j) {
      double d = 0;
      for (uint32_t p = 0; p < spec.k; ++p) d = std::fma(a[p], bt[uint64_t{j} * spec.k + p], d);
      c[uint64_t{i} * spec.n + j] = spec.type == GemmType::kFp64 ? d : static_cast<double>(static_cast<float>(d));
    }
  }
  return c;
}

double rms(const std::vector<double>& c) {
  double sq = 0;
  for (double v : c) sq += v * v;
  return std::sqrt(sq / static_cast<double>(c.size()));
}

uint64_t bits_of(GemmType t, double v) {
  if (t == GemmType::kFp64) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  }
  return bits_of_float(static_cast<float>(v));
}

// What a batch's check returns per repeat, and the captures of its failed checks.
struct Batch {
  std::vector<GemmCheckSummary> summaries;
  std::vector<GemmCapture> captures;
  std::vector<uint64_t> values;
  uint32_t stride = 0;
};

void capture(Batch& batch, const GemmCapture& c, const std::vector<double>& out, GemmType t) {
  if (batch.captures.size() >= kGemmCaptureSlots) return;
  batch.values.resize((batch.captures.size() + 1) * batch.stride, 0);
  for (uint32_t e = 0; e < c.count; ++e)
    batch.values[batch.captures.size() * batch.stride + e] = bits_of(t, out[c.first + e]);
  batch.captures.push_back(c);
}

// One repeat's row checks against the reference, read as the device does (vector spans of 4).
void fast_compare(const Reference& ref, const std::vector<double>& out, unsigned rep, Batch& batch) {
  const GemmCheckShape& s = ref.s;
  GemmCheckSummary sum{};
  double ratio = 0, detectable = 0;
  for (uint32_t line = 0; line < s.lines; ++line) {
    for (uint32_t t = 0; t < s.tiles; ++t) {
      const uint32_t lo = t * s.tile, hi = std::min(lo + s.tile, s.width);
      const uint64_t row = uint64_t{line} * s.width;
      const GemmVectorSpan v = gemm_vector_span(row, lo, hi, 4);
      double cw = 0, squares = 0;
      auto add = [&](uint32_t j) { gemm_compare_add(out[row + j], gemm_float_check_weight(s.key, j), cw, squares); };
      for (uint32_t j = lo; j < v.head; ++j) add(j);
      for (uint32_t j = v.head; j < v.body; j += 4) {
        for (uint32_t e = 0; e < 4; ++e) add(j + e);
      }
      for (uint32_t j = v.body; j < hi; ++j) add(j);
      const GemmTileWeights& w = ref.weights[t];
      const GemmFastCheck c = gemm_fast_check(ref.b, s.k, cw, ref.r[uint64_t{line} * s.tiles + t], ref.line_norm[line],
                                              ref.tile_norm[t], w.sum, w.min);
      sum.c_square_sum += squares;
      if (c.fails) {
        ++sum.flagged;
        capture(batch, gemm_capture_of(rep, line, t, s.tile, s.width), out, s.out_type);
      }
      if (c.tau > 0) ratio = std::max(ratio, c.residual / c.tau);
      detectable = std::max(detectable, c.detectable);
    }
  }
  std::memcpy(&sum.max_ratio_bits, &ratio, sizeof ratio);
  std::memcpy(&sum.detectable_bits, &detectable, sizeof detectable);
  batch.summaries.push_back(sum);
}

// Random fp8's reference as the fast path keeps it: C_ref exact, and the norms of A's rows and B's
// columns from the int8 operands' sums of squares (gemm_norm_element).
struct Fp8Reference {
  std::vector<double> exact, norm_a, norm_b;
  double unscale = 0;
};

Fp8Reference fp8_reference(const GemmSpec& spec) {
  Fp8Reference ref;
  const int shift = gemm_reference_shift(spec.type);
  ref.unscale = std::ldexp(1.0, -2 * shift);
  const GemmGenerator ga = gemm_generator(spec.type, spec.inputs, spec.k, spec.seed, kGemmStreamA);
  const GemmGenerator gb = gemm_generator(spec.type, spec.inputs, spec.k, spec.seed, kGemmStreamB);
  auto norms = [&](const GemmGenerator& g, uint32_t rows) {
    std::vector<double> out;
    for (uint32_t r = 0; r < rows; ++r) {
      int64_t sq = 0;
      for (uint32_t p = 0; p < spec.k; ++p) {
        const int v = gemm_reference_int8(gemm_generated_float(g, uint64_t{r} * spec.k + p), shift);
        sq += int64_t{v} * v;
      }
      out.push_back(std::sqrt(static_cast<double>(sq)));
    }
    return out;
  };
  ref.norm_a = norms(ga, spec.m);
  ref.norm_b = norms(gb, spec.n);
  for (uint32_t i = 0; i < spec.m; ++i) {
    for (uint32_t j = 0; j < spec.n; ++j) {
      double d = 0;  // every partial sum is an integer times 2^-2shift: exact
      for (uint32_t p = 0; p < spec.k; ++p)
        d += gemm_generated_double(ga, uint64_t{i} * spec.k + p) * gemm_generated_double(gb, uint64_t{j} * spec.k + p);
      ref.exact.push_back(d);
    }
  }
  return ref;
}

// Random fp8: each element against the exact reference with its bound from the norms
// (gemm_norm_element), captured alone.
void element_compare(const GemmSpec& spec, const GemmAccumulation& acc, const Fp8Reference& ref,
                     const std::vector<double>& out, unsigned rep, Batch& batch) {
  GemmCheckSummary sum{};
  double ratio = 0, detectable = 0;
  const double rel = gemm_relative_bound(acc, spec.k);
  for (uint64_t e = 0; e < out.size(); ++e) {
    const double norms = ref.norm_a[e / spec.n] * ref.norm_b[e % spec.n] * ref.unscale;
    const GemmElementCheck c = gemm_norm_element(acc, rel, spec.k, ref.exact[e], norms, out[e]);
    if (c.fails) {
      ++sum.flagged;
      capture(batch, GemmCapture{e, rep, 1}, out, spec.type);
    }
    if (c.tau > 0) ratio = std::max(ratio, c.residual / c.tau);
    detectable = std::max(detectable, c.tau + c.residual);
  }
  std::memcpy(&sum.max_ratio_bits, &ratio, sizeof ratio);
  std::memcpy(&sum.detectable_bits, &detectable, sizeof detectable);
  batch.summaries.push_back(sum);
}

double ratio_of(const GemmCheckSummary& s) {
  double r;
  std::memcpy(&r, &s.max_ratio_bits, sizeof r);
  return r;
}

// The smallest error sure to be caught, as a multiple of the clean C's rms.
double detectable_multiple(const GemmCheckSummary& s, const std::vector<double>& clean) {
  double detectable;
  std::memcpy(&detectable, &s.detectable_bits, sizeof detectable);
  return detectable / rms(clean);
}

constexpr unsigned kRepeats = 5;
const unsigned kPlantedRepeats[] = {0, kRepeats / 2, kRepeats - 1};  // first, middle, last

// Runs a batch of kRepeats on `clean` with one element off by 2 x rms(C) in repeat `planted`, reads
// the verdicts once, and checks that exactly that repeat failed and its confirmation names the element.
template <typename Check>
void expect_batch_names(const GemmSpec& spec, const GemmAccumulation& acc, const std::vector<double>& clean,
                        uint32_t stride, unsigned planted, uint64_t at, const Check& check) {
  SCOPED_TRACE(std::string(gemm_type_name(spec.type)) + ", planted in repeat " + std::to_string(planted));
  Batch batch;
  batch.stride = stride;
  const double off = 2 * rms(clean);
  for (unsigned rep = 0; rep < kRepeats; ++rep) {
    std::vector<double> out = clean;
    if (rep == planted) out[at] += off;
    if (spec.type != GemmType::kFp64) out[at] = static_cast<float>(out[at]);
    check(out, rep, batch);
  }
  ASSERT_EQ(batch.summaries.size(), kRepeats);
  for (unsigned rep = 0; rep < kRepeats; ++rep) {
    EXPECT_EQ(batch.summaries[rep].flagged > 0, rep == planted) << "repeat " << rep;
    if (rep != planted) {
      EXPECT_LT(ratio_of(batch.summaries[rep]), 0.1) << "a clean repeat near the bound";
    }
  }
  const GemmBatchCandidates cand = gemm_batch_candidates(batch.captures, batch.values, batch.stride, planted);
  ASSERT_FALSE(cand.index.empty());
  const MismatchReport report = gemm_confirm_candidates(spec, acc, cand.index, cand.bits, 1);
  ASSERT_EQ(report.mismatches, 1u);
  EXPECT_EQ(report.records.at(0).index, at) << "row " << at / spec.n << ", column " << at % spec.n;
  for (unsigned rep = 0; rep < kRepeats; ++rep) {
    if (rep != planted) {
      EXPECT_TRUE(gemm_batch_candidates(batch.captures, batch.values, batch.stride, rep).index.empty());
    }
  }
}

GemmSpec random_spec(GemmType t, uint32_t m, uint32_t nk, uint64_t seed) {
  GemmSpec spec;
  spec.type = t;
  spec.inputs = GemmInputs::kRandom;
  spec.m = m;
  spec.n = spec.k = nk;
  spec.seed = seed;
  return spec;
}

TEST(GemmFastCheck, ABatchNamesTheRepeatAndElementOfAPlantedErrorOfTwiceTheRmsInEveryFloatType) {
  for (GemmType t : kFloatTypes) {
    // n = k = 2048: narrow tiles (135 columns for the 16-bit types), as at the GPU's sizes.
    const GemmSpec spec = random_spec(t, 24, 2048, 51);
    const GemmAccumulation acc = gemm_cuda_accumulation(t, GemmPath::kLibrary);
    const Reference ref = fast_reference(spec, acc);
    const std::vector<double> clean = correct_output(spec);
    // A column inside a tile, not at its edge.
    const uint64_t at = uint64_t{17} * spec.n + ref.s.tile * 3 + 5;
    for (unsigned planted : kPlantedRepeats) {
      expect_batch_names(
          spec, acc, clean, ref.s.tile, planted, at,
          [&](const std::vector<double>& out, unsigned rep, Batch& b) { fast_compare(ref, out, rep, b); });
    }
  }
}

TEST(GemmFastCheck, ABatchNamesTheRepeatAndElementOfAPlantedErrorOfTwiceTheRmsInFp8) {
  for (GemmType t : {GemmType::kE4m3, GemmType::kE5m2}) {
    const GemmSpec spec = random_spec(t, 24, 2048, 52);
    const GemmAccumulation acc = gemm_cuda_accumulation(t, GemmPath::kLibrary);
    const Fp8Reference ref = fp8_reference(spec);
    std::vector<double> clean;
    for (double d : ref.exact) clean.push_back(static_cast<float>(d));
    const uint64_t at = uint64_t{5} * spec.n + 1000;
    for (unsigned planted : kPlantedRepeats) {
      expect_batch_names(spec, acc, clean, 1, planted, at, [&](const std::vector<double>& out, unsigned rep, Batch& b) {
        element_compare(spec, acc, ref, out, rep, b);
      });
    }
  }
}

// Random fp8 at the GPU levels' size: the bound from the norms is sure to catch one element off by
// 2 x the rms of C (the exact |A| |B| caught 0.92x), and a clean C stays far below it.
TEST(GemmFastCheck, AtTheGpusSizeEveryFp8ElementCatchesTwiceTheRms) {
  for (GemmType t : {GemmType::kE4m3, GemmType::kE5m2}) {
    SCOPED_TRACE(gemm_type_name(t));
    const GemmSpec spec = random_spec(t, 2, 8192, 54);
    const GemmAccumulation acc = gemm_cuda_accumulation(t, GemmPath::kLibrary);
    const Fp8Reference ref = fp8_reference(spec);
    std::vector<double> clean;
    for (double d : ref.exact) clean.push_back(static_cast<float>(d));
    Batch batch;
    batch.stride = 1;
    element_compare(spec, acc, ref, clean, 0, batch);
    EXPECT_EQ(batch.summaries[0].flagged, 0u);
    EXPECT_LT(ratio_of(batch.summaries[0]), 0.1);
    const double multiple = detectable_multiple(batch.summaries[0], clean);
    RecordProperty(std::string("detectable_multiple_") + gemm_type_name(t), std::to_string(multiple));
    EXPECT_LT(multiple, 2.0);
  }
}

// At the GPU levels' size: every check of the fast path is sure to catch one element off by 2 x the
// rms of C (the norm bound is looser than the thin GEMM's |A| |B||w|), and a clean C stays far below
// its bound.
TEST(GemmFastCheck, AtTheGpusSizeEveryCheckCatchesTwiceTheRmsAndACleanRunStaysFarFromTheBound) {
  for (GemmType t : kFloatTypes) {
    SCOPED_TRACE(gemm_type_name(t));
    const GemmSpec spec = random_spec(t, 2, 8192, 53);
    const GemmAccumulation acc = gemm_cuda_accumulation(t, GemmPath::kLibrary);
    const Reference ref = fast_reference(spec, acc);
    const std::vector<double> clean = correct_output(spec);
    Batch batch;
    batch.stride = ref.s.tile;
    fast_compare(ref, clean, 0, batch);
    EXPECT_EQ(batch.summaries[0].flagged, 0u);
    EXPECT_LT(ratio_of(batch.summaries[0]), 0.1);
    const double multiple = detectable_multiple(batch.summaries[0], clean);
    RecordProperty(std::string("detectable_multiple_") + gemm_type_name(t), std::to_string(multiple));
    EXPECT_LT(multiple, 2.0) << "tile " << ref.s.tile;
  }
}

// The chunked FP32 reference stays within gemm_ref_error of the exact sum, and the norm bound is
// never below sum |a| (|B||w|) (both against long double sums).
TEST(GemmFastCheck, TheReferenceErrorAndTheNormBoundHold) {
  for (GemmType t : {GemmType::kFp32, GemmType::kBf16, GemmType::kFp16, GemmType::kTf32}) {
    SCOPED_TRACE(gemm_type_name(t));
    const uint32_t k = 4096;
    const GemmGenerator g = gemm_generator(t, GemmInputs::kRandom, k, 7, kGemmStreamA);
    const GemmGenerator gy = gemm_generator(t, GemmInputs::kRandom, k, 8, kGemmStreamB);
    for (uint32_t line = 0; line < 16; ++line) {
      std::vector<float> a(k), y32(k);
      std::vector<double> y(k), ya(k);
      long double exact = 0, bound = 0, qa = 0, line_sq = 0, tile_sq = 0;
      for (uint32_t p = 0; p < k; ++p) {
        a[p] = static_cast<float>(gemm_generated_double(g, uint64_t{line} * k + p));
        // A stand-in for Y: a sum of 16 random values with weights, cancelling to near zero at times.
        double s = 0, sa = 0;
        for (uint32_t j = 0; j < 16; ++j) {
          const double b = gemm_generated_double(gy, (uint64_t{p} * 16 + j) * 7 + line);
          s = std::fma(b, gemm_float_check_weight(9, j), s);
          sa = std::fma(std::fabs(b), gemm_float_check_weight(9, j), sa);
        }
        y[p] = s;
        ya[p] = static_cast<float>(sa);
        y32[p] = static_cast<float>(s);
        exact += static_cast<long double>(a[p]) * y[p];
        bound += std::fabs(static_cast<long double>(a[p]) * y[p]);
        qa += std::fabs(static_cast<long double>(a[p])) * sa;
        line_sq += static_cast<long double>(a[p]) * a[p];
        tile_sq += static_cast<long double>(ya[p]) * ya[p];
      }
      const double r = gemm_ref_dot32(a.data(), y32.data(), k);
      const long double err = std::fabs(static_cast<long double>(r) - exact);
      EXPECT_LE(err, gemm_ref_error(t, k) * bound + gemm_ref_underflow(t, k));
      const double q = gemm_norm_q(std::sqrt(static_cast<double>(line_sq)), std::sqrt(static_cast<double>(tile_sq)),
                                   gemm_norm_factor(k, k));
      EXPECT_GE(static_cast<long double>(q), qa);
      EXPECT_LT(static_cast<long double>(q), 1.5L * qa) << "the norm bound is loose by more than expected";
    }
  }
  EXPECT_EQ(gemm_ref_error(GemmType::kFp64, 4096), 0.0);
  // A chunk's FMAs dominate: (c + 1) 2^-24 for c = 64.
  EXPECT_NEAR(gemm_ref_error(GemmType::kBf16, 8192) / 0x1p-24, 65.0, 0.1);
}

// The reference kernel's tiling covers every staged element and every output of a block once, a
// warp's lanes load one row's depths, and outputs read whole 16-byte runs of the staged rows.
TEST(GemmFastCheck, TheReferenceTilingCoversEachLoadAndOutputOnce) {
  std::vector<int> loads(kRefEdge * kRefDepth, 0), outputs(kRefEdge * kRefEdge, 0);
  for (int t = 0; t < kRefThreads; ++t) {
    for (int i = 0; i < kRefLoads; ++i) {
      ++loads[ref_load_row(t, i) * kRefDepth + ref_load_depth(t)];
      EXPECT_EQ(ref_load_row(t, i), ref_load_row(t - t % 32, i)) << "lane " << t % 32;
    }
    for (int i = 0; i < kRefMicro; ++i) {
      EXPECT_EQ(ref_out_line(t, i) % 4, i);  // a float4 of the staged rows
      EXPECT_EQ(ref_out_tile(t, i) % 4, i);
      for (int j = 0; j < kRefMicro; ++j) ++outputs[ref_out_line(t, i) * kRefEdge + ref_out_tile(t, j)];
    }
  }
  EXPECT_EQ(std::count(loads.begin(), loads.end(), 1), kRefEdge * kRefDepth);
  EXPECT_EQ(std::count(outputs.begin(), outputs.end(), 1), kRefEdge * kRefEdge);
}

// The kernel's blocked sums, emulated with its tiling (rounds of staged depths, zeros past the edges,
// a fold where ref_folds_after says), equal gemm_ref_dot32 bit for bit, and the warps' squares the
// lines' sums of squares, at shapes off the block's edges and a depth off the rounds.
TEST(GemmFastCheck, TheKernelsBlockedReferenceEqualsTheLineByLineOne) {
  const uint32_t lines = 70, tiles = 67, k = 72 + 64 * 2;
  std::vector<float> a(uint64_t{lines} * k), y(uint64_t{tiles} * k);
  for (size_t i = 0; i < a.size(); ++i) a[i] = gemm_random_value(GemmType::kBf16, 5, i);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(gemm_random_double(6, i) * 37.0);
  std::vector<double> r(uint64_t{lines} * tiles, -1), squares(lines, -1);
  for (uint32_t line0 = 0; line0 < lines; line0 += kRefEdge) {
    for (uint32_t tile0 = 0; tile0 < tiles; tile0 += kRefEdge) {
      std::vector<GemmRefSum> sums(kRefThreads * kRefMicro * kRefMicro);
      std::vector<double> sq(kRefThreads * kRefLoads, 0.0);
      float as[kRefDepth][kRefEdge], ys[kRefDepth][kRefEdge];
      for (uint32_t p0 = 0; p0 < k; p0 += kRefDepth) {
        for (int t = 0; t < kRefThreads; ++t) {
          const uint32_t p = p0 + ref_load_depth(t);
          for (int i = 0; i < kRefLoads; ++i) {
            const uint32_t row = ref_load_row(t, i);
            const float av = line0 + row < lines && p < k ? a[uint64_t{line0 + row} * k + p] : 0.0f;
            as[ref_load_depth(t)][row] = av;
            ys[ref_load_depth(t)][row] = tile0 + row < tiles && p < k ? y[uint64_t{tile0 + row} * k + p] : 0.0f;
            sq[t * kRefLoads + i] = std::fma(static_cast<double>(av), static_cast<double>(av), sq[t * kRefLoads + i]);
          }
        }
        for (int t = 0; t < kRefThreads; ++t) {
          for (int q = 0; q < kRefDepth; ++q) {
            for (int i = 0; i < kRefMicro; ++i) {
              for (int j = 0; j < kRefMicro; ++j)
                gemm_ref_add(sums[(t * kRefMicro + i) * kRefMicro + j], as[q][ref_out_line(t, i)],
                             ys[q][ref_out_tile(t, j)]);
            }
          }
          if (ref_folds_after(p0)) {
            for (int e = 0; e < kRefMicro * kRefMicro; ++e) gemm_ref_fold(sums[t * kRefMicro * kRefMicro + e]);
          }
        }
      }
      for (int t = 0; t < kRefThreads; ++t) {
        for (int i = 0; i < kRefMicro; ++i) {
          for (int j = 0; j < kRefMicro; ++j) {
            const uint32_t line = line0 + ref_out_line(t, i), tile = tile0 + ref_out_tile(t, j);
            GemmRefSum& sum = sums[(t * kRefMicro + i) * kRefMicro + j];
            gemm_ref_fold(sum);
            if (line < lines && tile < tiles) r[uint64_t{line} * tiles + tile] = sum.total;
          }
        }
      }
      if (tile0 != 0) continue;
      for (int w = 0; w < kRefThreads / 32; ++w) {
        for (int i = 0; i < kRefLoads; ++i) {
          double total = 0;
          for (int lane = 0; lane < 32; ++lane) total += sq[(w * 32 + lane) * kRefLoads + i];
          const uint32_t line = line0 + ref_load_row(w * 32, i);
          if (line < lines) squares[line] = total;
        }
      }
    }
  }
  for (uint32_t line = 0; line < lines; ++line) {
    double exact_sq = 0;
    for (uint32_t p = 0; p < k; ++p)
      exact_sq += static_cast<double>(a[uint64_t{line} * k + p]) * a[uint64_t{line} * k + p];
    EXPECT_NEAR(squares[line], exact_sq, 1e-12 * exact_sq) << "line " << line;
    for (uint32_t tile = 0; tile < tiles; ++tile) {
      const double want = gemm_ref_dot32(&a[uint64_t{line} * k], &y[uint64_t{tile} * k], k);
      ASSERT_EQ(r[uint64_t{line} * tiles + tile], want) << "line " << line << ", tile " << tile;
    }
  }
}

TEST(GemmFastCheck, VectorSpansCoverATileInOrderWithAlignedBodies) {
  for (uint64_t row : {0ull, 1ull, 2ull, 3ull, 8192ull, 8195ull}) {
    for (uint32_t per : {2u, 4u}) {
      for (uint32_t lo = 0; lo < 9; ++lo) {
        for (uint32_t hi = lo; hi < lo + 40; hi += 3) {
          const GemmVectorSpan v = gemm_vector_span(row, lo, hi, per);
          ASSERT_LE(lo, v.head);
          ASSERT_LE(v.head, v.body);
          ASSERT_LE(v.body, hi);
          EXPECT_LT(v.head - lo, per);
          EXPECT_LT(hi - v.body, per);
          EXPECT_EQ((v.body - v.head) % per, 0u);
          if (v.head < v.body) {
            EXPECT_EQ((row + v.head) % per, 0u) << row << " " << lo << " " << hi;
          }
          // Where the tile is long enough for an aligned vector, it is read as one.
          if (hi - lo >= 2 * per) {
            EXPECT_LT(v.head, v.body);
          }
        }
      }
    }
  }
}

TEST(GemmFastCheck, ACaptureCoversItsTileAndTheCandidatesAreSortedAndUnique) {
  const GemmCapture c = gemm_capture_of(3, 7, 2, 135, 400);
  EXPECT_EQ(c.first, 7u * 400 + 270);
  EXPECT_EQ(c.count, 130u);  // the last tile is short
  EXPECT_EQ(c.rep, 3u);
  std::vector<GemmCapture> caps = {{100, 1, 2}, {10, 0, 1}, {99, 1, 2}, {50, 1, 1}};
  std::vector<uint64_t> values = {1, 2, 3, 4, 5, 6, 7, 8};
  const GemmBatchCandidates cand = gemm_batch_candidates(caps, values, 2, 1);
  EXPECT_EQ(cand.index, (std::vector<uint64_t>{50, 99, 100, 101}));
  EXPECT_EQ(cand.bits, (std::vector<uint64_t>{7, 5, 1, 2}));
  EXPECT_EQ(gemm_batch_candidates(caps, values, 2, 0).index, std::vector<uint64_t>{10});
  EXPECT_TRUE(gemm_batch_candidates(caps, values, 2, 2).index.empty());
}

// The repeats a run's merge names: those whose verdict found a wrong element, in order.
TEST(GemmFastCheck, MergingABatchsVerdictsNamesTheFailedRepeats) {
  GemmRun run;
  std::vector<uint64_t> seen;
  GemmVerdict clean, wrong;
  wrong.report.mismatches = 1;
  MismatchRecord rec;
  rec.index = 77;
  wrong.report.keep(rec);
  for (unsigned rep = 0; rep < kRepeats; ++rep) gemm_merge_repeat(run, rep == 2 || rep == 4 ? wrong : clean, rep, seen);
  EXPECT_EQ(run.failed_repeats, (std::vector<uint32_t>{2, 4}));
  EXPECT_EQ(run.report.mismatches, 1u);  // the same element, counted once
}

}  // namespace
}  // namespace sdc
