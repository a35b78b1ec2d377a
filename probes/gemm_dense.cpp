// gemm.dense.bf16: dense-bit exact inputs: odd BF16 integers in [129, 255] (all eight significand
// bits in play, the lowest always set) with random signs, k = min(n, 256), so every partial sum
// stays below 255^2 * 256 < 2^24 and the FP32 result is exact in any order; checked bit for bit
// (int64 Freivalds, zero tolerance) and located by row and column checks.
// Targets: every significand bit of the BF16 multiplier array and the low bits of the FP32
// accumulator, which small integers leave idle.
// Cannot see: exponent paths (magnitudes are fixed, see gemm.scaled.*), k > 256, other types.
#include "probes/builtin.hpp"
#include "probes/gemm_probe.hpp"

namespace sdc {
namespace {

class GemmDenseProbe : public Probe {
 public:
  GemmDenseProbe() {
    cfg_.type = GemmType::kBf16;
    cfg_.inputs = GemmInputs::kDense;
  }
  std::string id() const override { return "gemm.dense.bf16"; }
  std::string targets() const override { return "BF16 multiplier significand bits and FP32 accumulator low bits"; }
  std::string blind_spots() const override { return "exponent paths; depth k > 256; other data types"; }
  bool included_at(Level, const DeviceIdentity& device) const override { return gemm_device_has(cfg_, device); }
  void run(ProbeContext& ctx, ProbeResult& result) const override { run_gemm_probe(cfg_, ctx, result); }

 private:
  GemmProbeConfig cfg_;
};

}  // namespace

std::unique_ptr<Probe> make_gemm_dense_probe() { return std::make_unique<GemmDenseProbe>(); }

}  // namespace sdc
