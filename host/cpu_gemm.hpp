// The CPU backend's GEMM engine: OpenBLAS sgemm / dgemm for the library path (fp16, bf16, fp8 and
// tf32 inputs widened exactly to fp32 first, int8 to fp64, so FP32 accumulation keeps the exactness
// rules and int8 sums stay exact as with INT32 accumulation), and a hand-written blocked FP32 GEMM
// for the SIMT path.
#pragma once

#include <vector>

#include "host/gemm_engine_base.hpp"

namespace sdc {

class CpuGemmEngine : public HostVerifiedGemmEngine {
 public:
  CpuGemmEngine(Device& device, std::vector<int> cores, GemmInjectFn inject);

  bool supports(GemmType type, GemmPath path) const override;
  GemmAccumulation accumulation(GemmType type, GemmPath path) const override;

 protected:
  int threads() const override { return static_cast<int>(cores_.size()); }
  void load(const GemmHostInputs& in) override;
  void multiply(const GemmHostInputs& in, DeviceBuffer& c) override;
  const void* fetch(DeviceBuffer& c, size_t bytes) override;
  std::string algorithm(const GemmSpec& spec) const override;
  std::string library_version() const override;

 private:
  std::vector<int> cores_;
  std::vector<double> a64_, bt64_, c64_;  // int8 via dgemm
};

// The SIMT counterpart on the CPU: C = A B (A m x k, Bt n x k, C m x n, row-major) with FP32
// multiply and add in a fixed blocked order, no BLAS. Exposed for the benchmark.
void cpu_blocked_sgemm(uint32_t m, uint32_t n, uint32_t k, const float* a, const float* bt, float* c, int threads);

}  // namespace sdc
