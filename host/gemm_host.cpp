// Host side of the gemm.* probes: seeded input generation, Freivalds/ABFT verification with
// location, digests, and the compute / inject / verify loop the engines share.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "host/gemm.hpp"
#include "host/gemm_engine_base.hpp"
#include "kernels/common/gemm_check.hpp"

namespace sdc {

const char* gemm_type_name(GemmType t) {
  switch (t) {
    case GemmType::kFp64: return "fp64";
    case GemmType::kFp32: return "fp32";
    case GemmType::kTf32: return "tf32";
    case GemmType::kFp16: return "fp16";
    case GemmType::kBf16: return "bf16";
    case GemmType::kE4m3: return "e4m3";
    case GemmType::kE5m2: return "e5m2";
    case GemmType::kInt8: return "int8";
  }
  return "";
}

const char* gemm_inputs_name(GemmInputs in) {
  switch (in) {
    case GemmInputs::kExact: return "exact";
    case GemmInputs::kDense: return "dense";
    case GemmInputs::kScaled: return "scaled";
    case GemmInputs::kRandom: return "random";
  }
  return "";
}

uint32_t gemm_check_tile(uint32_t n) { return gemm_check_tile_of(n); }

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool is_exact(GemmInputs in) { return gemm_inputs_exact(in); }

bool have_avx2() {
#if defined(__x86_64__)
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
#else
  return false;
#endif
}

bool have_avx512() {
#if defined(__x86_64__)
  static const bool have = __builtin_cpu_supports("avx512f");
  return have;
#else
  return false;
#endif
}

#if defined(__x86_64__)
#define SDC_GEMM_AVX2 __attribute__((target("avx2")))
#define SDC_GEMM_AVX512 __attribute__((target("avx512f,prefer-vector-width=512")))
#else
#define SDC_GEMM_AVX2
#define SDC_GEMM_AVX512
#endif

// Random inputs [lo, hi) of one matrix: a loop per type, so the generator vectorises.
template <GemmType kType>
__attribute__((always_inline)) inline void fill_random_body(uint32_t key, uint64_t lo, uint64_t hi, void* raw,
                                                            float* wide) {
  if constexpr (kType == GemmType::kFp64) {
    double* out = static_cast<double*>(raw);
    for (uint64_t i = lo; i < hi; ++i) out[i] = gemm_random_double(key, i);
    return;
  }
  // Runs within which the index's high half is constant: the hash then works on 32-bit lanes.
  for (uint64_t run = lo; run < hi;) {
    const uint64_t end = std::min<uint64_t>(hi, (run | 0xffffffffULL) + 1);
    const uint32_t high = static_cast<uint32_t>(run >> 32), low0 = static_cast<uint32_t>(run);
    const uint32_t count = static_cast<uint32_t>(end - run);
    if constexpr (kType == GemmType::kFp32 || kType == GemmType::kTf32) {
      float* out = static_cast<float*>(raw) + run;
#pragma omp simd
      for (uint32_t o = 0; o < count; ++o)
        out[o] = gemm_random_value_of(kType, gemm_random32_parts(key, low0 + o, high));
    } else if constexpr (kType == GemmType::kBf16 || kType == GemmType::kFp16) {
      uint16_t* out = static_cast<uint16_t*>(raw) + run;
      float* wo = wide + run;
#pragma omp simd
      for (uint32_t o = 0; o < count; ++o) {
        const float v = gemm_random_value_of(kType, gemm_random32_parts(key, low0 + o, high));
        wo[o] = v;
        if constexpr (kType == GemmType::kBf16) {
          out[o] = static_cast<uint16_t>(bits_of_float(v) >> 16);
        } else {
          out[o] = static_cast<uint16_t>(float_to_minifloat_exact(v, kFp16Format));
        }
      }
    } else {
      float* wo = wide + run;
#pragma omp simd
      for (uint32_t o = 0; o < count; ++o)
        wo[o] = gemm_random_value_of(kType, gemm_random32_parts(key, low0 + o, high));
      for (uint32_t o = 0; o < count; ++o) gemm_store_input(kType, raw, run + o, wo[o]);
    }
    run = end;
  }
}

template <GemmType kType>
SDC_GEMM_AVX2 void fill_random_avx2(uint32_t key, uint64_t lo, uint64_t hi, void* raw, float* wide) {
  fill_random_body<kType>(key, lo, hi, raw, wide);
}

template <GemmType kType>
void fill_random_typed(uint32_t key, uint64_t lo, uint64_t hi, void* raw, float* wide) {
  if (have_avx2()) return fill_random_avx2<kType>(key, lo, hi, raw, wide);
  fill_random_body<kType>(key, lo, hi, raw, wide);
}

void fill_random(GemmType t, uint32_t key, uint64_t lo, uint64_t hi, void* raw, float* wide) {
  switch (t) {
    case GemmType::kFp64: return fill_random_typed<GemmType::kFp64>(key, lo, hi, raw, wide);
    case GemmType::kFp32: return fill_random_typed<GemmType::kFp32>(key, lo, hi, raw, wide);
    case GemmType::kTf32: return fill_random_typed<GemmType::kTf32>(key, lo, hi, raw, wide);
    case GemmType::kFp16: return fill_random_typed<GemmType::kFp16>(key, lo, hi, raw, wide);
    case GemmType::kBf16: return fill_random_typed<GemmType::kBf16>(key, lo, hi, raw, wide);
    case GemmType::kE4m3: return fill_random_typed<GemmType::kE4m3>(key, lo, hi, raw, wide);
    case GemmType::kE5m2: return fill_random_typed<GemmType::kE5m2>(key, lo, hi, raw, wide);
    case GemmType::kInt8: return fill_random_typed<GemmType::kInt8>(key, lo, hi, raw, wide);
  }
}

}  // namespace

