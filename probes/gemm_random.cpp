// gemm.random.<dtype>: random full-significand inputs (random sign, exponent in [-3, 0], every
// stored significand bit random), verified per column tile by FP64 Freivalds/ABFT: element i of
// r = C w - A (B w) fails only where |r_i| > tau_i = gamma_k(u_acc) (|A|(|B||w|))_i +
// u_out (|C||w|)_i (plus the FP64 check's own rounding and an underflow allowance), a deterministic
// bound, so no false positive by construction. u_acc per type and path: 2^-24 for FP32
// accumulation, 2^-23 on tensor cores (truncation), fp8 on tensor cores chunked (see the engine).
// The largest normalised residual |r| / tau is recorded as the bound's headroom.
// Targets: multiplier, adder, alignment and normalisation faults that change a result by more
// than the accumulated rounding allows, including the high significand and exponent bits.
// Cannot see: errors below tau (low significand bits: counted "below tolerance" by coverage runs).
#include "probes/builtin.hpp"
#include "probes/gemm_probe.hpp"

namespace sdc {
namespace {

class GemmRandomProbe : public Probe {
 public:
  explicit GemmRandomProbe(GemmType t) {
    cfg_.type = t;
    cfg_.inputs = GemmInputs::kRandom;
  }
  std::string id() const override { return std::string("gemm.random.") + gemm_type_name(cfg_.type); }
  std::string targets() const override { return "GEMM mantissa / exponent datapaths on full-significand inputs"; }
  std::string blind_spots() const override { return "errors below the rounding bound tau (low significand bits)"; }
  // A change below tau passes by design (counted "below tolerance" by coverage runs).
  bool has_stated_bound() const override { return true; }
  bool included_at(Level, const DeviceIdentity& device) const override { return gemm_device_has(cfg_, device); }
  void run(ProbeContext& ctx, ProbeResult& result) const override { run_gemm_probe(cfg_, ctx, result); }

 private:
  GemmProbeConfig cfg_;
};

}  // namespace

std::vector<std::unique_ptr<Probe>> make_gemm_random_probes() {
  std::vector<std::unique_ptr<Probe>> v;
  for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                     GemmType::kE4m3, GemmType::kE5m2}) {
    v.push_back(std::make_unique<GemmRandomProbe>(t));
  }
  return v;
}

}  // namespace sdc
