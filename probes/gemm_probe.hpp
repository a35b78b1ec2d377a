// Shared run logic of the gemm.* families: sizes per level and backend, the engine call, and the
// result's parameters (GFLOP/s, verification time as a fraction of GEMM time, the largest
// normalised residual, the algorithm and library version that form the equivalence class).
#pragma once

#include <string>

#include "host/gemm.hpp"
#include "probes/probe.hpp"

namespace sdc {

struct GemmProbeConfig {
  GemmType type = GemmType::kFp32;
  GemmInputs inputs = GemmInputs::kRandom;
  GemmPath path = GemmPath::kLibrary;
  bool repeat = false;  // gemm.repeat: several runs, digests compared
};

// Whether the device can run this configuration. CUDA: fp8 needs compute capability 8.9 (e5m2 runs
// as E5M2 x E4M3: gemm_cuda_operands), tf32 and bf16 8.0.
bool gemm_device_has(const GemmProbeConfig& cfg, const DeviceIdentity& id);
// Square size: ctx.gemm_n where given; else the largest power of two (>= 64) whose A, B and C (and
// random fp8's reference) fit in ctx.compute_bytes where given; else the level's: CPU quick 256, standard / long 2048;
// GPU 8192 at every level.
uint32_t gemm_probe_n(const GemmProbeConfig& cfg, const ProbeContext& ctx);
// Exact fp8 keeps its partial sums below 2^13 (gemm_exact_sum_limit): at k = 8192 its integers
// would be {-1, 0, 1}, exercising no multiplier significand bit; at k = 512 they reach +-4.
inline constexpr uint32_t kGemmFp8ExactK = 512;
// Depth for an n x n output: n, but dense bf16 at most kGemmDenseMaxK and exact or scaled fp8 at
// most kGemmFp8ExactK.
uint32_t gemm_probe_k(const GemmProbeConfig& cfg, uint32_t n);
// The engine's spec for `cfg` on ctx's device: its size, seed, accumulation model and repeats.
GemmSpec gemm_probe_spec(const GemmProbeConfig& cfg, const ProbeContext& ctx);
// The report params every GEMM probe shares: type, inputs, path, shape and how a record names its element.
nlohmann::json gemm_shape_params(const GemmSpec& spec);
void run_gemm_probe(const GemmProbeConfig& cfg, ProbeContext& ctx, ProbeResult& result);

}  // namespace sdc
