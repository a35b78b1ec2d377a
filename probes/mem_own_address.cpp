// mem.own_address: every word holds its own byte offset, then the inverse.
// Targets: address decoder and aliasing faults (two addresses reaching one cell), stuck bits.
// Cannot see: faults that need a particular neighbour pattern (coupling), or that appear only
// under a different access order; data-dependent faults in bits that offsets leave constant.
#include "probes/builtin.hpp"
#include "probes/memory_test.hpp"

namespace sdc {
namespace {

class OwnAddressProbe : public Probe {
 public:
  std::string id() const override { return "mem.own_address"; }
  std::string targets() const override { return "address decoder faults and aliasing, stuck bits"; }
  std::string blind_spots() const override { return "coupling faults between neighbours; order-dependent faults"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }

  void run(ProbeContext& ctx, ProbeResult& result) const override {
    const uint32_t passes = memory_passes(ctx, 1, 2, 4);
    MemoryTest mem(ctx, result, 4.0 * passes);  // write_and_check of 2 patterns a pass
    Pattern p;
    p.kind = PatternKind::kOwnAddress;
    p.param = ctx.seed & ~7ULL;  // keeps the low three bits, which every offset leaves zero, exercised by the inverse
    std::vector<Pattern> sequence;
    for (uint32_t pass = 0; pass < passes; ++pass) {
      sequence.push_back(p);
      sequence.push_back(inverse(p));
      p.param = mix64(p.param + pass + 1) & ~7ULL;
    }
    mem.write_and_check(sequence);
    result.params["passes"] = passes;
  }
};

}  // namespace

std::unique_ptr<Probe> make_mem_own_address_probe() { return std::make_unique<OwnAddressProbe>(); }

}  // namespace sdc
