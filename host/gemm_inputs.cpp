// The gemm.* probes' seeded inputs: every element from the SDC_HD generators, in loops unrolled per
// type so that they vectorise.
#include "host/gemm_inputs.hpp"

#include <omp.h>

#include <algorithm>
#include <stdexcept>

#include "host/gemm_isa.hpp"

namespace sdc {

namespace {

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
  if (gemm_have_avx2()) return fill_random_avx2<kType>(key, lo, hi, raw, wide);
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
  const bool exact = gemm_inputs_exact(spec.inputs);
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

}  // namespace sdc
