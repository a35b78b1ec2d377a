// gemm.scaled.<dtype>: exact integer inputs with row i of A scaled by 2^er_i and column j of B by
// 2^ec_j (ranges per type that keep inputs and outputs normal and finite), so C_ij =
// 2^(er_i + ec_j) Cint_ij exactly; the output is unscaled and checked bit for bit by int64
// Freivalds, a wrong exponent showing as a wrong or non-integer value.
// Targets: exponent adders, alignment shifters and normalisation across the type's exponent range.
// Cannot see: significand bits the small integers leave at zero; subnormals (never produced).
#include "probes/builtin.hpp"
#include "probes/gemm_probe.hpp"

namespace sdc {
namespace {

class GemmScaledProbe : public Probe {
 public:
  explicit GemmScaledProbe(GemmType t) {
    cfg_.type = t;
    cfg_.inputs = GemmInputs::kScaled;
  }
  std::string id() const override { return std::string("gemm.scaled.") + gemm_type_name(cfg_.type); }
  std::string targets() const override { return "GEMM exponent paths: power-of-two row and column scaling"; }
  std::string blind_spots() const override { return "significand bits small integers leave zero; subnormals"; }
  bool included_at(Level, const DeviceIdentity& device) const override { return gemm_device_has(cfg_, device); }
  void run(ProbeContext& ctx, ProbeResult& result) const override { run_gemm_probe(cfg_, ctx, result); }

 private:
  GemmProbeConfig cfg_;
};

}  // namespace

std::vector<std::unique_ptr<Probe>> make_gemm_scaled_probes() {
  std::vector<std::unique_ptr<Probe>> v;
  for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                     GemmType::kE4m3, GemmType::kE5m2}) {
    v.push_back(std::make_unique<GemmScaledProbe>(t));
  }
  return v;
}

}  // namespace sdc
