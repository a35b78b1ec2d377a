// alu.divsqrt: x' = sqrt(x + c) + d / x in FP32, then FP64, with every intermediate folded into a
// 64-bit hash; IEEE division and square root are correctly rounded, so the host's scalar result is
// the device's bit for bit. Elements 0..2C-1 are the FP32 chains, 2C..4C-1 the FP64 chains.
// Targets: division and square-root paths (GPU: the MUFU-seeded Newton sequences; CPU: div/sqrt units).
// Cannot see: the hardware approximations (__fdividef, rsqrtf: see the SFU probe); denormals.
#include "probes/builtin.hpp"
#include "probes/chain_probe.hpp"

namespace sdc {
namespace {

class DivSqrtProbe : public Probe {
 public:
  std::string id() const override { return "alu.divsqrt"; }
  std::string targets() const override { return "IEEE-rounded FP32 and FP64 division and square root"; }
  std::string blind_spots() const override { return "hardware approximations (fast div, rsqrt); denormals"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }
  void run(ProbeContext& ctx, ProbeResult& result) const override {
    run_chain_probe(ctx, result, ChainKind::kDivSqrt32);
    run_chain_probe(ctx, result, ChainKind::kDivSqrt64);
  }
};

}  // namespace

std::unique_ptr<Probe> make_alu_divsqrt_probe() { return std::make_unique<DivSqrtProbe>(); }

}  // namespace sdc
