#include "host/cpu_gemm.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <stdexcept>

#include "host/cpu_parallel.hpp"
#include "host/gemm_isa.hpp"

namespace sdc {

CpuGemmEngine::CpuGemmEngine(Device& device, std::vector<int> cores, GemmInjectFn inject)
    : HostVerifiedGemmEngine(device, std::move(inject)), cores_(std::move(cores)) {
  if (cores_.empty()) cores_.push_back(0);
}

bool CpuGemmEngine::supports(GemmType type, GemmPath path) const {
  return path == GemmPath::kLibrary || type == GemmType::kFp32;
}

GemmAccumulation CpuGemmEngine::accumulation(GemmType type, GemmPath) const {
  GemmAccumulation a;
  if (type == GemmType::kFp64 || type == GemmType::kInt8) {
    a.u_acc = 0x1p-53;
    a.u_out = type == GemmType::kFp64 ? 0x1p-53 : 0.0;
    a.underflow = 0x1p-1074;
  }
  return a;  // FP32 accumulation and output: 2^-24
}

void CpuGemmEngine::load(const GemmHostInputs& in) {
  if (in.spec.type != GemmType::kInt8) return;
  a64_.assign(in.a_wide.begin(), in.a_wide.end());
  bt64_.assign(in.bt_wide.begin(), in.bt_wide.end());
}

namespace {

const float* float_inputs(const std::vector<uint8_t>& raw, const std::vector<float>& wide) {
  return wide.empty() ? reinterpret_cast<const float*>(raw.data()) : wide.data();
}

}  // namespace

namespace {

constexpr uint32_t kPanelRows = 4;   // rows of C per register tile
constexpr uint32_t kPanelCols = 32;  // columns of C per register tile (one panel of B)

// C[i0..i0+4) x [j0..j0+32) = A rows times the packed panel bp (k x 32): the accumulators stay in
// registers across k; FP32 multiply, then add, in order of p.
__attribute__((always_inline)) inline void panel_body(uint32_t n, uint32_t k, const float* a, const float* bp, float* c,
                                                      uint32_t i0, uint32_t j0) {
  float acc[kPanelRows][kPanelCols] = {};
  const float* a0 = a + static_cast<size_t>(i0) * k;
  for (uint32_t p = 0; p < k; ++p) {
    const float* br = bp + static_cast<size_t>(p) * kPanelCols;
    for (uint32_t r = 0; r < kPanelRows; ++r) {
      const float av = a0[static_cast<size_t>(r) * k + p];
#pragma omp simd
      for (uint32_t j = 0; j < kPanelCols; ++j) acc[r][j] = acc[r][j] + av * br[j];
    }
  }
  for (uint32_t r = 0; r < kPanelRows; ++r) {
    std::copy(acc[r], acc[r] + kPanelCols, c + static_cast<size_t>(i0 + r) * n + j0);
  }
}

#if defined(__x86_64__)
SDC_GEMM_AVX512 void panel_avx512(uint32_t n, uint32_t k, const float* a, const float* bp, float* c, uint32_t i0,
                                  uint32_t j0) {
  panel_body(n, k, a, bp, c, i0, j0);
}
__attribute__((target("avx2"))) void panel_avx2(uint32_t n, uint32_t k, const float* a, const float* bp, float* c,
                                                uint32_t i0, uint32_t j0) {
  panel_body(n, k, a, bp, c, i0, j0);
}
#endif

void panel(uint32_t n, uint32_t k, const float* a, const float* bp, float* c, uint32_t i0, uint32_t j0) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
  if (avx512) return panel_avx512(n, k, a, bp, c, i0, j0);
  if (avx2) return panel_avx2(n, k, a, bp, c, i0, j0);
#endif
  panel_body(n, k, a, bp, c, i0, j0);
}

}  // namespace

void cpu_blocked_sgemm(uint32_t m, uint32_t n, uint32_t k, const float* a, const float* bt, float* c, int threads) {
  if (m % kPanelRows != 0 || n % kPanelCols != 0) {
    throw std::invalid_argument("cpu_blocked_sgemm: m must be a multiple of 4 and n of 32");
  }
  // One panel of B (k x 32, row-major) per 32 columns of C, packed by the thread that uses it.
  const uint32_t panels = n / kPanelCols;
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> bp(static_cast<size_t>(k) * kPanelCols);
#pragma omp for schedule(static)
    for (int64_t pj = 0; pj < static_cast<int64_t>(panels); ++pj) {
      const uint32_t j0 = static_cast<uint32_t>(pj) * kPanelCols;
      for (uint32_t j = 0; j < kPanelCols; ++j) {
        const float* row = bt + static_cast<size_t>(j0 + j) * k;
        for (uint32_t p = 0; p < k; ++p) bp[static_cast<size_t>(p) * kPanelCols + j] = row[p];
      }
      for (uint32_t i0 = 0; i0 < m; i0 += kPanelRows) panel(n, k, a, bp.data(), c, i0, j0);
    }
  }
}

