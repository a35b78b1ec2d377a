// The host's GEMM checks (gemm_checks.hpp): Freivalds/ABFT per tile, in FP64 with the
// deterministic bound for random inputs and modulo 2^64 for exact ones.
#include "host/gemm_checks.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <type_traits>

#include "host/gemm_isa.hpp"
#include "kernels/common/gemm_check.hpp"

namespace sdc {
namespace {

// ---- FP64 Freivalds / ABFT with the deterministic bound --------------------------------------

// The inner loops of the FP64 check, each compiled for AVX-512, AVX2 and the baseline instruction
// set (widest).
template <typename T>
__attribute__((always_inline)) inline void y_update_body(const T* row, double* yr, double* yar, double wj, uint32_t lo,
                                                         uint32_t hi) {
  row += lo, yr += lo, yar += lo;
  const size_t len = hi - lo;
#pragma omp simd
  for (size_t p = 0; p < len; ++p) {
    const double b = static_cast<double>(row[p]);
    yr[p] += b * wj;
    yar[p] += std::fabs(b) * wj;
  }
}

// Four rows of Bt at once (same tile): a quarter of the loads and stores of y.
template <typename T>
__attribute__((always_inline)) inline void y_update4_body(const T* r0, const T* r1, const T* r2, const T* r3,
                                                          double* yr, double* yar, const double* w, uint32_t lo,
                                                          uint32_t hi) {
  const double w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
  r0 += lo, r1 += lo, r2 += lo, r3 += lo, yr += lo, yar += lo;
  const size_t len = hi - lo;
#pragma omp simd
  for (size_t p = 0; p < len; ++p) {
    const double b0 = r0[p], b1 = r1[p], b2 = r2[p], b3 = r3[p];
    yr[p] += (b0 * w0 + b1 * w1) + (b2 * w2 + b3 * w3);
    yar[p] += (std::fabs(b0) * w0 + std::fabs(b1) * w1) + (std::fabs(b2) * w2 + std::fabs(b3) * w3);
  }
}

template <typename T>
__attribute__((always_inline)) inline void row_dots4_body(const T* a0, const T* a1, const T* a2, const T* a3,
                                                          const double* yr, const float* yar, uint32_t k, double* s,
                                                          double* q) {
  // The residual in FP64; the bound's sum of nonnegative terms in FP32 (the caller scales it up
  // by its worst-case relative rounding, kFloatSumFactor).
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  float q0 = 0, q1 = 0, q2 = 0, q3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3, q0, q1, q2, q3)
  for (size_t p = 0; p < k; ++p) {
    const double v0 = a0[p], v1 = a1[p], v2 = a2[p], v3 = a3[p];
    s0 += v0 * yr[p];
    s1 += v1 * yr[p];
    s2 += v2 * yr[p];
    s3 += v3 * yr[p];
    q0 += std::fabs(static_cast<float>(a0[p])) * yar[p];
    q1 += std::fabs(static_cast<float>(a1[p])) * yar[p];
    q2 += std::fabs(static_cast<float>(a2[p])) * yar[p];
    q3 += std::fabs(static_cast<float>(a3[p])) * yar[p];
  }
  s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3;
  q[0] = q0, q[1] = q1, q[2] = q2, q[3] = q3;
}

// sum_j c_j w_j and sum_j c_j^2 over [jlo, jhi) of a row with stride 1.
template <typename Out>
__attribute__((always_inline)) inline void c_dots_body(const Out* c, const double* w, uint32_t jlo, uint32_t jhi,
                                                       double* out) {
  // size_t indices from zero: uint32 ones starting at jlo may wrap, which defeats vectorisation.
  const Out* cp = c + jlo;
  const double* wp = w + jlo;
  const size_t len = jhi - jlo;
  double cw = 0, cc = 0;
#pragma omp simd reduction(+ : cw, cc)
  for (size_t j = 0; j < len; ++j) {
    const double v = static_cast<double>(cp[j]);
    cw += v * wp[j];
    cc += v * v;
  }
  out[0] = cw;
  out[1] = cc;
}

// Calls kernel(args...) compiled for the widest instruction set this CPU has.
template <auto kKernel, typename... Args>
SDC_GEMM_AVX512 void on_avx512(Args... args) {
  kKernel(args...);
}
template <auto kKernel, typename... Args>
SDC_GEMM_AVX2 void on_avx2(Args... args) {
  kKernel(args...);
}
template <auto kKernel, typename... Args>
void widest(Args... args) {
  if (gemm_have_avx512()) return on_avx512<kKernel>(args...);
  if (gemm_have_avx2()) return on_avx2<kKernel>(args...);
  kKernel(args...);
}

// c_dots_body on an output row: int32 rows (int8 GEMMs) are summed in the baseline instruction set.
template <typename Out>
void c_dots(const Out* c, const double* w, uint32_t jlo, uint32_t jhi, double* out) {
  if constexpr (std::is_same_v<Out, int32_t>) {
    c_dots_body(c, w, jlo, jhi, out);
  } else {
    widest<&c_dots_body<Out>>(c, w, jlo, jhi, out);
  }
}

// What one pass of the checks measured (random inputs).
struct CheckStats {
  double max_ratio = 0;     // largest |r| / tau
  double detectable = 0;    // largest gemm_detectable_error
  double c_square_sum = 0;  // sum of C^2
};

// The part of the FP64 check of C (m x n) against A (m x k rows) and Bt (n x k rows) per column
// tile of width `tile` that depends on the inputs alone: Y_t = B w_t and |B||w_t|, then per line i
// and tile t the reference A_i . Y_t and the bound's sum |A_i| . |B||w_t|.
template <typename T>
GemmLineReference float_reference(uint32_t m, uint32_t n, uint32_t k, const T* a, const T* bt, uint32_t tile,
                                  uint32_t key, int threads) {
  GemmLineReference ref;
  ref.lines = m;
  ref.tile = tile;
  ref.tiles = (n + tile - 1) / tile;
  const uint32_t tiles = ref.tiles;
  ref.w.resize(n);
  for (uint32_t j = 0; j < n; ++j) ref.w[j] = gemm_float_check_weight(key, j);  // in [1, 2)
  const std::vector<double>& w = ref.w;
  // Y_t = B w_t and |B| w_t, tile by tile (tiles x k).
  std::vector<double> y(static_cast<size_t>(tiles) * k, 0.0), ya(static_cast<size_t>(tiles) * k, 0.0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const uint32_t lo = static_cast<uint32_t>(uint64_t{k} * t / nt),
                   hi = static_cast<uint32_t>(uint64_t{k} * (t + 1) / nt);
    for (uint32_t j = 0; j < n;) {
      double* yr = y.data() + static_cast<size_t>(j / tile) * k;
      double* yar = ya.data() + static_cast<size_t>(j / tile) * k;
      if (j + 4 <= n && j / tile == (j + 3) / tile) {
        const T* r = bt + static_cast<size_t>(j) * k;
        widest<&y_update4_body<T>>(r, r + k, r + 2 * size_t{k}, r + 3 * size_t{k}, yr, yar, w.data() + j, lo, hi);
        j += 4;
      } else {
        widest<&y_update_body<T>>(bt + static_cast<size_t>(j) * k, yr, yar, w[j], lo, hi);
        j += 1;
      }
    }
  }
  // |B||w| rounded to FP32 for the bound's sum, which runs in FP32 on 16 lanes (see row_dots4_body).
  const std::vector<float> yaf(ya.begin(), ya.end());
  const double float_sum_factor = gemm_float_sum_factor(k);
  ref.tw.resize(tiles);
  for (uint32_t tt = 0; tt < tiles; ++tt) ref.tw[tt] = gemm_tile_weights(key, tt * tile, std::min(n, (tt + 1) * tile));
  ref.r.resize(static_cast<size_t>(m) * tiles);
  ref.q.resize(static_cast<size_t>(m) * tiles);
  // Dynamic: on shared cores a descheduled thread must not hold the others at the barrier.
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
  for (int64_t ib = 0; ib < static_cast<int64_t>((m + 3) / 4); ++ib) {
    const uint32_t i0 = static_cast<uint32_t>(ib) * 4;
    const uint32_t rows = std::min(4u, m - i0);
    const T* ar[4];
    for (uint32_t r = 0; r < 4; ++r) ar[r] = a + static_cast<size_t>(i0 + (r < rows ? r : 0)) * k;
    for (uint32_t tt = 0; tt < tiles; ++tt) {
      double s[4], q[4];
      widest<&row_dots4_body<T>>(ar[0], ar[1], ar[2], ar[3], y.data() + static_cast<size_t>(tt) * k,
                                 yaf.data() + static_cast<size_t>(tt) * k, k, s, q);
      for (uint32_t r = 0; r < rows; ++r) {
        ref.r[static_cast<size_t>(i0 + r) * tiles + tt] = s[r];
        ref.q[static_cast<size_t>(i0 + r) * tiles + tt] = q[r] * float_sum_factor;
      }
    }
  }
  return ref;
}

// The part of the FP64 check that depends on C: one pass over C (line i at c[i * rs + j * cs]),
// C_i . w_t per tile against the reference, flags[i * tiles + t] = 1 where |r| > tau.
template <typename Out>
CheckStats float_compare(const GemmLineReference& ref, uint32_t n, uint32_t k, const Out* c, size_t rs, size_t cs,
                         const GemmAccumulation& acc, int threads, std::vector<uint8_t>& flags) {
  const uint32_t m = ref.lines, tile = ref.tile, tiles = ref.tiles;
  flags.assign(static_cast<size_t>(m) * tiles, 0);
  const double rel = gemm_relative_bound(acc, k);
  const double slack = gemm_check_slack(k, n);
  double max_ratio = 0, detectable = 0, c_square_sum = 0;
  std::vector<double> strided;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16) reduction(max : max_ratio, detectable) \
    reduction(+ : c_square_sum) firstprivate(strided)
  for (int64_t ii = 0; ii < static_cast<int64_t>(m); ++ii) {
    const uint32_t i = static_cast<uint32_t>(ii);
    const Out* line = c + static_cast<size_t>(i) * rs;
    if (cs != 1) {  // the transposed check (location only): gather the strided line first
      strided.resize(n);
      for (uint32_t j = 0; j < n; ++j) strided[j] = static_cast<double>(line[j * cs]);
    }
    for (uint32_t tt = 0; tt < tiles; ++tt) {
      const uint32_t jlo = tt * tile, jhi = std::min(n, jlo + tile);
      double d[2];
      if (cs == 1) {
        c_dots(line, ref.w.data(), jlo, jhi, d);
      } else {
        c_dots(strided.data(), ref.w.data(), jlo, jhi, d);
      }
      const size_t at = static_cast<size_t>(i) * tiles + tt;
      c_square_sum += d[1];
      const double tau = gemm_tile_tau(acc, rel, slack, k, ref.q[at], ref.tw[tt].sum);
      const double res = std::fabs(d[0] - ref.r[at]);
      if (gemm_check_fails(res, tau)) flags[at] = 1;
      if (res == res && tau > 0) max_ratio = std::max(max_ratio, res / tau);
      if (res == res) detectable = std::max(detectable, gemm_detectable_error(tau, res, ref.tw[tt].min));
    }
  }
  return {max_ratio, detectable, c_square_sum};
}

