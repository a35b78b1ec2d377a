// Location and confirmation of the GEMM checks' failures (gemm_confirm.hpp).
#include "host/gemm_confirm.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/common/gemm_check.hpp"

namespace sdc {

// The k between two promotions of an FP8 GEMM's partial sums to FP32. cuBLASLt documents none;
// CUTLASS promotes every four WGMMAs (k = 128), so the bound assumes 128 (or the whole k when it is
// shorter): four times the error of a 32-k interval, which is what costs sensitivity
// (docs/probes.md). The lease kit prints max |r|/tau for e4m3, the headroom left.
namespace {
constexpr uint32_t kFp8PromotionInterval = 128;

}  // namespace

GemmAccumulation gemm_cuda_accumulation(GemmType type, GemmPath path) {
  GemmAccumulation a;  // FP32 accumulation (SIMT or pedantic cuBLAS FP32): 2^-24, output 2^-24
  if (path == GemmPath::kSimt) return a;
  switch (type) {
    case GemmType::kFp64:
      a.u_acc = 0x1p-53;
      a.u_out = 0x1p-53;
      a.underflow = 0x1p-1074;
      break;
    case GemmType::kFp32: break;
    case GemmType::kTf32:
    case GemmType::kFp16:
    case GemmType::kBf16: a.u_acc = 0x1p-23; break;  // tensor cores truncate: 2^-23
    case GemmType::kE4m3:
    case GemmType::kE5m2:
      // Hopper FP8 tensor cores keep about 14 significant bits inside the k-block between two
      // promotions to FP32, block sums then accumulated in FP32 with truncation.
      a.u_acc = 0x1p-23;
      a.u_inner = 0x1p-13;
      a.chunk = kFp8PromotionInterval;
      break;
    case GemmType::kInt8:
      a.u_acc = 0;
      a.u_out = 0;
      a.underflow = 0;
      break;
  }
  return a;
}

uint32_t gemm_check_tile(const GemmSpec& s, const GemmAccumulation& acc, bool columns) {
  return gemm_check_tile_of(s.inputs, acc, s.k, columns ? s.m : s.n);
}

GemmCandidates gemm_candidates(uint32_t m, uint32_t n, uint32_t tile_c, uint32_t tile_r,
                               const std::vector<uint8_t>& row_flags, const std::vector<uint8_t>& col_flags,
                               const std::vector<uint64_t>& invalid) {
  const uint32_t col_tiles = (n + tile_c - 1) / tile_c, row_tiles = (m + tile_r - 1) / tile_r;
  GemmCandidates out;
  out.n = n;
  out.tile_c = tile_c;
  std::vector<uint64_t>& candidates = out.index;
  candidates = invalid;
  for (uint32_t i = 0; i < m; ++i) {
    for (uint32_t tt = 0; tt < col_tiles; ++tt) {
      if (!row_flags[static_cast<size_t>(i) * col_tiles + tt]) continue;
      const uint32_t jlo = tt * tile_c, jhi = std::min(n, (tt + 1) * tile_c);
      const size_t before = candidates.size();
      for (uint32_t j = jlo; j < jhi; ++j) {
        if (col_flags[static_cast<size_t>(j) * row_tiles + i / tile_r])
          candidates.push_back(static_cast<uint64_t>(i) * n + j);
      }
      // A row check that fails where no column check does (a change near the bound: the two
      // checks' tau differ): every element of its tile, each confirmed against its own bound,
      // far tighter than a tile's.
      if (candidates.size() == before) {
        for (uint32_t j = jlo; j < jhi; ++j) candidates.push_back(static_cast<uint64_t>(i) * n + j);
        out.whole_tiles.push_back(static_cast<uint64_t>(i) * col_tiles + tt);
      }
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  out.failed_at = gemm_unconfirmed_checks(n, tile_c, row_flags);
  return out;
}

std::vector<uint64_t> gemm_unconfirmed_checks(uint32_t n, uint32_t tile_c, const std::vector<uint8_t>& row_flags) {
  const uint32_t col_tiles = (n + tile_c - 1) / tile_c;
  std::vector<uint64_t> out;
  for (size_t f = 0; f < row_flags.size(); ++f) {
    if (row_flags[f]) out.push_back(static_cast<uint64_t>(f / col_tiles) * n + (f % col_tiles) * tile_c);
  }
  return out;
}

namespace {

uint64_t expected_bits_of(GemmType t, double v) {
  if (t == GemmType::kFp64) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  }
  if (t == GemmType::kInt8) return static_cast<uint32_t>(static_cast<int32_t>(v));
  return bits_of_float(static_cast<float>(v));
}

// One element's O(k) recomputation.
struct ElementDot {
  int64_t exact = 0;            // exact families: the unscaled integer product,
  int scale = 0;                // and its power of two
  double sum = 0, abs_sum = 0;  // random inputs: the sums of a_p b_p and of |a_p b_p|
};

// Confirms index[q], observed as the bits observed(q), against dot(i, j): zero tolerance after
// unscaling for exact inputs, the element bound tau of `acc` for random ones.
template <typename Observed, typename Dot>
MismatchReport confirm(const GemmSpec& s, const GemmAccumulation& acc, const std::vector<uint64_t>& index,
                       const Observed& observed, const Dot& dot, int threads) {
  const GemmType t = s.type;
  const uint32_t n = s.n, k = s.k;
  const bool exact = gemm_inputs_exact(s.inputs);
  const GemmGenerator ga = gemm_generator(t, s.inputs, k, s.seed, kGemmStreamA);
  const double bound = static_cast<double>(gemm_exact_output_bound(s.inputs, k, ga.mag));
  const double rel = gemm_relative_bound(acc, k);
  const double slack = gemm_element_slack(k);
  std::vector<MismatchReport> parts(static_cast<size_t>(std::max(1, threads)));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t q = 0; q < static_cast<int64_t>(index.size()); ++q) {
    const uint64_t idx = index[static_cast<size_t>(q)];
    const uint64_t bits = observed(static_cast<size_t>(q));
    const uint32_t i = static_cast<uint32_t>(idx / n), j = static_cast<uint32_t>(idx % n);
    const double obs = gemm_output_value_of_bits(t, bits);
    const ElementDot d = dot(i, j);
    double expected;
    bool wrong;
    if (exact) {
      wrong = gemm_unscale_output(obs, exp2_double(-d.scale), bound) != d.exact;
      expected = std::ldexp(static_cast<double>(d.exact), d.scale);
    } else {
      const double tau = gemm_element_tau(acc, rel, slack, k, d.abs_sum, std::fabs(obs));
      wrong = gemm_check_fails(std::fabs(obs - d.sum), tau) || !std::isfinite(obs);
      expected = d.sum;
    }
    if (!wrong) continue;
    MismatchReport& r = parts[static_cast<size_t>(omp_get_thread_num()) % parts.size()];
    ++r.mismatches;
    r.keep(gemm_mismatch_record(s, idx, expected_bits_of(t, expected), bits));
  }
  MismatchReport report;
  for (const auto& p : parts) {
    report.mismatches += p.mismatches;
    for (const auto& rec : p.records) report.keep(rec);
  }
  return report;
}

// Sums over p of a(p) b(p) and |a(p) b(p)| in FP64.
template <typename A, typename B>
ElementDot float_dot(uint32_t k, const A& a, const B& b) {
  ElementDot d;
  for (uint32_t p = 0; p < k; ++p) {
    const double pr = a(p) * b(p);
    d.sum += pr;
    d.abs_sum += std::fabs(pr);
  }
  return d;
}

}  // namespace

MismatchReport gemm_confirm_candidates(const GemmSpec& s, const GemmAccumulation& acc,
                                       const std::vector<uint64_t>& index, const std::vector<uint64_t>& observed,
                                       int threads) {
  const GemmGenerator ga = gemm_generator(s.type, s.inputs, s.k, s.seed, kGemmStreamA);
  const GemmGenerator gb = gemm_generator(s.type, s.inputs, s.k, s.seed, kGemmStreamB);
  const uint32_t k = s.k;
  const bool exact = gemm_inputs_exact(s.inputs);
  auto dot = [&](uint32_t i, uint32_t j) {
    const uint64_t arow = static_cast<uint64_t>(i) * k, brow = static_cast<uint64_t>(j) * k;
    if (!exact) {
      return float_dot(
          k, [&](uint32_t p) { return gemm_generated_double(ga, arow + p); },
          [&](uint32_t p) { return gemm_generated_double(gb, brow + p); });
    }
    ElementDot d;
    for (uint32_t p = 0; p < k; ++p)
      d.exact += static_cast<int64_t>(gemm_generated_int(ga, arow + p)) * gemm_generated_int(gb, brow + p);
    d.scale = gemm_generated_exponent(ga, i) + gemm_generated_exponent(gb, j);
    return d;
  };
  return confirm(
      s, acc, index, [&](size_t q) { return observed[q]; }, dot, threads);
}

MismatchReport gemm_confirm_from_inputs(const GemmHostInputs& in, const GemmAccumulation& acc,
                                        const std::vector<uint64_t>& index, const std::vector<uint64_t>& observed,
                                        int threads) {
  const GemmSpec& s = in.spec;
  const uint32_t k = s.k;
  const bool exact = gemm_inputs_exact(s.inputs);
  const double* a64 = reinterpret_cast<const double*>(in.a.data());
  const double* b64 = reinterpret_cast<const double*>(in.bt.data());
  const float* a32 = in.a_wide.empty() ? reinterpret_cast<const float*>(in.a.data()) : in.a_wide.data();
  const float* b32 = in.bt_wide.empty() ? reinterpret_cast<const float*>(in.bt.data()) : in.bt_wide.data();
  auto dot = [&](uint32_t i, uint32_t j) {
    const size_t arow = static_cast<size_t>(i) * k, brow = static_cast<size_t>(j) * k;
    if (exact) {
      ElementDot d;
      const int32_t* ar = in.a_int.data() + arow;
      const int32_t* br = in.bt_int.data() + brow;
      for (uint32_t p = 0; p < k; ++p) d.exact += static_cast<int64_t>(ar[p]) * br[p];
      d.scale = in.row_exp.empty() ? 0 : in.row_exp[i] + in.col_exp[j];
      return d;
    }
    if (s.type == GemmType::kFp64) {
      return float_dot(
          k, [&](uint32_t p) { return a64[arow + p]; }, [&](uint32_t p) { return b64[brow + p]; });
    }
    return float_dot(
        k, [&](uint32_t p) { return static_cast<double>(a32[arow + p]); },
        [&](uint32_t p) { return static_cast<double>(b32[brow + p]); });
  };
  return confirm(
      s, acc, index, [&](size_t q) { return observed[q]; }, dot, threads);
}

MismatchReport gemm_confirm_capped(const GemmSpec& spec, const GemmAccumulation& acc, const GemmHostInputs* inputs,
                                   GemmCandidates candidates, const GemmBitsAt& bits_at, int threads) {
  std::vector<uint64_t>& index = candidates.index;
  uint64_t unconfirmed = candidates.beyond;
  if (index.size() > kGemmMaxConfirm) {
    // Past the cap: a located element is likely wrong, one mismatch; a whole tile's elements stand
    // for its one failed check (index is sorted, so each tile's elements are adjacent).
    const std::vector<uint64_t>& whole = candidates.whole_tiles;
    const uint64_t n = candidates.n;
    uint64_t last_tile = UINT64_MAX;
    for (size_t q = kGemmMaxConfirm; q < index.size(); ++q) {
      if (!whole.empty()) {
        const uint64_t col_tiles = (n + candidates.tile_c - 1) / candidates.tile_c;
        const uint64_t tile = index[q] / n * col_tiles + index[q] % n / candidates.tile_c;
        if (std::binary_search(whole.begin(), whole.end(), tile)) {
          unconfirmed += tile != last_tile;
          last_tile = tile;
          continue;
        }
      }
      ++unconfirmed;
    }
    index.resize(kGemmMaxConfirm);
  }
  const std::vector<uint64_t> bits = bits_at(index);
  MismatchReport report = inputs ? gemm_confirm_from_inputs(*inputs, acc, index, bits, threads)
                                 : gemm_confirm_candidates(spec, acc, index, bits, threads);
  report.checked = static_cast<uint64_t>(spec.m) * spec.n;
  report.mismatches += unconfirmed;
  if (report.mismatches == 0) {
    // A failed check whose element the location could not confirm still counts (per element: the
    // recomputation cleared an element the reference failed, so the reference itself went wrong).
    if (candidates.element_checks) {
      gemm_keep_unconfirmed(report, spec.type, index, bits);
    } else {
      gemm_keep_unconfirmed(report, spec.type, candidates.failed_at, bits_at(candidates.failed_at));
    }
  }
  return report;
}

void gemm_keep_unconfirmed(MismatchReport& report, GemmType type, const std::vector<uint64_t>& at,
                           const std::vector<uint64_t>& observed) {
  for (size_t q = 0; q < at.size(); ++q) {
    ++report.mismatches;
    MismatchRecord rec;
    rec.index = at[q];
    rec.observed = observed[q];
    rec.width_bits = gemm_output_bytes(type) * 8;
    report.keep(rec);
  }
}

MismatchRecord gemm_mismatch_record(const GemmSpec& spec, uint64_t index, uint64_t expected, uint64_t observed) {
  MismatchRecord rec;
  rec.index = index;
  rec.expected = expected;
  rec.observed = observed;
  rec.width_bits = gemm_output_bytes(spec.type) * 8;
  rec.lane = static_cast<int>((index % spec.n) % 32);
  return rec;
}

void gemm_merge_repeat(GemmRun& run, const GemmVerdict& v, uint32_t rep, std::vector<uint64_t>& seen) {
  run.max_ratio = std::max(run.max_ratio, v.max_ratio);
  run.check_tile = v.check_tile;
  run.detectable = std::max(run.detectable, v.detectable);
  run.c_rms = v.c_rms;
  run.check_s += v.check_s;
  run.flagged_checks += v.flagged_checks;
  run.report.checked += v.report.checked;
  // Count each wrong element once over the repeats (a permanent fault shows in every repeat).
  uint64_t fresh = 0;
  for (const auto& rec : v.report.records) {
    if (std::find(seen.begin(), seen.end(), rec.index) != seen.end()) continue;
    seen.push_back(rec.index);
    run.report.keep(rec);
    ++fresh;
  }
  const uint64_t unrecorded = v.report.mismatches - v.report.records.size();
  if (rep == 0 || fresh > 0) run.report.mismatches += fresh + unrecorded;
  if (v.report.mismatches > 0) run.failed_repeats.push_back(rep);
}

GemmVerdict gemm_verdict_of(const GemmRun& run) {
  GemmVerdict v;
  v.report = run.report;
  v.max_ratio = run.max_ratio;
  v.flagged_checks = run.flagged_checks;
  v.check_tile = run.check_tile;
  v.detectable = run.detectable;
  v.c_rms = run.c_rms;
  v.check_s = run.check_s;
  return v;
}

GemmBatchCandidates gemm_batch_candidates(const std::vector<GemmCapture>& captures,
                                          const std::vector<uint64_t>& values, uint32_t stride, unsigned rep) {
  std::vector<std::pair<uint64_t, uint64_t>> found;
  for (size_t slot = 0; slot < captures.size(); ++slot) {
    const GemmCapture& c = captures[slot];
    if (c.rep != rep) continue;
    for (uint32_t e = 0; e < c.count && e < stride; ++e) found.emplace_back(c.first + e, values[slot * stride + e]);
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end(),
                          [](const auto& x, const auto& y) { return x.first == y.first; }),
              found.end());
  GemmBatchCandidates out;
  for (const auto& [index, bits] : found) {
    out.index.push_back(index);
    out.bits.push_back(bits);
  }
  return out;
}

}  // namespace sdc