void CpuGemmEngine::multiply(const GemmHostInputs& in, DeviceBuffer& c) {
  const GemmSpec& s = in.spec;
  const int n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  // Rows of C per round, with a heartbeat after each: about 2^32 flops per core (a tenth of a
  // second; seconds on a shared core). Each call packs all of B again: rounds of 2^28 flops (32 rows
  // at n = 2048) made the GEMM 2.2x as slow as one threaded OpenBLAS call, 2^30 1.13x, 2^32 0.97x
  // (bench/gemm_cpu_bench, BM_GemmCheckAtSpeed).
  const size_t round_rows = std::max<size_t>(16, static_cast<size_t>(0x1p32 / (2.0 * s.n * s.k)) / 16 * 16);
  const auto beat = [this] { device_.beat(); };
  if (s.path == GemmPath::kSimt) {
    // Each call packs B's panels again: at least 128 rows a call keep that a small share.
    const size_t simt_rows = std::max<size_t>(round_rows, 128);
    const float* a = float_inputs(in.a, in.a_wide);
    for (size_t lo = 0; lo < s.m; lo += simt_rows) {
      const size_t rows = std::min<size_t>(simt_rows, s.m - lo);
      cpu_blocked_sgemm(static_cast<uint32_t>(rows), s.n, s.k, a + lo * s.k, float_inputs(in.bt, in.bt_wide),
                        static_cast<float*>(c.data()) + lo * s.n, active_threads());
      beat();
    }
    return;
  }
  // OpenBLAS runs single-threaded on each core, on that core's block of rows of C: no OpenBLAS
  // thread pool (whose workers keep spinning after each call and would compete with the OpenMP
  // team that generates and verifies), and each row of C comes from one known core.
  openblas_set_num_threads(1);
  const std::vector<int> one_core(cores_.begin(), cores_.begin() + 1);
  const std::vector<int>& team = active_threads() == 1 ? one_core : cores_;
  switch (s.type) {
    case GemmType::kFp64: {
      const double* a = reinterpret_cast<const double*>(in.a.data());
      const double* bt = reinterpret_cast<const double*>(in.bt.data());
      double* out = static_cast<double*>(c.data());
      for_each_core_in_rounds(team, s.m, 16, round_rows, false, beat, [&](size_t, size_t lo, size_t hi, int) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(hi - lo), n, k, 1.0, a + lo * k, k, bt, k,
                    0.0, out + lo * n, n);
      });
      break;
    }
    case GemmType::kInt8: {
      c64_.resize(static_cast<size_t>(s.m) * n);
      int32_t* out = static_cast<int32_t*>(c.data());
      for_each_core_in_rounds(team, s.m, 16, round_rows, false, beat, [&](size_t, size_t lo, size_t hi, int) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(hi - lo), n, k, 1.0, a64_.data() + lo * k,
                    k, bt64_.data(), k, 0.0, c64_.data() + lo * n, n);
        for (size_t e = lo * n; e < hi * n; ++e) out[e] = static_cast<int32_t>(c64_[e]);
      });
      break;
    }
    default: {
      const float* a = float_inputs(in.a, in.a_wide);
      const float* bt = float_inputs(in.bt, in.bt_wide);
      float* out = static_cast<float*>(c.data());
      for_each_core_in_rounds(team, s.m, 16, round_rows, false, beat, [&](size_t, size_t lo, size_t hi, int) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(hi - lo), n, k, 1.0f, a + lo * k, k, bt,
                    k, 0.0f, out + lo * n, n);
      });
      break;
    }
  }
}

const void* CpuGemmEngine::fetch(DeviceBuffer& c, size_t bytes) {
  if (bytes > c.bytes()) throw std::out_of_range("gemm: fetch beyond the output");
  return c.data();
}

std::string CpuGemmEngine::algorithm(const GemmSpec& spec) const {
  if (spec.path == GemmPath::kSimt) return "cpu-blocked-fp32";
  switch (spec.type) {
    case GemmType::kFp64: return "openblas-dgemm";
    case GemmType::kInt8: return "openblas-dgemm-int8-widened";
    case GemmType::kFp32: return "openblas-sgemm";
    default: return std::string("openblas-sgemm-") + gemm_type_name(spec.type) + "-widened";
  }
}

std::string CpuGemmEngine::library_version() const {
  const char* cfg = openblas_get_config();
  return cfg == nullptr ? "openblas" : cfg;
}

}  // namespace sdc