// ---- Exact Freivalds modulo 2^64 -------------------------------------------------------------

template <typename C>
void exact_check(uint32_t m, uint32_t n, uint32_t k, const int32_t* a, const int32_t* bt, C c, uint32_t tile,
                 uint32_t key, int threads, std::vector<uint8_t>& flags) {
  constexpr uint32_t kVectors = kGemmExactVectors;
  const uint32_t tiles = (n + tile - 1) / tile;
  flags.assign(static_cast<size_t>(m) * tiles, 0);
  std::vector<uint64_t> w(static_cast<size_t>(n) * kVectors);
  for (uint32_t j = 0; j < n; ++j) {
    for (uint32_t v = 0; v < kVectors; ++v)
      w[static_cast<size_t>(j) * kVectors + v] = gemm_exact_check_weight(key, j, v);
  }
  const size_t rows_y = static_cast<size_t>(tiles) * kVectors;
  std::vector<uint64_t> y(rows_y * k, 0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const uint32_t lo = static_cast<uint32_t>(uint64_t{k} * t / nt),
                   hi = static_cast<uint32_t>(uint64_t{k} * (t + 1) / nt);
    for (uint32_t j = 0; j < n; ++j) {
      const int32_t* row = bt + static_cast<size_t>(j) * k;
      for (uint32_t v = 0; v < kVectors; ++v) {
        uint64_t* yr = y.data() + (static_cast<size_t>(j / tile) * kVectors + v) * k;
        const uint64_t wj = w[static_cast<size_t>(j) * kVectors + v];
        for (uint32_t p = lo; p < hi; ++p) yr[p] += static_cast<uint64_t>(static_cast<int64_t>(row[p])) * wj;
      }
    }
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t ii = 0; ii < static_cast<int64_t>(m); ++ii) {
    const uint32_t i = static_cast<uint32_t>(ii);
    const int32_t* ar = a + static_cast<size_t>(i) * k;
    for (uint32_t tt = 0; tt < tiles; ++tt) {
      const uint32_t jlo = tt * tile, jhi = std::min(n, jlo + tile);
      for (uint32_t v = 0; v < kVectors; ++v) {
        const uint64_t* yr = y.data() + (static_cast<size_t>(tt) * kVectors + v) * k;
        uint64_t s = 0, cw = 0;
        for (uint32_t p = 0; p < k; ++p) s += static_cast<uint64_t>(static_cast<int64_t>(ar[p])) * yr[p];
        for (uint32_t j = jlo; j < jhi; ++j) {
          const int64_t cv = c(i, j);
          cw += static_cast<uint64_t>(cv == kGemmInvalid ? 0 : cv) * w[static_cast<size_t>(j) * kVectors + v];
        }
        if (s != cw) flags[static_cast<size_t>(i) * tiles + tt] = 1;
      }
    }
  }
}

