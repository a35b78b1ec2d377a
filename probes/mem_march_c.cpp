// mem.march_c: March C- (10N): up(w0); up(r0,w1); up(r1,w0); down(r0,w1); down(r1,w0); up(r0).
// "0" is a background word and "1" its inverse: solid zero first, then seeded random backgrounds.
// Targets: stuck-at, transition, and unlinked coupling faults (inversion, idempotent, state), and
// address decoder faults, which March C- detects completely in a sequential traversal.
// Cannot see: linked coupling faults; ordering across thread ranges (each range is ordered).
#include "probes/builtin.hpp"
#include "probes/memory_test.hpp"

namespace sdc {
namespace {

class MarchCProbe : public Probe {
 public:
  std::string id() const override { return "mem.march_c"; }
  std::string targets() const override {
    return "stuck-at, transition, unlinked coupling and address decoder faults (March C-, 10N)";
  }
  std::string blind_spots() const override { return "linked coupling faults; ordering across thread ranges"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }

  void run(ProbeContext& ctx, ProbeResult& result) const override {
    const uint32_t passes = memory_passes(ctx, 1, 2, 4);
    MemoryTest mem(ctx, result, 10.0 * passes);
    for (uint32_t pass = 0; pass < passes; ++pass) {
      const Pattern zero = pass == 0 ? Pattern{PatternKind::kSolid, 0, 0, false}
                                     : Pattern{PatternKind::kRandom, 0, ctx.seed + pass, false};
      const Pattern one = inverse(zero);
      mem.fill(zero);
      mem.check(zero, &one, Direction::kUp);
      mem.check(one, &zero, Direction::kUp);
      mem.check(zero, &one, Direction::kDown);
      mem.check(one, &zero, Direction::kDown);
      mem.check(zero);
    }
    result.params["passes"] = passes;
  }
};

}  // namespace

std::unique_ptr<Probe> make_mem_march_c_probe() { return std::make_unique<MarchCProbe>(); }

}  // namespace sdc