GemmHostInputs generate_gemm_inputs(const GemmSpec& spec, int threads) {
  GemmHostInputs in;
  generate_gemm_inputs_into(spec, threads, in);
  return in;
}

void generate_gemm_inputs_into(const GemmSpec& spec, int threads, GemmHostInputs& in) {
  const GemmType t = spec.type;
  if (spec.m == 0 || spec.n == 0 || spec.k == 0) throw std::invalid_argument("gemm: empty shape");
  if (spec.inputs == GemmInputs::kDense && (t != GemmType::kBf16 || spec.k > kGemmDenseMaxK)) {
    throw std::invalid_argument("gemm: dense inputs are bf16 with k <= 256");
  }
  if (spec.inputs == GemmInputs::kScaled && t == GemmType::kInt8) throw std::invalid_argument("gemm: no scaled int8");
  in.spec = spec;
  const uint64_t m = spec.m, n = spec.n, k = spec.k;
  const unsigned ib = gemm_input_bytes(t);
  in.a.resize(m * k * ib);
  in.bt.resize(n * k * ib);
  const bool wide = t != GemmType::kFp32 && t != GemmType::kTf32 && t != GemmType::kFp64;
  in.a_wide.resize(wide ? m * k : 0);
  in.bt_wide.resize(wide ? n * k : 0);
  const bool exact = is_exact(spec.inputs);
  // Every element comes from the SDC_HD generators the CUDA kernels call (gemm_elements.hpp).
  const GemmGenerator ga = gemm_generator(t, spec.inputs, spec.k, spec.seed, kGemmStreamA);
  const GemmGenerator gb = gemm_generator(t, spec.inputs, spec.k, spec.seed, kGemmStreamB);
  in.a_int.resize(exact ? m * k : 0);
  in.bt_int.resize(exact ? n * k : 0);
  in.exact_bound = gemm_exact_output_bound(spec.inputs, spec.k, ga.mag);
  in.row_exp.clear();
  in.col_exp.clear();
  if (spec.inputs == GemmInputs::kScaled) {
    in.row_exp.resize(m);
    in.col_exp.resize(n);
    for (uint64_t i = 0; i < m; ++i) in.row_exp[i] = gemm_generated_exponent(ga, i);
    for (uint64_t j = 0; j < n; ++j) in.col_exp[j] = gemm_generated_exponent(gb, j);
  }
  auto fill = [&](const GemmGenerator& g, uint64_t rows, std::vector<uint8_t>& raw, std::vector<float>& w,
                  std::vector<int32_t>& ints, const std::vector<int32_t>& exps) {
    void* out = raw.data();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 32)
    for (int64_t r = 0; r < static_cast<int64_t>(rows); ++r) {
      const uint64_t base = static_cast<uint64_t>(r) * k;
      if (!exact) {  // gemm_generated_float / _double, unrolled per type so that it vectorises
        fill_random(t, g.key, base, base + k, out, wide ? w.data() : nullptr);
        continue;
      }
      const float scale = exps.empty() ? 1.0f : exp2_float(exps[r]);
      for (uint64_t p = 0; p < k; ++p) {
        const uint64_t idx = base + p;
        const int32_t iv = gemm_generated_int(g, idx);
        const float v = static_cast<float>(iv) * scale;  // = gemm_generated_float(g, idx)
        ints[idx] = iv;
        gemm_store_input(t, out, idx, v);
        if (wide) w[idx] = v;
      }
    }
  };
  fill(ga, m, in.a, in.a_wide, in.a_int, in.row_exp);
  fill(gb, n, in.bt, in.bt_wide, in.bt_int, in.col_exp);
}