// Exact families: the observed outputs as unscaled integers (kGemmInvalid where one cannot be the
// integer product), with the indices of the invalid ones appended to `invalid`.
std::vector<int64_t> unscaled_outputs(const GemmHostInputs& in, const void* c, int threads,
                                      std::vector<uint64_t>& invalid) {
  const uint32_t m = in.spec.m, n = in.spec.n;
  std::vector<int64_t> cint(static_cast<size_t>(m) * n);
  const double bound = static_cast<double>(in.exact_bound);
  std::vector<std::vector<uint64_t>> bad(static_cast<size_t>(std::max(1, threads)));
  // Unscaling multiplies by exact powers of two; every exact bound is below 2^31, so an integer
  // in range converts to int32 exactly (a loop that vectorises).
  std::vector<double> col_scale(n, 1.0);
  for (uint32_t j = 0; j < n && !in.col_exp.empty(); ++j) col_scale[j] = std::ldexp(1.0, -in.col_exp[j]);
  auto convert = [&](const auto* cv) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t ii = 0; ii < static_cast<int64_t>(m); ++ii) {
      const size_t i = static_cast<size_t>(ii);
      const double row_scale = in.row_exp.empty() ? 1.0 : std::ldexp(1.0, -in.row_exp[i]);
      const auto* crow = cv + i * n;
      int64_t* out = cint.data() + i * n;
      const double* cs = col_scale.data();
      size_t wrong = 0;
#pragma omp simd reduction(+ : wrong)
      for (size_t j = 0; j < n; ++j) {
        const int64_t iv = gemm_unscale_output(static_cast<double>(crow[j]), row_scale * cs[j], bound);
        out[j] = iv;
        wrong += iv == kGemmInvalid ? 1 : 0;
      }
      if (wrong == 0) continue;
      auto& list = bad[static_cast<size_t>(omp_get_thread_num()) % bad.size()];
      for (size_t j = 0; j < n; ++j) {
        if (out[j] == kGemmInvalid) list.push_back(i * n + j);
      }
    }
  };
  if (in.spec.type == GemmType::kFp64) {
    convert(static_cast<const double*>(c));
  } else if (in.spec.type == GemmType::kInt8) {
    convert(static_cast<const int32_t*>(c));
  } else {
    convert(static_cast<const float*>(c));
  }
  for (auto& b : bad) invalid.insert(invalid.end(), b.begin(), b.end());
  return cint;
}

