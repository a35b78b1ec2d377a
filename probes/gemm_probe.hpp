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

// Whether the device can run this configuration. CUDA: e4m3 needs compute capability 8.9, tf32 and
// bf16 8.0; e5m2 is CPU-only (cuBLASLt pairs E5M2 only with E4M3).
bool gemm_device_has(const GemmProbeConfig& cfg, const DeviceIdentity& id);
// Square size for the level: CPU quick 256, standard / long 2048; GPU quick 2048, standard / long
// 8192. A --size override picks the largest power of two (>= 64) whose A, B and C fit in it.
uint32_t gemm_probe_n(const GemmProbeConfig& cfg, const ProbeContext& ctx);
void run_gemm_probe(const GemmProbeConfig& cfg, ProbeContext& ctx, ProbeResult& result);

}  // namespace sdc
