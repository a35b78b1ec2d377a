#include "host/cpu_gemm.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <stdexcept>

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

void cpu_blocked_sgemm(uint32_t m, uint32_t n, uint32_t k, const float* a, const float* bt, float* c, int threads) {
  // Pack B (k x n row-major) so the inner loop runs along a row of C.
  std::vector<float> b(static_cast<size_t>(k) * n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t j = 0; j < static_cast<int64_t>(n); ++j) {
    for (uint32_t p = 0; p < k; ++p) b[static_cast<size_t>(p) * n + j] = bt[static_cast<size_t>(j) * k + p];
  }
  constexpr uint32_t kRows = 4, kCols = 256, kDepth = 256;
  const uint32_t row_blocks = (m + kRows - 1) / kRows, col_blocks = (n + kCols - 1) / kCols;
#pragma omp parallel for num_threads(threads) schedule(static) collapse(2)
  for (int64_t rb = 0; rb < static_cast<int64_t>(row_blocks); ++rb) {
    for (int64_t cb = 0; cb < static_cast<int64_t>(col_blocks); ++cb) {
      const uint32_t i0 = static_cast<uint32_t>(rb) * kRows, i1 = std::min(m, i0 + kRows);
      const uint32_t j0 = static_cast<uint32_t>(cb) * kCols, j1 = std::min(n, j0 + kCols);
      float acc[kRows][kCols] = {};
      for (uint32_t p0 = 0; p0 < k; p0 += kDepth) {
        const uint32_t p1 = std::min(k, p0 + kDepth);
        for (uint32_t i = i0; i < i1; ++i) {
          float* out = acc[i - i0];
          const float* ar = a + static_cast<size_t>(i) * k;
          for (uint32_t p = p0; p < p1; ++p) {
            const float av = ar[p];
            const float* br = b.data() + static_cast<size_t>(p) * n;
#pragma omp simd
            for (uint32_t j = j0; j < j1; ++j) out[j - j0] = out[j - j0] + av * br[j];
          }
        }
      }
      for (uint32_t i = i0; i < i1; ++i) std::copy(acc[i - i0], acc[i - i0] + (j1 - j0), c + static_cast<size_t>(i) * n + j0);
    }
  }
}

void CpuGemmEngine::multiply(const GemmHostInputs& in, DeviceBuffer& c) {
  const GemmSpec& s = in.spec;
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  if (s.path == GemmPath::kSimt) {
    cpu_blocked_sgemm(s.m, s.n, s.k, float_inputs(in.a, in.a_wide), float_inputs(in.bt, in.bt_wide),
                      static_cast<float*>(c.data()), active_threads());
    return;
  }
  openblas_set_num_threads(active_threads());
  switch (s.type) {
    case GemmType::kFp64:
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, reinterpret_cast<const double*>(in.a.data()), k,
                  reinterpret_cast<const double*>(in.bt.data()), k, 0.0, static_cast<double*>(c.data()), n);
      break;
    case GemmType::kInt8: {
      c64_.resize(static_cast<size_t>(m) * n);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, a64_.data(), k, bt64_.data(), k, 0.0,
                  c64_.data(), n);
      int32_t* out = static_cast<int32_t*>(c.data());
#pragma omp parallel for num_threads(active_threads()) schedule(static)
      for (int64_t e = 0; e < static_cast<int64_t>(c64_.size()); ++e) out[e] = static_cast<int32_t>(c64_[e]);
      break;
    }
    default:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, float_inputs(in.a, in.a_wide), k,
                  float_inputs(in.bt, in.bt_wide), k, 0.0f, static_cast<float*>(c.data()), n);
      break;
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