// The reference of one pass of the FP64 check (rows per column tile or, transposed to locate,
// columns per row tile) on the stored FP64 inputs or the exact float copies of the others.
GemmLineReference line_reference(const GemmHostInputs& in, const GemmAccumulation& acc, bool transposed, int threads) {
  const GemmSpec& s = in.spec;
  const uint32_t tile = gemm_check_tile(s, acc, transposed);
  const uint32_t key = gemm_stream_key(s.seed, transposed ? kGemmStreamColCheck : kGemmStreamRowCheck);
  auto pass = [&](const auto* a, const auto* bt) {
    return transposed ? float_reference(s.n, s.m, s.k, bt, a, tile, key, threads)
                      : float_reference(s.m, s.n, s.k, a, bt, tile, key, threads);
  };
  if (s.type == GemmType::kFp64)
    return pass(reinterpret_cast<const double*>(in.a.data()), reinterpret_cast<const double*>(in.bt.data()));
  return pass(in.a_wide.empty() ? reinterpret_cast<const float*>(in.a.data()) : in.a_wide.data(),
              in.bt_wide.empty() ? reinterpret_cast<const float*>(in.bt.data()) : in.bt_wide.data());
}

// C against one pass's reference.
CheckStats line_compare(const GemmSpec& s, const GemmLineReference& ref, const void* c, const GemmAccumulation& acc,
                        bool transposed, int threads, std::vector<uint8_t>& flags) {
  auto pass = [&](const auto* out) {
    return transposed ? float_compare(ref, s.m, s.k, out, 1, s.n, acc, threads, flags)
                      : float_compare(ref, s.n, s.k, out, s.n, 1, acc, threads, flags);
  };
  if (s.type == GemmType::kFp64) return pass(static_cast<const double*>(c));
  if (s.type == GemmType::kInt8) return pass(static_cast<const int32_t*>(c));
  return pass(static_cast<const float*>(c));
}

