// mem.walking_bits: walking ones and walking zeros; word i holds bit (i + pass offset) mod 64.
// Targets: stuck-at bits and bit-line faults in each of the 64 bit positions.
// Cannot see: faults needing dense neighbour patterns; most address faults (few distinct values).
#include "probes/builtin.hpp"
#include "probes/memory_test.hpp"

namespace sdc {
namespace {

class WalkingBitsProbe : public Probe {
 public:
  std::string id() const override { return "mem.walking_bits"; }
  std::string targets() const override { return "stuck-at and bit-line faults in every bit position"; }
  std::string blind_spots() const override { return "coupling faults needing dense patterns; most address faults"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }

  void run(ProbeContext& ctx, ProbeResult& result) const override {
    // Each pass moves the walking bit so that, over 64 passes, every word sees every position.
    const uint32_t passes = memory_passes(ctx, 2, 8, 64);
    MemoryTest mem(ctx, result, 4.0 * passes);  // write_and_check of 2 patterns a pass
    std::vector<Pattern> sequence;
    for (uint32_t pass = 0; pass < passes; ++pass) {
      for (PatternKind kind : {PatternKind::kWalkingOnes, PatternKind::kWalkingZeros}) {
        Pattern p;
        p.kind = kind;
        p.param = (pass * 64u / passes + ctx.seed) & 63u;
        sequence.push_back(p);
      }
    }
    mem.write_and_check(sequence);
    result.params["passes"] = passes;
  }
};

}  // namespace

std::unique_ptr<Probe> make_mem_walking_bits_probe() { return std::make_unique<WalkingBitsProbe>(); }

}  // namespace sdc
