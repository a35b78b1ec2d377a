// alu.int64: seeded 64-bit integer chains (multiply-add, xorshift, mul-hi, popcount, bit-field
// extract); the step is a bijection, so no fault is washed out before the output.
// Targets: integer multipliers (low and high halves), shifters, popcount and bit-field units.
// Cannot see: floating-point units; integer division; 32-bit-only integer paths.
#include "probes/builtin.hpp"
#include "probes/chain_probe.hpp"

namespace sdc {
namespace {

class Int64Probe : public Probe {
 public:
  std::string id() const override { return "alu.int64"; }
  std::string targets() const override { return "64-bit multiply (lo/hi), shift, popcount and bit-field units"; }
  std::string blind_spots() const override { return "floating point; integer division; 32-bit-only paths"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }
  void run(ProbeContext& ctx, ProbeResult& result) const override { run_chain_probe(ctx, result, ChainKind::kInt64); }
};

}  // namespace

std::unique_ptr<Probe> make_alu_int64_probe() { return std::make_unique<Int64Probe>(); }

}  // namespace sdc