// One pass of the checks (rows, or transposed the columns) for the inputs' family: exact on the
// unscaled outputs `cint`, FP64 against the reference of random inputs (the columns' computed when
// first needed). Returns what the FP64 check measured (nothing for exact inputs).
CheckStats check_pass(const GemmHostInputs& in, const void* c, const std::vector<int64_t>& cint, GemmReference& ref,
                      bool transposed, int threads, std::vector<uint8_t>& flags) {
  const GemmSpec& s = in.spec;
  const uint32_t n = s.n;
  if (gemm_inputs_exact(s.inputs)) {
    const int64_t* ci = cint.data();
    if (!transposed) {
      exact_check(
          s.m, n, s.k, in.a_int.data(), in.bt_int.data(),
          [ci, n](uint32_t i, uint32_t j) { return ci[static_cast<size_t>(i) * n + j]; },
          gemm_check_tile(s, ref.acc, false), gemm_stream_key(s.seed, kGemmStreamRowCheck), threads, flags);
    } else {
      exact_check(
          n, s.m, s.k, in.bt_int.data(), in.a_int.data(),
          [ci, n](uint32_t j, uint32_t i) { return ci[static_cast<size_t>(i) * n + j]; },
          gemm_check_tile(s, ref.acc, true), gemm_stream_key(s.seed, kGemmStreamColCheck), threads, flags);
    }
    return {};
  }
  std::optional<GemmLineReference>& lines = transposed ? ref.columns : ref.rows;
  if (!lines) lines = line_reference(in, ref.acc, transposed, threads);
  return line_compare(s, *lines, c, ref.acc, transposed, threads, flags);
}

