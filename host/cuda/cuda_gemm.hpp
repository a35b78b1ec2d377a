// The CUDA backend's GEMM engine: cuBLASLt for every data type (tensor cores where the type has
// them; FP32 with CUBLAS_COMPUTE_32F_PEDANTIC), with the algorithm chosen once per (type, shape) from
// the heuristic, split-K excluded, and then reused (pinned), with this engine's own workspace; and
// the hand-written SIMT kernel (kernels/gemm_simt.cu) for gemm.simt.fp32. Inputs are generated on
// the host and uploaded; C is downloaded and verified on the host by verify_gemm.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "host/cuda/cuda_raii.hpp"
#include "host/gemm_engine_base.hpp"

namespace sdc {

class CudaGemmEngine : public HostVerifiedGemmEngine {
 public:
  // `device` allocates C (so its apply_corruption can reach it); `stream` is the device's stream,
  // on which every operation is enqueued (the injector's kernel runs on it too).
  CudaGemmEngine(Device& device, int ordinal, cudaStream_t stream, GemmInjectFn inject);

  bool supports(GemmType type, GemmPath path) const override;
  GemmAccumulation accumulation(GemmType type, GemmPath path) const override;

 protected:
  int threads() const override;
  void load(const GemmHostInputs& in) override;
  void multiply(const GemmHostInputs& in, DeviceBuffer& c) override;
  const void* fetch(DeviceBuffer& c, size_t bytes) override;
  std::string algorithm(const GemmSpec& spec) const override;
  std::string library_version() const override;

 private:
  struct Pinned {
    cublasLtMatmulAlgo_t algo;
    std::string description;
  };
  using Key = std::tuple<int, uint32_t, uint32_t, uint32_t>;
  const Pinned& pinned(const GemmSpec& spec);

  int ordinal_;
  cudaStream_t stream_;
  int cc_ = 0;  // compute capability, major * 10 + minor
  CublasLtHandle lt_;
  DeviceMemory workspace_;
  DeviceMemory a_, bt_;
  std::vector<uint8_t> host_c_;
  std::map<Key, Pinned> pinned_;
};

}  // namespace sdc
