// gemm.repeat.<dtype>: the same random full-significand inputs multiplied several times with the
// algorithm pinned (cuBLASLt: chosen once from the heuristic and reused, no split-K, a workspace
// per handle; CPU: OpenBLAS with a fixed thread count). Every repeat is verified by FP64
// Freivalds/ABFT against the bound tau, and the 128-bit digests of all repeats must be equal; the
// digests, the algorithm and the library version go into the result, forming the equivalence
// class for cross-device comparison.
// Targets: intermittent faults (a repeat that differs), including ones below tau that only the
// bitwise digest comparison sees.
// Cannot see: a permanent fault below tau that gives the same wrong answer every time (left to
// cross-device digest consensus within the equivalence class).
#include "probes/builtin.hpp"
#include "probes/gemm_probe.hpp"

namespace sdc {
namespace {

class GemmRepeatProbe : public Probe {
 public:
  explicit GemmRepeatProbe(GemmType t) {
    cfg_.type = t;
    cfg_.inputs = GemmInputs::kRandom;
    cfg_.repeat = true;
  }
  std::string id() const override { return std::string("gemm.repeat.") + gemm_type_name(cfg_.type); }
  std::string targets() const override {
    return "intermittent GEMM faults: repeats with a pinned algorithm must agree bitwise";
  }
  std::string blind_spots() const override { return "permanent faults below tau (needs cross-device digests)"; }
  // A change below tau passes by design (counted "below tolerance" by coverage runs).
  bool has_stated_bound() const override { return true; }
  bool included_at(Level, const DeviceIdentity& device) const override { return gemm_device_has(cfg_, device); }
  void run(ProbeContext& ctx, ProbeResult& result) const override { run_gemm_probe(cfg_, ctx, result); }

 private:
  GemmProbeConfig cfg_;
};

}  // namespace

std::vector<std::unique_ptr<Probe>> make_gemm_repeat_probes() {
  std::vector<std::unique_ptr<Probe>> v;
  for (GemmType t :
       {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16, GemmType::kE4m3}) {
    v.push_back(std::make_unique<GemmRepeatProbe>(t));
  }
  return v;
}

}  // namespace sdc