// ---- Random fp8: per element against an exact reference -------------------------------------

// The reference C and |A||B| by FP64 GEMMs of the inputs' exact float copies (exact in any order:
// gemm_reference_check), row block by row block.
void element_reference(const GemmHostInputs& in, int threads, GemmReference& out) {
  const GemmSpec& s = in.spec;
  const uint32_t m = s.m, n = s.n, k = s.k;
  constexpr uint32_t kRows = 64;
  std::vector<double> b(static_cast<size_t>(n) * k), b_abs(b.size());
  for (size_t e = 0; e < b.size(); ++e) b[e] = in.bt_wide[e], b_abs[e] = std::fabs(in.bt_wide[e]);
  out.element.resize(static_cast<size_t>(m) * n);
  out.element_abs.resize(out.element.size());
  openblas_set_num_threads(1);
  std::vector<double> a, a_abs;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) firstprivate(a, a_abs)
  for (int64_t blk = 0; blk < static_cast<int64_t>((m + kRows - 1) / kRows); ++blk) {
    const size_t lo = static_cast<size_t>(blk) * kRows, rows = std::min<size_t>(kRows, m - lo);
    a.resize(rows * k), a_abs.resize(rows * k);
    for (size_t e = 0; e < rows * k; ++e) a[e] = in.a_wide[lo * k + e], a_abs[e] = std::fabs(a[e]);
    const int r = static_cast<int>(rows);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, n, k, 1.0, a.data(), k, b.data(), k, 0.0,
                out.element.data() + lo * n, n);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, n, k, 1.0, a_abs.data(), k, b_abs.data(), k, 0.0,
                out.element_abs.data() + lo * n, n);
  }
}

// Each element of C against the reference by gemm_reference_element. Returns the failing elements
// (the candidates), sorted.
std::vector<uint64_t> element_compare(const GemmSpec& s, const GemmReference& ref, const float* c, int threads,
                                      CheckStats& stats) {
  const uint64_t elements = static_cast<uint64_t>(s.m) * s.n;
  const double rel = gemm_relative_bound(ref.acc, s.k);
  std::vector<std::vector<uint64_t>> failing(static_cast<size_t>(std::max(1, threads)));
  double max_ratio = 0, detectable = 0, c_square_sum = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(max : max_ratio, detectable) \
    reduction(+ : c_square_sum)
  for (int64_t ee = 0; ee < static_cast<int64_t>(elements); ++ee) {
    const size_t e = static_cast<size_t>(ee);
    const double obs = c[e];
    const GemmElementCheck ch = gemm_reference_element(ref.acc, rel, s.k, ref.element[e], ref.element_abs[e], obs);
    if (ch.fails) failing[static_cast<size_t>(omp_get_thread_num()) % failing.size()].push_back(e);
    if (ch.residual == ch.residual) {
      if (ch.tau > 0) max_ratio = std::max(max_ratio, ch.residual / ch.tau);
      detectable = std::max(detectable, ch.tau + ch.residual);
    }
    c_square_sum += obs * obs;
  }
  stats = {max_ratio, detectable, c_square_sum};
  std::vector<uint64_t> out;
  for (auto& f : failing) out.insert(out.end(), f.begin(), f.end());
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t count_flags(const std::vector<uint8_t>& flags) {
  uint64_t count = 0;
  for (uint8_t f : flags) count += f;
  return count;
}

}  // namespace

