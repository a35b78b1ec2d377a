// The inline memory rotation: a region of more than twice the device's last-level cache, cut into
// slices, one slice visited per inline probe. A visit checks its slice against the pattern its
// previous visit wrote and writes the inverse in the same pass. Between the two, the visits of the
// other slices have written at least twice the cache, so the check reads device memory (HBM, DRAM)
// rather than cache lines the write left behind, which is all an in-cache buffer ever tests.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "host/device.hpp"
#include "probes/probe.hpp"

namespace sdc {

// Assumed when the device does not say (a CPU without sysfs cache entries): more than any GPU's L2
// and most CPUs' last level today.
inline constexpr uint64_t kAssumedCacheBytes = 256ULL << 20;
// Slices are whole 4 KiB blocks (the random-blocks pattern's), at least kMinSliceBytes unless the
// cache itself is smaller.
inline constexpr uint64_t kSliceAlignBytes = 4096;
inline constexpr uint64_t kMinSliceBytes = 1ULL << 20;
// The most of the device's free memory the region may take: the training job owns the rest.
inline constexpr double kMaxRegionShareOfFree = 0.25;

struct RotationPlan {
  uint64_t cache_bytes = 0;    // the cache the region must exceed
  bool cache_assumed = false;  // the device did not report one: kAssumedCacheBytes
  uint64_t slice_bytes = 0;
  uint64_t slices = 0;
  uint64_t region_bytes() const { return slice_bytes * slices; }
};

// The slices for a device whose cache is `cache_bytes` (0: unknown), where the probe set without the
// rotation costs `probe_cost_s` and moves memory at `bytes_per_s` (both measured; either 0: slices
// as large as the cache). Always (slices - 1) * slice_bytes >= 2 * cache.
RotationPlan plan_rotation(uint64_t cache_bytes, double probe_cost_s, double bytes_per_s);

// What `slice` holds after its visit `visit` (0: the first): seeded random 4 KiB blocks, a fresh
// mix per slice, inverted on odd visits so that every bit holds both values each two cycles.
Pattern rotation_pattern(uint64_t seed, uint64_t slice, uint64_t visit);

class MemoryRotation {
 public:
  // Allocates the slices on `device`. Throws std::runtime_error naming the region, the cache and the
  // free memory when the device cannot spare the region: never a silently smaller one.
  MemoryRotation(Device& device, const RotationPlan& plan, uint64_t seed);

  struct Visit {
    uint64_t slice = 0;
    uint64_t visit = 0;     // this slice's visit number; 0, its first, only writes
    MismatchReport report;  // the check against the previous visit's pattern; empty on a first visit
    uint64_t bytes = 0;     // read plus written
  };
  // Visits slices 0, 1, ..., slices - 1, 0, ... in turn. Device injection applies to the check, as
  // in any verify. When the visit throws, the slice's contents are unknown: its next visit only
  // writes, so that it raises no false alarm.
  Visit visit_next();
  const RotationPlan& plan() const { return plan_; }

 private:
  struct Slice {
    std::unique_ptr<DeviceBuffer> buffer;
    uint64_t visits = 0;
    bool holds_pattern = false;  // its last visit completed: it holds rotation_pattern(.., visits - 1)
  };
  Device& device_;
  RotationPlan plan_;
  uint64_t seed_;
  std::vector<Slice> slices_;
  uint64_t next_ = 0;
};

// A memory probe as the inline probe runs it: the probe's own passes over its small in-cache
// buffer, then one visit of the rotation, whose check counts as the probe's (a fault found there
// fails it, under its id) and is described in params["rotation"].
class RotatingMemoryProbe : public Probe {
 public:
  RotatingMemoryProbe(const Probe& base, MemoryRotation& rotation) : base_(base), rotation_(rotation) {}
  std::string id() const override { return base_.id(); }
  std::string targets() const override { return base_.targets(); }
  std::string blind_spots() const override { return base_.blind_spots(); }
  bool included_at(Level level, const DeviceIdentity& device) const override {
    return base_.included_at(level, device);
  }
  void run(ProbeContext& ctx, ProbeResult& result) const override;

 private:
  const Probe& base_;
  MemoryRotation& rotation_;
};

}  // namespace sdc
