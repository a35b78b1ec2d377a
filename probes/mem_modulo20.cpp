// mem.modulo20: for each offset 0..19, a random word p at index % 20 == offset and ~p elsewhere,
// then the inverse. Writing the neighbours with the opposite data after each p stresses the p
// cells through their neighbours.
// Targets: data-dependent and neighbourhood faults that cache and prefetch effects hide from
// sequential patterns.
// Cannot see: faults with a period other than the 20-word stride.
#include "probes/builtin.hpp"
#include "probes/memory_test.hpp"

namespace sdc {
namespace {

class Modulo20Probe : public Probe {
 public:
  std::string id() const override { return "mem.modulo20"; }
  std::string targets() const override { return "data-dependent neighbourhood faults hidden from sequential patterns"; }
  std::string blind_spots() const override { return "faults with a period other than 20 words"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }

  void run(ProbeContext& ctx, ProbeResult& result) const override {
    const uint32_t rounds = memory_passes(ctx, 1, 1, 4);
    MemoryTest mem(ctx, result, 80.0 * rounds);  // write_and_check of 40 patterns a round
    std::vector<Pattern> sequence;
    for (uint32_t round = 0; round < rounds; ++round) {
      for (uint64_t offset = 0; offset < 20; ++offset) {
        const Pattern p{PatternKind::kModulo20, offset, ctx.seed + round, false};
        sequence.push_back(p);
        sequence.push_back(inverse(p));
      }
    }
    mem.write_and_check(sequence);
    result.params["rounds"] = rounds;
  }
};

}  // namespace

std::unique_ptr<Probe> make_mem_modulo20_probe() { return std::make_unique<Modulo20Probe>(); }

}  // namespace sdc