Digest128 gemm_digest(const void* c, uint64_t bytes, int threads) {
  const uint64_t words = bytes / 8;
  const uint64_t* w = static_cast<const uint64_t*>(c);
  uint64_t lo = 0, hi = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : lo, hi)
  for (int64_t i = 0; i < static_cast<int64_t>(words); ++i) {
    lo += digest_term_lo(w[i], static_cast<uint64_t>(i));
    hi += digest_term_hi(w[i], static_cast<uint64_t>(i));
  }
  Digest128 d;
  d.lo = lo;
  d.hi = hi;
  return d;
}

namespace {

// ---- FP64 Freivalds / ABFT with the deterministic bound --------------------------------------

// The inner loops of the FP64 check, compiled twice: for AVX2 (chosen at run time, like the chain
// kernels) and for the baseline instruction set.
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

// sum_j c_j w_j over [jlo, jhi) of a row with stride 1.
template <typename Out>
__attribute__((always_inline)) inline void c_dots_body(const Out* c, const double* w, uint32_t jlo, uint32_t jhi,
                                                       double* out) {
  // size_t indices from zero: uint32 ones starting at jlo may wrap, which defeats vectorisation.
  const Out* cp = c + jlo;
  const double* wp = w + jlo;
  const size_t len = jhi - jlo;
  double cw = 0;
#pragma omp simd reduction(+ : cw)
  for (size_t j = 0; j < len; ++j) cw += static_cast<double>(cp[j]) * wp[j];
  out[0] = cw;
}

#define SDC_GEMM_KERNELS(T)                                                                                          \
  SDC_GEMM_AVX2 void y_update_avx2(const T* row, double* yr, double* yar, double wj, uint32_t lo, uint32_t hi) {     \
    y_update_body(row, yr, yar, wj, lo, hi);                                                                         \
  }                                                                                                                  \
  SDC_GEMM_AVX512 void y_update_avx512(const T* row, double* yr, double* yar, double wj, uint32_t lo, uint32_t hi) { \
    y_update_body(row, yr, yar, wj, lo, hi);                                                                         \
  }                                                                                                                  \
  void y_update_base(const T* row, double* yr, double* yar, double wj, uint32_t lo, uint32_t hi) {                   \
    y_update_body(row, yr, yar, wj, lo, hi);                                                                         \
  }                                                                                                                  \
  void y_update(const T* row, double* yr, double* yar, double wj, uint32_t lo, uint32_t hi) {                        \
    if (have_avx512()) return y_update_avx512(row, yr, yar, wj, lo, hi);                                             \
    if (have_avx2()) return y_update_avx2(row, yr, yar, wj, lo, hi);                                                 \
    y_update_base(row, yr, yar, wj, lo, hi);                                                                         \
  }                                                                                                                  \
  SDC_GEMM_AVX512 void y_update4_avx512(const T* r0, const T* r1, const T* r2, const T* r3, double* yr, double* yar, \
                                        const double* w, uint32_t lo, uint32_t hi) {                                 \
    y_update4_body(r0, r1, r2, r3, yr, yar, w, lo, hi);                                                              \
  }                                                                                                                  \
  SDC_GEMM_AVX2 void y_update4_avx2(const T* r0, const T* r1, const T* r2, const T* r3, double* yr, double* yar,     \
                                    const double* w, uint32_t lo, uint32_t hi) {                                     \
    y_update4_body(r0, r1, r2, r3, yr, yar, w, lo, hi);                                                              \
  }                                                                                                                  \
  void y_update4(const T* r0, const T* r1, const T* r2, const T* r3, double* yr, double* yar, const double* w,       \
                 uint32_t lo, uint32_t hi) {                                                                         \
    if (have_avx512()) return y_update4_avx512(r0, r1, r2, r3, yr, yar, w, lo, hi);                                  \
    if (have_avx2()) return y_update4_avx2(r0, r1, r2, r3, yr, yar, w, lo, hi);                                      \
    y_update4_body(r0, r1, r2, r3, yr, yar, w, lo, hi);                                                              \
  }                                                                                                                  \
  SDC_GEMM_AVX2 void row_dots4_avx2(const T* a0, const T* a1, const T* a2, const T* a3, const double* yr,            \
                                    const float* yar, uint32_t k, double* s, double* q) {                            \
    row_dots4_body(a0, a1, a2, a3, yr, yar, k, s, q);                                                                \
  }                                                                                                                  \
  SDC_GEMM_AVX512 void row_dots4_avx512(const T* a0, const T* a1, const T* a2, const T* a3, const double* yr,        \
                                        const float* yar, uint32_t k, double* s, double* q) {                        \
    row_dots4_body(a0, a1, a2, a3, yr, yar, k, s, q);                                                                \
  }                                                                                                                  \
  void row_dots4_base(const T* a0, const T* a1, const T* a2, const T* a3, const double* yr, const float* yar,        \
                      uint32_t k, double* s, double* q) {                                                            \
    row_dots4_body(a0, a1, a2, a3, yr, yar, k, s, q);                                                                \
  }                                                                                                                  \
  void row_dots4(const T* a0, const T* a1, const T* a2, const T* a3, const double* yr, const float* yar, uint32_t k, \
                 double* s, double* q) {                                                                             \
    if (have_avx512()) return row_dots4_avx512(a0, a1, a2, a3, yr, yar, k, s, q);                                    \
    if (have_avx2()) return row_dots4_avx2(a0, a1, a2, a3, yr, yar, k, s, q);                                        \
    row_dots4_base(a0, a1, a2, a3, yr, yar, k, s, q);                                                                \
  }                                                                                                                  \
  SDC_GEMM_AVX2 void c_dots_avx2(const T* c, const double* w, uint32_t jlo, uint32_t jhi, double* out) {             \
    c_dots_body(c, w, jlo, jhi, out);                                                                                \
  }                                                                                                                  \
  SDC_GEMM_AVX512 void c_dots_avx512(const T* c, const double* w, uint32_t jlo, uint32_t jhi, double* out) {         \
    c_dots_body(c, w, jlo, jhi, out);                                                                                \
  }                                                                                                                  \
  void c_dots_base(const T* c, const double* w, uint32_t jlo, uint32_t jhi, double* out) {                           \
    c_dots_body(c, w, jlo, jhi, out);                                                                                \
  }                                                                                                                  \
  void c_dots(const T* c, const double* w, uint32_t jlo, uint32_t jhi, double* out) {                                \
    if (have_avx512()) return c_dots_avx512(c, w, jlo, jhi, out);                                                    \
    if (have_avx2()) return c_dots_avx2(c, w, jlo, jhi, out);                                                        \
    c_dots_base(c, w, jlo, jhi, out);                                                                                \
  }

SDC_GEMM_KERNELS(float)
SDC_GEMM_KERNELS(double)
void c_dots(const int32_t* c, const double* w, uint32_t jlo, uint32_t jhi, double* out) {
  c_dots_body(c, w, jlo, jhi, out);
}
#undef SDC_GEMM_KERNELS

// Checks C (m x n at c[i * rs + j * cs]) against A (m x k rows) and Bt (n x k rows) per column tile
// of width `tile`: flags[i * tiles + t] = 1 where |r| > tau. Returns the largest |r| / tau.
template <typename T, typename Out>
double float_check(uint32_t m, uint32_t n, uint32_t k, const T* a, const T* bt, const Out* c, size_t rs, size_t cs,
                   uint32_t tile, uint32_t key, const GemmAccumulation& acc, int threads, std::vector<uint8_t>& flags) {
  const uint32_t tiles = (n + tile - 1) / tile;
  flags.assign(static_cast<size_t>(m) * tiles, 0);
  std::vector<double> w(n);
  for (uint32_t j = 0; j < n; ++j) w[j] = gemm_float_check_weight(key, j);  // in [1, 2)
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
        y_update4(r, r + k, r + 2 * size_t{k}, r + 3 * size_t{k}, yr, yar, w.data() + j, lo, hi);
        j += 4;
      } else {
        y_update(bt + static_cast<size_t>(j) * k, yr, yar, w[j], lo, hi);
        j += 1;
      }
    }
  }
  // |B||w| rounded to FP32 for the bound's sum, which runs in FP32 on 16 lanes (see row_dots4).
  const std::vector<float> yaf(ya.begin(), ya.end());
  const double float_sum_factor = gemm_float_sum_factor(k);
  const double rel = gemm_relative_bound(acc, k);
  const double slack = gemm_check_slack(k, n);
  // sum of w over each tile, for the underflow allowance.
  std::vector<double> wsum(tiles, 0.0);
  for (uint32_t j = 0; j < n; ++j) wsum[j / tile] += w[j];
  double max_ratio = 0;
  std::vector<double> strided;
  // Dynamic: on shared cores a descheduled thread must not hold the others at the barrier.
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8) reduction(max : max_ratio) firstprivate(strided)
  for (int64_t ib = 0; ib < static_cast<int64_t>((m + 3) / 4); ++ib) {
    const uint32_t i0 = static_cast<uint32_t>(ib) * 4;
    const uint32_t rows = std::min(4u, m - i0);
    const T* ar[4];
    for (uint32_t r = 0; r < 4; ++r) ar[r] = a + static_cast<size_t>(i0 + (r < rows ? r : 0)) * k;
    for (uint32_t tt = 0; tt < tiles; ++tt) {
      double s[4], q[4];
      row_dots4(ar[0], ar[1], ar[2], ar[3], y.data() + static_cast<size_t>(tt) * k,
                yaf.data() + static_cast<size_t>(tt) * k, k, s, q);
      for (double& x : q) x *= float_sum_factor;
      const uint32_t jlo = tt * tile, jhi = std::min(n, jlo + tile);
      for (uint32_t r = 0; r < rows; ++r) {
        const uint32_t i = i0 + r;
        double d[1];
        if (cs == 1) {
          c_dots(c + static_cast<size_t>(i) * rs, w.data(), jlo, jhi, d);
        } else {  // the transposed check (location only): gather the strided row first
          strided.resize(n);
          for (uint32_t j = jlo; j < jhi; ++j)
            strided[j] = static_cast<double>(c[static_cast<size_t>(i) * rs + j * cs]);
          c_dots(strided.data(), w.data(), jlo, jhi, d);
        }
        const double cw = d[0];
        const double tau = gemm_tile_tau(acc, rel, slack, k, q[r], wsum[tt]);
        const double res = std::fabs(cw - s[r]);
        if (gemm_check_fails(res, tau)) flags[static_cast<size_t>(i) * tiles + tt] = 1;
        if (res == res && tau > 0) max_ratio = std::max(max_ratio, res / tau);
      }
    }
  }
  return max_ratio;
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

