// alu.fma64: as alu.fma32 in FP64: 1,024 seeded rotation chains copied across every SM and lane,
// or core and SIMD lane, each matching the host's scalar IEEE golden bit for bit.
// Targets: FP64 FMA datapaths per lane.
// Cannot see: tensor cores, other FP formats, denormals, operands outside the chains' range.
#include "probes/builtin.hpp"
#include "probes/chain_probe.hpp"

namespace sdc {
namespace {

class Fma64Probe : public Probe {
 public:
  std::string id() const override { return "alu.fma64"; }
  std::string targets() const override { return "FP64 FMA datapaths per lane (mantissa, exponent, rounding)"; }
  std::string blind_spots() const override { return "tensor cores; denormals; operands outside the chains' range"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }
  void run(ProbeContext& ctx, ProbeResult& result) const override { run_chain_probe(ctx, result, ChainKind::kFma64); }
};

}  // namespace

std::unique_ptr<Probe> make_alu_fma64_probe() { return std::make_unique<Fma64Probe>(); }

}  // namespace sdc