GemmReference gemm_reference(const GemmHostInputs& in, const GemmAccumulation& acc, int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  GemmReference ref;
  ref.spec = in.spec;
  ref.acc = acc;
  if (gemm_reference_check(in.spec.type, in.spec.inputs)) {
    element_reference(in, threads, ref);
  } else if (!gemm_inputs_exact(in.spec.inputs)) {
    ref.rows = line_reference(in, acc, false, threads);
  }
  ref.compute_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ref;
}

bool gemm_reference_fits(const GemmReference& ref, const GemmSpec& spec, const GemmAccumulation& acc) {
  return gemm_same_inputs(ref.spec, spec) && gemm_same_accumulation(ref.acc, acc);
}

GemmVerdict verify_gemm(const GemmHostInputs& in, const void* c, const GemmAccumulation& acc, int threads) {
  GemmReference ref = gemm_reference(in, acc, threads);
  return verify_gemm(in, c, ref, threads);
}

GemmVerdict verify_gemm(const GemmHostInputs& in, const void* c, GemmReference& ref, int threads) {
  const GemmSpec& s = in.spec;
  const GemmAccumulation& acc = ref.acc;
  GemmVerdict verdict;
  const GemmBitsAt bits_at = [&](const std::vector<uint64_t>& index) {
    std::vector<uint64_t> bits;
    for (uint64_t idx : index) bits.push_back(gemm_output_bits(s.type, c, idx));
    return bits;
  };
  std::vector<uint64_t> invalid;
  const std::vector<int64_t> cint =
      gemm_inputs_exact(s.inputs) ? unscaled_outputs(in, c, threads, invalid) : std::vector<int64_t>{};
  if (gemm_reference_check(s.type, s.inputs)) {
    // Per element: the failing elements are the candidates, confirmed by the same O(k) recomputation.
    const auto t0 = std::chrono::steady_clock::now();
    CheckStats stats;
    GemmCandidates candidates;
    candidates.index = element_compare(s, ref, static_cast<const float*>(c), threads, stats);
    candidates.element_checks = true;
    verdict.check_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    verdict.max_ratio = stats.max_ratio;
    verdict.check_tile = 1;
    verdict.detectable = stats.detectable;
    verdict.c_rms = std::sqrt(stats.c_square_sum / (static_cast<double>(s.m) * s.n));
    verdict.flagged_checks = candidates.index.size();
    verdict.report = gemm_confirm_capped(s, acc, &in, std::move(candidates), bits_at, threads);
    return verdict;
  }
  std::vector<uint8_t> row_flags, col_flags;
  auto t0 = std::chrono::steady_clock::now();
  const CheckStats rows = check_pass(in, c, cint, ref, false, threads, row_flags);
  verdict.check_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  verdict.max_ratio = rows.max_ratio;
  verdict.check_tile = gemm_check_tile(s, acc, false);
  verdict.detectable = rows.detectable;
  verdict.c_rms = std::sqrt(rows.c_square_sum / (static_cast<double>(s.m) * s.n));
  verdict.flagged_checks = count_flags(row_flags);
  if (verdict.flagged_checks == 0 && invalid.empty()) {
    verdict.report.checked = static_cast<uint64_t>(s.m) * s.n;
    return verdict;
  }

  // Locate: the same check on the transpose, per row tile of C; an element is a candidate where its
  // row fails in its column tile and its column fails in its row tile.
  t0 = std::chrono::steady_clock::now();
  check_pass(in, c, cint, ref, true, threads, col_flags);
  verdict.check_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  verdict.flagged_checks += count_flags(col_flags);
  const uint32_t tile_c = verdict.check_tile, tile_r = gemm_check_tile(s, acc, true);
  // Confirm each candidate by an O(k) recomputation.
  verdict.report = gemm_confirm_capped(
      s, acc, &in, gemm_candidates(s.m, s.n, tile_c, tile_r, row_flags, col_flags, invalid), bits_at, threads);
  return verdict;
}

}  // namespace sdc