uint64_t expected_bits_of(GemmType t, double v) {
  if (t == GemmType::kFp64) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  }
  if (t == GemmType::kInt8) return static_cast<uint32_t>(static_cast<int32_t>(v));
  return bits_of_float(static_cast<float>(v));
}

}  // namespace

GemmVerdict verify_gemm(const GemmHostInputs& in, const void* c, const GemmAccumulation& acc, int threads) {
  const GemmSpec& s = in.spec;
  const GemmType t = s.type;
  const uint32_t m = s.m, n = s.n, k = s.k;
  const uint32_t tile_c = gemm_check_tile(n), tile_r = gemm_check_tile(m);
  const bool exact = is_exact(s.inputs);
  const unsigned out_bits = gemm_output_bytes(t) * 8;
  GemmVerdict verdict;
  verdict.report.checked = static_cast<uint64_t>(m) * n;
  std::vector<uint8_t> row_flags, col_flags;

  // Exact families: the observed outputs as unscaled integers.
  std::vector<int64_t> cint;
  std::vector<uint64_t> invalid;
  auto scale_of = [&](uint32_t i, uint32_t j) { return in.row_exp.empty() ? 0 : in.row_exp[i] + in.col_exp[j]; };
  if (exact) {
    cint.resize(static_cast<size_t>(m) * n);
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
    if (t == GemmType::kFp64) {
      convert(static_cast<const double*>(c));
    } else if (t == GemmType::kInt8) {
      convert(static_cast<const int32_t*>(c));
    } else {
      convert(static_cast<const float*>(c));
    }
    for (auto& b : bad) invalid.insert(invalid.end(), b.begin(), b.end());
    const int64_t* ci = cint.data();
    exact_check(
        m, n, k, in.a_int.data(), in.bt_int.data(),
        [ci, n](uint32_t i, uint32_t j) { return ci[static_cast<size_t>(i) * n + j]; }, tile_c,
        gemm_stream_key(s.seed, kGemmStreamRowCheck), threads, row_flags);
  } else if (t == GemmType::kFp64) {
    const double* a = reinterpret_cast<const double*>(in.a.data());
    const double* bt = reinterpret_cast<const double*>(in.bt.data());
    const double* cd = static_cast<const double*>(c);
    verdict.max_ratio = float_check(m, n, k, a, bt, cd, n, 1, tile_c, gemm_stream_key(s.seed, kGemmStreamRowCheck), acc,
                                    threads, row_flags);
  } else {
    const float* a = in.a_wide.empty() ? reinterpret_cast<const float*>(in.a.data()) : in.a_wide.data();
    const float* bt = in.bt_wide.empty() ? reinterpret_cast<const float*>(in.bt.data()) : in.bt_wide.data();
    if (t == GemmType::kInt8) {
      const int32_t* cd = static_cast<const int32_t*>(c);
      verdict.max_ratio = float_check(m, n, k, a, bt, cd, n, 1, tile_c, gemm_stream_key(s.seed, kGemmStreamRowCheck),
                                      acc, threads, row_flags);
    } else {
      const float* cd = static_cast<const float*>(c);
      verdict.max_ratio = float_check(m, n, k, a, bt, cd, n, 1, tile_c, gemm_stream_key(s.seed, kGemmStreamRowCheck),
                                      acc, threads, row_flags);
    }
  }
  uint64_t row_flag_count = 0;
  for (uint8_t f : row_flags) row_flag_count += f;
  verdict.flagged_checks = row_flag_count;
  if (row_flag_count == 0 && invalid.empty()) return verdict;

  // Locate: the same check on the transpose, per row tile of C; an element is a candidate where its
  // row fails in its column tile and its column fails in its row tile.
  if (exact) {
    const int64_t* ci = cint.data();
    exact_check(
        n, m, k, in.bt_int.data(), in.a_int.data(),
        [ci, n](uint32_t j, uint32_t i) { return ci[static_cast<size_t>(i) * n + j]; }, tile_r,
        gemm_stream_key(s.seed, kGemmStreamColCheck), threads, col_flags);
  } else if (t == GemmType::kFp64) {
    const double* a = reinterpret_cast<const double*>(in.a.data());
    const double* bt = reinterpret_cast<const double*>(in.bt.data());
    const double* cd = static_cast<const double*>(c);
    float_check(n, m, k, bt, a, cd, 1, n, tile_r, gemm_stream_key(s.seed, kGemmStreamColCheck), acc, threads,
                col_flags);
  } else {
    const float* a = in.a_wide.empty() ? reinterpret_cast<const float*>(in.a.data()) : in.a_wide.data();
    const float* bt = in.bt_wide.empty() ? reinterpret_cast<const float*>(in.bt.data()) : in.bt_wide.data();
    if (t == GemmType::kInt8) {
      float_check(n, m, k, bt, a, static_cast<const int32_t*>(c), 1, n, tile_r,
                  gemm_stream_key(s.seed, kGemmStreamColCheck), acc, threads, col_flags);
    } else {
      float_check(n, m, k, bt, a, static_cast<const float*>(c), 1, n, tile_r,
                  gemm_stream_key(s.seed, kGemmStreamColCheck), acc, threads, col_flags);
    }
  }
  for (uint8_t f : col_flags) verdict.flagged_checks += f;

  const std::vector<uint64_t> candidates = gemm_candidates(m, n, row_flags, col_flags, invalid);

  // Confirm each candidate by an O(k) recomputation (capped; the rest count as mismatches).
  const size_t confirm = std::min(candidates.size(), kGemmMaxConfirm);
  const double rel = gemm_relative_bound(acc, k);
  const double slack = gemm_element_slack(k);
  std::vector<MismatchReport> parts(static_cast<size_t>(std::max(1, threads)));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t q = 0; q < static_cast<int64_t>(confirm); ++q) {
    const uint64_t idx = candidates[static_cast<size_t>(q)];
    const uint32_t i = static_cast<uint32_t>(idx / n), j = static_cast<uint32_t>(idx % n);
    double expected = 0;
    bool wrong;
    if (exact) {
      int64_t e = 0;
      const int32_t* ar = in.a_int.data() + static_cast<size_t>(i) * k;
      const int32_t* br = in.bt_int.data() + static_cast<size_t>(j) * k;
      for (uint32_t p = 0; p < k; ++p) e += static_cast<int64_t>(ar[p]) * br[p];
      wrong = cint[idx] != e;
      expected = std::ldexp(static_cast<double>(e), scale_of(i, j));
    } else {
      double e = 0, ab = 0;
      if (t == GemmType::kFp64) {
        const double* ar = reinterpret_cast<const double*>(in.a.data()) + static_cast<size_t>(i) * k;
        const double* br = reinterpret_cast<const double*>(in.bt.data()) + static_cast<size_t>(j) * k;
        for (uint32_t p = 0; p < k; ++p) {
          e += ar[p] * br[p];
          ab += std::fabs(ar[p] * br[p]);
        }
      } else {
        const float* a = in.a_wide.empty() ? reinterpret_cast<const float*>(in.a.data()) : in.a_wide.data();
        const float* b = in.bt_wide.empty() ? reinterpret_cast<const float*>(in.bt.data()) : in.bt_wide.data();
        const float* ar = a + static_cast<size_t>(i) * k;
        const float* br = b + static_cast<size_t>(j) * k;
        for (uint32_t p = 0; p < k; ++p) {
          const double pr = static_cast<double>(ar[p]) * static_cast<double>(br[p]);
          e += pr;
          ab += std::fabs(pr);
        }
      }
      const double obs = gemm_output_value(t, c, idx);
      const double tau = gemm_element_tau(acc, rel, slack, k, ab, std::fabs(obs));
      wrong = gemm_check_fails(std::fabs(obs - e), tau) || !std::isfinite(obs);
      expected = e;
    }
    if (!wrong) continue;
    MismatchReport& r = parts[static_cast<size_t>(omp_get_thread_num()) % parts.size()];
    ++r.mismatches;
    MismatchRecord rec;
    rec.index = idx;
    rec.expected = expected_bits_of(t, expected);
    rec.observed = gemm_output_bits(t, c, idx);
    rec.width_bits = out_bits;
    rec.lane = static_cast<int>(j % 32);
    r.keep(rec);
  }
  for (const auto& p : parts) {
    verdict.report.mismatches += p.mismatches;
    for (const auto& rec : p.records) verdict.report.keep(rec);
  }
  verdict.report.mismatches += candidates.size() - confirm;
  if (verdict.report.mismatches == 0) {
    for (uint64_t idx : gemm_unconfirmed_checks(n, row_flags)) {
      ++verdict.report.mismatches;
      MismatchRecord rec;
      rec.index = idx;
      rec.observed = gemm_output_bits(t, c, rec.index);
      rec.width_bits = out_bits;
      verdict.report.keep(rec);
    }
  }
  return verdict;
}

