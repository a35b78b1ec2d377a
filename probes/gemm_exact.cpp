// gemm.exact.<dtype>: seeded integers bounded per data type (k * max|a| * max|b| <= 2^24 for FP32
// accumulation, 2^13 for fp8, INT32 for int8) so the product is exact in any summation order (fp8
// at k = 512, where its integers reach +-4: gemm_probe_k); C is
// checked bit for bit by Freivalds in int64 (modulo 2^64, two odd random vectors per column tile,
// zero tolerance), and the failing row and column checks locate the wrong elements.
// Targets: GEMM datapaths (tensor cores or FMA units, operand staging, accumulators, epilogue stores)
// producing any wrong bit in the output.
// Cannot see: faults in significand bits the small integers leave at zero (see gemm.dense.bf16,
// gemm.random.*), exponent paths beyond small magnitudes (see gemm.scaled.*), and rounding logic.
#include "probes/builtin.hpp"
#include "probes/gemm_probe.hpp"

namespace sdc {
namespace {

class GemmExactProbe : public Probe {
 public:
  explicit GemmExactProbe(GemmType t) {
    cfg_.type = t;
    cfg_.inputs = GemmInputs::kExact;
  }
  std::string id() const override { return std::string("gemm.exact.") + gemm_type_name(cfg_.type); }
  std::string targets() const override { return "GEMM units and accumulators: any wrong output bit, exact golden"; }
  std::string blind_spots() const override {
    return "significand bits small integers leave zero; large exponents; rounding (see dense, scaled, random)";
  }
  bool included_at(Level, const DeviceIdentity& device) const override { return gemm_device_has(cfg_, device); }
  void run(ProbeContext& ctx, ProbeResult& result) const override { run_gemm_probe(cfg_, ctx, result); }

 private:
  GemmProbeConfig cfg_;
};

}  // namespace

std::vector<std::unique_ptr<Probe>> make_gemm_exact_probes() {
  std::vector<std::unique_ptr<Probe>> v;
  for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                     GemmType::kE4m3, GemmType::kE5m2, GemmType::kInt8}) {
    v.push_back(std::make_unique<GemmExactProbe>(t));
  }
  return v;
}

}  // namespace sdc
