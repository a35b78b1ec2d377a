// mem.moving_inversions: fill the first background; for each background p: ascending read p /
// write ~p; descending read ~p / write p; read p, writing the next background in the same pass.
// Backgrounds: solid, checkerboard, walking-8 and random.
// Targets: coupling faults between cells, transition faults (0->1, 1->0), pattern sensitivity.
// Cannot see: faults needing a write order other than strictly ascending / descending per core or
// thread (parallel traversal only orders each core's or thread's own range).
#include "probes/builtin.hpp"
#include "probes/memory_test.hpp"

namespace sdc {
namespace {

class MovingInversionsProbe : public Probe {
 public:
  std::string id() const override { return "mem.moving_inversions"; }
  std::string targets() const override {
    return "coupling and transition faults under solid, checkerboard, walking-8 and random data";
  }
  std::string blind_spots() const override {
    return "order-dependent faults across thread ranges (each range is ordered, not the whole buffer)";
  }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }

  void run(ProbeContext& ctx, ProbeResult& result) const override {
    const uint32_t walking = memory_passes(ctx, 1, 8, 8);
    // A fill, then per background two check-then-writes and a check-then-write of the next (a
    // check alone for the last): 6 bytes per byte each.
    MemoryTest mem(ctx, result, 6.0 * (walking + 3));
    std::vector<Pattern> backgrounds;
    backgrounds.push_back({PatternKind::kSolid, 0, 0, false});
    backgrounds.push_back({PatternKind::kCheckerboard, 0x5555555555555555ULL, 0, false});
    for (uint32_t b = 0; b < walking; ++b)
      backgrounds.push_back({PatternKind::kWalking8, (b + ctx.seed) & 7u, 0, false});
    backgrounds.push_back({PatternKind::kRandom, 0, ctx.seed, false});
    // Each background's last check writes the next background, as write_and_check does.
    mem.fill(backgrounds.front());
    for (size_t b = 0; b < backgrounds.size(); ++b) {
      const Pattern& p = backgrounds[b];
      const Pattern not_p = inverse(p);
      mem.check(p, &not_p, Direction::kUp);
      mem.check(not_p, &p, Direction::kDown);
      mem.check(p, b + 1 < backgrounds.size() ? &backgrounds[b + 1] : nullptr);
    }
    result.params["backgrounds"] = backgrounds.size();
  }
};

}  // namespace

std::unique_ptr<Probe> make_mem_moving_inversions_probe() { return std::make_unique<MovingInversionsProbe>(); }

}  // namespace sdc