std::vector<uint64_t> gemm_candidates(uint32_t m, uint32_t n, const std::vector<uint8_t>& row_flags,
                                      const std::vector<uint8_t>& col_flags, const std::vector<uint64_t>& invalid) {
  const uint32_t tile_c = gemm_check_tile(n), tile_r = gemm_check_tile(m);
  const uint32_t col_tiles = (n + tile_c - 1) / tile_c, row_tiles = (m + tile_r - 1) / tile_r;
  std::vector<uint64_t> candidates = invalid;
  for (uint32_t i = 0; i < m; ++i) {
    for (uint32_t tt = 0; tt < col_tiles; ++tt) {
      if (!row_flags[static_cast<size_t>(i) * col_tiles + tt]) continue;
      const uint32_t jhi = std::min(n, (tt + 1) * tile_c);
      for (uint32_t j = tt * tile_c; j < jhi; ++j) {
        if (col_flags[static_cast<size_t>(j) * row_tiles + i / tile_r])
          candidates.push_back(static_cast<uint64_t>(i) * n + j);
      }
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  return candidates;
}

std::vector<uint64_t> gemm_unconfirmed_checks(uint32_t n, const std::vector<uint8_t>& row_flags) {
  const uint32_t tile_c = gemm_check_tile(n), col_tiles = (n + tile_c - 1) / tile_c;
  std::vector<uint64_t> out;
  for (size_t f = 0; f < row_flags.size(); ++f) {
    if (row_flags[f]) out.push_back(static_cast<uint64_t>(f / col_tiles) * n + (f % col_tiles) * tile_c);
  }
  return out;
}

MismatchReport gemm_confirm_candidates(const GemmSpec& s, const GemmAccumulation& acc,
                                       const std::vector<uint64_t>& index, const std::vector<uint64_t>& observed,
                                       int threads) {
  const GemmType t = s.type;
  const uint32_t n = s.n, k = s.k;
  const bool exact = is_exact(s.inputs);
  const GemmGenerator ga = gemm_generator(t, s.inputs, k, s.seed, kGemmStreamA);
  const GemmGenerator gb = gemm_generator(t, s.inputs, k, s.seed, kGemmStreamB);
  const double bound = static_cast<double>(gemm_exact_output_bound(s.inputs, k, ga.mag));
  const double rel = gemm_relative_bound(acc, k);
  const double slack = gemm_element_slack(k);
  const unsigned out_bits = gemm_output_bytes(t) * 8;
  std::vector<MismatchReport> parts(static_cast<size_t>(std::max(1, threads)));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t q = 0; q < static_cast<int64_t>(index.size()); ++q) {
    const uint64_t idx = index[static_cast<size_t>(q)];
    const uint64_t bits = observed[static_cast<size_t>(q)];
    const uint32_t i = static_cast<uint32_t>(idx / n), j = static_cast<uint32_t>(idx % n);
    const uint64_t arow = static_cast<uint64_t>(i) * k, brow = static_cast<uint64_t>(j) * k;
    const double obs = gemm_output_value_of_bits(t, bits);
    double expected;
    bool wrong;
    if (exact) {
      int64_t e = 0;
      for (uint32_t p = 0; p < k; ++p)
        e += static_cast<int64_t>(gemm_generated_int(ga, arow + p)) * gemm_generated_int(gb, brow + p);
      const int scale = gemm_generated_exponent(ga, i) + gemm_generated_exponent(gb, j);
      wrong = gemm_unscale_output(obs, exp2_double(-scale), bound) != e;
      expected = std::ldexp(static_cast<double>(e), scale);
    } else {
      double e = 0, ab = 0;
      for (uint32_t p = 0; p < k; ++p) {
        const double pr = gemm_generated_double(ga, arow + p) * gemm_generated_double(gb, brow + p);
        e += pr;
        ab += std::fabs(pr);
      }
      const double tau = gemm_element_tau(acc, rel, slack, k, ab, std::fabs(obs));
      wrong = gemm_check_fails(std::fabs(obs - e), tau) || !std::isfinite(obs);
      expected = e;
    }
    if (!wrong) continue;
    MismatchReport& r = parts[static_cast<size_t>(omp_get_thread_num()) % parts.size()];
    ++r.mismatches;
    MismatchRecord rec;
    rec.index = idx;
    rec.expected = expected_bits_of(t, expected);
    rec.observed = bits;
    rec.width_bits = out_bits;
    rec.lane = static_cast<int>(j % 32);
    r.keep(rec);
  }
  MismatchReport report;
  for (const auto& p : parts) {
    report.mismatches += p.mismatches;
    for (const auto& rec : p.records) report.keep(rec);
  }
  return report;
}

void gemm_merge_repeat(GemmRun& run, const GemmVerdict& v, uint32_t rep, std::vector<uint64_t>& seen) {
  run.max_ratio = std::max(run.max_ratio, v.max_ratio);
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
}

// ---- The shared engine loop ------------------------------------------------------------------

GemmRun HostVerifiedGemmEngine::run(const GemmSpec& spec) {
  if (!supports(spec.type, spec.path)) {
    throw std::runtime_error(std::string("gemm: ") + gemm_type_name(spec.type) + " on this path is not supported here");
  }
  if (spec.n % 2 != 0) throw std::invalid_argument("gemm: n must be even (digests read 64-bit words)");
  GemmRun run;
  constexpr double kSmallGemmFlops = 1 << 25;
  active_threads_ = 2.0 * spec.m * spec.n * spec.k < kSmallGemmFlops ? 1 : threads();
  const int nt = active_threads_;
  auto t0 = std::chrono::steady_clock::now();
  generate_gemm_inputs_into(spec, nt, inputs_);
  const GemmHostInputs& in = inputs_;
  load(in);
  run.generate_s = seconds_since(t0);
  device_.beat();  // the host's work between the device's, O(n^2) each, beats too
  const uint64_t elements = static_cast<uint64_t>(spec.m) * spec.n;
  const unsigned width = gemm_output_bytes(spec.type) * 8;
  const uint64_t c_bytes = elements * gemm_output_bytes(spec.type);
  if (!c_ || c_->bytes() != c_bytes) {
    c_.reset();
    c_ = device_.allocate(c_bytes);
  }
  DeviceBuffer* const c = c_.get();
  const GemmAccumulation acc = accumulation(spec.type, spec.path);
  std::vector<uint8_t> first;  // repeat 0's output, for locating a repeat that differs
  std::vector<uint64_t> seen;  // indices already counted, so one wrong element counts once
  for (uint32_t rep = 0; rep < std::max(1u, spec.repeats); ++rep) {
    t0 = std::chrono::steady_clock::now();
    multiply(in, *c);
    run.gemm_s += seconds_since(t0);
    inject_(*c, elements, width, 1);
    t0 = std::chrono::steady_clock::now();
    const void* host_c = fetch(*c, c_bytes);
    GemmVerdict v = verify_gemm(in, host_c, acc, nt);
    // Digests only where repeats or devices are compared (gemm.repeat.*, gemm.exact.* for
    // consensus): a digest pass costs as much as the verification.
    if (spec.repeats > 1 || spec.digest) run.digests.push_back(gemm_digest(host_c, c_bytes, nt));
    if (spec.repeats > 1 && rep == 0)
      first.assign(static_cast<const uint8_t*>(host_c), static_cast<const uint8_t*>(host_c) + c_bytes);
    if (rep > 0 && spec.repeats > 1 && run.digests[rep] != run.digests[0] && v.report.mismatches == 0) {
      // Differs from repeat 0 while both pass their bounds: name the elements that differ.
      for (uint64_t e = 0; e < elements; ++e) {
        const uint64_t now = gemm_output_bits(spec.type, host_c, e),
                       then = gemm_output_bits(spec.type, first.data(), e);
        if (now == then) continue;
        ++v.report.mismatches;
        MismatchRecord rec;
        rec.index = e;
        rec.expected = then;
        rec.observed = now;
        rec.width_bits = width;
        rec.lane = static_cast<int>((e % spec.n) % 32);
        v.report.keep(rec);
      }
    }
    run.verify_s += seconds_since(t0);
    device_.beat();
    gemm_merge_repeat(run, v, rep, seen);
  }
  run.algorithm = algorithm(spec);
  run.library_version = library_version();
  return run;
}

}  // namespace sdc
