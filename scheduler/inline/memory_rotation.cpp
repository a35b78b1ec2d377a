#include "scheduler/inline/memory_rotation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/common/random.hpp"

namespace sdc {
namespace {

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

uint64_t align_down(uint64_t bytes) { return bytes / kSliceAlignBytes * kSliceAlignBytes; }

}  // namespace

RotationPlan plan_rotation(uint64_t cache_bytes, double probe_cost_s, double bytes_per_s) {
  RotationPlan plan;
  plan.cache_assumed = cache_bytes == 0;
  plan.cache_bytes = plan.cache_assumed ? kAssumedCacheBytes : cache_bytes;
  const uint64_t largest = std::max(kSliceAlignBytes, align_down(plan.cache_bytes));
  const uint64_t smallest = std::min(kMinSliceBytes, largest);
  // Where the budget sets the interval, it grows with the probe's cost c0 + 2S/r, and a cycle is
  // 2C/S + 1 visits: the cycle in steps goes as (2C/S + 1)(c0 + 2S/r), least at S = sqrt(C c0 r).
  // Where the planner sets it (the default SDC rate), the interval grows only as the root of the
  // cost and larger slices always shorten the cycle. Either way no slice exceeds the cache, which
  // keeps the region within three caches.
  double slice = static_cast<double>(largest);
  if (probe_cost_s > 0 && bytes_per_s > 0 && std::isfinite(probe_cost_s) && std::isfinite(bytes_per_s)) {
    slice = std::sqrt(static_cast<double>(plan.cache_bytes) * probe_cost_s * bytes_per_s);
  }
  plan.slice_bytes =
      align_down(static_cast<uint64_t>(std::clamp(slice, static_cast<double>(smallest), static_cast<double>(largest))));
  plan.slices = (2 * plan.cache_bytes + plan.slice_bytes - 1) / plan.slice_bytes + 1;
  return plan;
}

Pattern rotation_pattern(uint64_t seed, uint64_t slice, uint64_t visit) {
  return Pattern{PatternKind::kRandomBlocks, 9, mix64(seed + mix64(slice + 1)), visit % 2 == 1};
}

MemoryRotation::MemoryRotation(Device& device, const RotationPlan& plan, uint64_t seed)
    : device_(device), plan_(plan), seed_(seed) {
  const uint64_t free_bytes = device.free_memory_bytes();
  const std::string needs = "the inline memory rotation needs " + mib(plan.region_bytes()) + " (" +
                            std::to_string(plan.slices) + " slices of " + mib(plan.slice_bytes) +
                            ", more than twice the " + mib(plan.cache_bytes) + " cache) on " +
                            device.identity().label();
  const std::string remedy = ": free device memory, or leave mem.* out of the inline probes";
  if (static_cast<double>(plan.region_bytes()) > kMaxRegionShareOfFree * static_cast<double>(free_bytes)) {
    throw std::runtime_error(needs + ", more than a quarter of its " + mib(free_bytes) + " free" + remedy);
  }
  try {
    for (uint64_t s = 0; s < plan.slices; ++s) slices_.push_back(Slice{device.allocate(plan.slice_bytes)});
  } catch (const std::exception& e) {
    throw std::runtime_error(needs + ", and allocating it failed (" + e.what() + ")" + remedy);
  }
}

MemoryRotation::Visit MemoryRotation::visit_next() {
  Visit v;
  v.slice = next_;
  next_ = (next_ + 1) % slices_.size();
  Slice& slice = slices_[v.slice];
  v.visit = slice.visits++;
  const size_t words = plan_.slice_bytes / 8;
  const Pattern next = rotation_pattern(seed_, v.slice, v.visit);
  const bool check = slice.holds_pattern;
  slice.holds_pattern = false;  // until this visit completes
  if (check) {
    const Pattern previous = rotation_pattern(seed_, v.slice, v.visit - 1);
    v.report = device_.verify(*slice.buffer, words, previous, &next, Direction::kUp);
    v.bytes = 2 * plan_.slice_bytes;
  } else {
    device_.fill(*slice.buffer, words, next);
    v.bytes = plan_.slice_bytes;
  }
  slice.holds_pattern = true;
  return v;
}

void RotatingMemoryProbe::run(ProbeContext& ctx, ProbeResult& result) const {
  base_.run(ctx, result);
  const MemoryRotation::Visit v = rotation_.visit_next();
  result.report.checked += v.report.checked;
  result.report.mismatches += v.report.mismatches;
  result.bytes += v.bytes;
  const uint64_t slice_offset = v.slice * rotation_.plan().slice_bytes;
  nlohmann::json records = nlohmann::json::array();
  for (const MismatchRecord& m : v.report.records) {
    records.push_back({{"byte_offset", slice_offset + m.index * 8},
                       {"expected", m.expected},
                       {"observed", m.observed},
                       {"bits", m.bit_positions()}});
  }
  // Offsets are within the region (slice * slice_bytes + the word's offset in its slice).
  result.params["rotation"] = {{"slice", v.slice},
                               {"visit", v.visit},
                               {"checked", v.report.checked},
                               {"mismatches", v.report.mismatches},
                               {"records", std::move(records)}};
}

}  // namespace sdc
