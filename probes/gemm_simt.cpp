// gemm.simt.fp32: a hand-written, shared-memory tiled FP32 GEMM on the FMA units (no tensor cores,
// no cuBLAS), on exact integer inputs checked bit for bit by int64 Freivalds; on the CPU its
// counterpart is a hand-written blocked FP32 GEMM (no BLAS). Failing here and in gemm.exact.* pins
// a fault to the SIMT path; failing only in the tensor-core families pins it to the tensor cores.
// Targets: FP32 FMA units, shared memory staging and register tiles of a plain GEMM.
// Cannot see: tensor cores; significand bits small integers leave at zero.
#include "probes/builtin.hpp"
#include "probes/gemm_probe.hpp"

namespace sdc {
namespace {

class GemmSimtProbe : public Probe {
 public:
  GemmSimtProbe() {
    cfg_.type = GemmType::kFp32;
    cfg_.inputs = GemmInputs::kExact;
    cfg_.path = GemmPath::kSimt;
  }
  std::string id() const override { return "gemm.simt.fp32"; }
  std::string targets() const override { return "FP32 FMA units and shared-memory tiles of a hand-written GEMM"; }
  std::string blind_spots() const override { return "tensor cores; significand bits small integers leave zero"; }
  bool included_at(Level, const DeviceIdentity& device) const override { return gemm_device_has(cfg_, device); }
  void run(ProbeContext& ctx, ProbeResult& result) const override { run_gemm_probe(cfg_, ctx, result); }

 private:
  GemmProbeConfig cfg_;
};

}  // namespace

std::unique_ptr<Probe> make_gemm_simt_probe() { return std::make_unique<GemmSimtProbe>(); }

}  // namespace sdc
