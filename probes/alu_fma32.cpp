// alu.fma32: 1,024 seeded FP32 rotation chains (two dependent FMAs per step), copied across every
// SM and lane, or core and SIMD lane; each copy must match the host's scalar IEEE golden bit for bit.
// Targets: FP32 FMA datapaths: multiplier, adder, normalisation and round-to-nearest, per lane.
// Cannot see: tensor cores, other FP formats, denormal handling (values stay normal), and FMA
// faults that occur only for operands outside [-2.9, 2.9].
#include "probes/builtin.hpp"
#include "probes/chain_probe.hpp"

namespace sdc {
namespace {

class Fma32Probe : public Probe {
 public:
  std::string id() const override { return "alu.fma32"; }
  std::string targets() const override { return "FP32 FMA datapaths per lane (mantissa, exponent, rounding)"; }
  std::string blind_spots() const override { return "tensor cores; denormals; operands outside the chains' range"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }
  void run(ProbeContext& ctx, ProbeResult& result) const override { run_chain_probe(ctx, result, ChainKind::kFma32); }
};

}  // namespace

std::unique_ptr<Probe> make_alu_fma32_probe() { return std::make_unique<Fma32Probe>(); }

}  // namespace sdc
