// mem.random_blocks: 4 KiB blocks, each with its own seeded kind (own-address, walking, solid,
// checkerboard, random) and background, then the inverse.
// Targets: data-dependent faults under a mix of patterns, as a real workload writes them.
// Cannot see: anything a particular fixed pattern needs but no block happened to draw.
#include "probes/builtin.hpp"
#include "probes/memory_test.hpp"

namespace sdc {
namespace {

class RandomBlocksProbe : public Probe {
 public:
  std::string id() const override { return "mem.random_blocks"; }
  std::string targets() const override {
    return "data-dependent faults under a seeded mix of patterns per 4 KiB block";
  }
  std::string blind_spots() const override { return "patterns no block drew in this run"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }

  void run(ProbeContext& ctx, ProbeResult& result) const override {
    const uint32_t passes = memory_passes(ctx, 1, 4, 16);
    MemoryTest mem(ctx, result, 4.0 * passes);  // write_and_check of 2 patterns a pass
    // Each pass on its own: rewriting one pass's blocks with the next pass's, whose kinds differ
    // block by block, would cost GPUs the block pattern per word (the inverse costs nothing).
    for (uint32_t pass = 0; pass < passes; ++pass) {
      const Pattern p{PatternKind::kRandomBlocks, 9, ctx.seed + pass, false};  // 2^9 words = 4 KiB
      mem.write_and_check({p, inverse(p)});
    }
    result.params["passes"] = passes;
    result.params["block_bytes"] = 4096;
  }
};

}  // namespace

std::unique_ptr<Probe> make_mem_random_blocks_probe() { return std::make_unique<RandomBlocksProbe>(); }

}  // namespace sdc
