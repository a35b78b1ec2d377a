// The inline memory rotation's host logic on the CPU backend: slice sizing, the order of visits,
// which pattern each slice holds, the first visit that has nothing to check, and a fault caught on
// its slice's next visit.
#include "scheduler/inline/memory_rotation.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "host/backend.hpp"
#include "host/cpu_device.hpp"
#include "host/injection.hpp"

namespace sdc {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;

// A region's defining property: the other slices' visits write at least twice the cache between a
// slice's write and its check.
void expect_evicts(const RotationPlan& plan) {
  EXPECT_GE((plan.slices - 1) * plan.slice_bytes, 2 * plan.cache_bytes);
  EXPECT_GE(plan.region_bytes(), 2 * plan.cache_bytes);
  EXPECT_EQ(plan.slice_bytes % kSliceAlignBytes, 0u);
  EXPECT_LE(plan.slice_bytes, plan.cache_bytes);
}

TEST(MemoryRotation, H200SizedCacheGetsThreeCacheSizedSlices) {
  // 60 MiB of L2; the rest of the probe set 2 ms; 3 TB/s: sqrt(C c0 r) is far above the cache.
  const RotationPlan plan = plan_rotation(60 * kMiB, 2e-3, 3e12);
  EXPECT_FALSE(plan.cache_assumed);
  EXPECT_EQ(plan.slice_bytes, 60 * kMiB);
  EXPECT_EQ(plan.slices, 3u);
  EXPECT_EQ(plan.region_bytes(), 180 * kMiB);
  expect_evicts(plan);
}

TEST(MemoryRotation, CheapProbesGetTheSliceWithTheShortestCycle) {
  // A probe set costing 0.1 ms at 10 GB/s beside a 32 MiB cache: S = sqrt(C c0 r), about 5.5 MiB.
  const uint64_t cache = 32 * kMiB;
  const double c0 = 1e-4, rate = 1e10;
  const RotationPlan plan = plan_rotation(cache, c0, rate);
  const double best = std::sqrt(static_cast<double>(cache) * c0 * rate);
  EXPECT_LE(static_cast<double>(plan.slice_bytes), best);
  EXPECT_GT(static_cast<double>(plan.slice_bytes), best - static_cast<double>(kSliceAlignBytes));
  EXPECT_EQ(plan.slices, (2 * cache + plan.slice_bytes - 1) / plan.slice_bytes + 1);
  expect_evicts(plan);
  // Where the budget sets the interval, the cycle in steps goes as visits x cost: no slice of a
  // quarter or four times the size makes it shorter.
  const auto cycle = [&](double slice) { return (2 * cache / slice + 1) * (c0 + 2 * slice / rate); };
  const double chosen = cycle(static_cast<double>(plan.slice_bytes));
  EXPECT_LT(chosen, cycle(static_cast<double>(plan.slice_bytes) / 4));
  EXPECT_LT(chosen, cycle(std::min(4.0 * static_cast<double>(plan.slice_bytes), static_cast<double>(cache))));
}

TEST(MemoryRotation, EdgeCasesStillEvict) {
  // Unknown cache: the assumed size, said so.
  const RotationPlan unknown = plan_rotation(0, 1e-3, 1e10);
  EXPECT_TRUE(unknown.cache_assumed);
  EXPECT_EQ(unknown.cache_bytes, kAssumedCacheBytes);
  expect_evicts(unknown);
  // No measured cost or rate: cache-sized slices.
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    const RotationPlan plan = plan_rotation(8 * kMiB, bad, bad);
    EXPECT_EQ(plan.slice_bytes, 8 * kMiB);
    EXPECT_EQ(plan.slices, 3u);
  }
  // Nearly free probes: the slice floor, not thousands of tiny slices.
  const RotationPlan tiny_cost = plan_rotation(64 * kMiB, 1e-12, 1e9);
  EXPECT_EQ(tiny_cost.slice_bytes, kMinSliceBytes);
  EXPECT_EQ(tiny_cost.slices, 129u);
  expect_evicts(tiny_cost);
  // A cache smaller than the floor, or than one block; a size that is not whole blocks.
  for (uint64_t cache : {uint64_t{256} << 10, uint64_t{4096}, uint64_t{1000}, (uint64_t{40} << 20) + 100}) {
    const RotationPlan plan = plan_rotation(cache, 1e-3, 1e10);
    EXPECT_GE(plan.slice_bytes, kSliceAlignBytes) << cache;
    EXPECT_GE((plan.slices - 1) * plan.slice_bytes, 2 * cache) << cache;
  }
}

TEST(MemoryRotation, EachVisitWritesTheInverseOfThePrevious) {
  for (uint64_t slice = 0; slice < 4; ++slice) {
    for (uint64_t visit = 0; visit < 4; ++visit) {
      const Pattern p = rotation_pattern(9, slice, visit);
      EXPECT_EQ(p.kind, PatternKind::kRandomBlocks);
      EXPECT_EQ(p.inverted, visit % 2 == 1);
      EXPECT_TRUE(is_bitwise_inverse(p, rotation_pattern(9, slice, visit + 1)));
    }
    // Each slice its own mix, and each seed its own.
    EXPECT_NE(rotation_pattern(9, slice, 0).seed, rotation_pattern(9, slice + 1, 0).seed);
    EXPECT_NE(rotation_pattern(9, slice, 0).seed, rotation_pattern(10, slice, 0).seed);
  }
}

class RotationOnCpu : public ::testing::Test {
 protected:
  // 5 slices of 64 KiB beside a (pretend) 128 KiB cache: 4 x 64 KiB >= 2 x 128 KiB.
  static RotationPlan small_plan() { return RotationPlan{128 << 10, false, 64 << 10, 5}; }
  std::unique_ptr<Device> device_ = open_device({"cpu", 1}, 0);
};

TEST_F(RotationOnCpu, VisitsInTurnAndChecksFromEachSlicesSecondVisit) {
  MemoryRotation rotation(*device_, small_plan(), 42);
  const uint64_t words = (64 << 10) / 8;
  for (uint64_t n = 0; n < 4 * 5; ++n) {
    const MemoryRotation::Visit v = rotation.visit_next();
    EXPECT_EQ(v.slice, n % 5);
    EXPECT_EQ(v.visit, n / 5);
    if (n < 5) {  // the first visit only writes: nothing to check yet
      EXPECT_EQ(v.report.checked, 0u);
      EXPECT_EQ(v.bytes, 64u << 10);
    } else {  // checks the previous visit's pattern and writes the next in one pass
      EXPECT_EQ(v.report.checked, words);
      EXPECT_EQ(v.bytes, 2u * (64 << 10));
    }
    EXPECT_EQ(v.report.mismatches, 0u) << "visit " << n;
  }
}

TEST_F(RotationOnCpu, AFaultIsCaughtOnItsSlicesNextVisitAndRepairedThere) {
  MemoryRotation rotation(*device_, small_plan(), 42);
  for (int n = 0; n < 5; ++n) rotation.visit_next();  // every slice written
  // One bit of the 8th check (slice 2, its third visit) flips before it is read, as a cell of
  // device memory would between two visits.
  Injector injector(parse_injection_specs("model=bitflip,mode=transient,after=7,bit=13,index=100"), 1);
  device_->set_injection(&injector, "mem.random_blocks");
  for (uint64_t n = 0; n < 3 * 5; ++n) {
    const MemoryRotation::Visit v = rotation.visit_next();
    if (n == 7) {
      EXPECT_EQ(v.slice, 2u);
      EXPECT_EQ(v.visit, 2u);
      ASSERT_EQ(v.report.mismatches, 1u);
      EXPECT_EQ(v.report.records[0].index, 100u);
      EXPECT_EQ(v.report.records[0].syndrome(), 1ULL << 13);
    } else {
      // Before, clean; after, the check rewrote the slice, so its next visit (n == 12) is clean too.
      EXPECT_EQ(v.report.mismatches, 0u) << "visit " << n;
    }
  }
  device_->set_injection(nullptr, "");
}

// A visit that throws midway leaves its slice unknown: the slice's next visit writes without
// checking, so the interruption is never taken for a fault.
class FailingOnceDevice : public CpuDevice {
 public:
  FailingOnceDevice() : CpuDevice(0, {0}) {}
  MismatchReport verify(DeviceBuffer& buf, size_t words, const Pattern& expect, const Pattern* then_write,
                        Direction dir) override {
    if (fail_next_) {
      fail_next_ = false;
      // Half of it rewritten, as a kernel stopped midway might leave it.
      fill(buf, words / 2, *then_write);
      throw std::runtime_error("launch failed");
    }
    return CpuDevice::verify(buf, words, expect, then_write, dir);
  }
  bool fail_next_ = false;
};

TEST(RotationRecovery, AnInterruptedVisitRaisesNoFalseAlarmOnTheNext) {
  FailingOnceDevice device;
  MemoryRotation rotation(device, RotationPlan{128 << 10, false, 64 << 10, 5}, 7);
  for (int n = 0; n < 6; ++n) rotation.visit_next();  // all written; slice 0 checked once
  device.fail_next_ = true;
  EXPECT_THROW(rotation.visit_next(), std::runtime_error);                                       // slice 1
  for (int n = 0; n < 4; ++n) EXPECT_EQ(rotation.visit_next().report.checked, (64u << 10) / 8);  // slices 2-0
  const MemoryRotation::Visit again = rotation.visit_next();
  EXPECT_EQ(again.slice, 1u);
  EXPECT_EQ(again.report.checked, 0u);  // rewritten, not checked
  for (int n = 0; n < 5; ++n) {
    const MemoryRotation::Visit v = rotation.visit_next();
    EXPECT_EQ(v.report.checked, (64u << 10) / 8);
    EXPECT_EQ(v.report.mismatches, 0u) << "slice " << v.slice;
  }
}

TEST_F(RotationOnCpu, ARegionTheDeviceCannotSpareIsAClearError) {
  const uint64_t free_bytes = device_->free_memory_bytes();
  const RotationPlan plan{free_bytes, false, free_bytes / 2 / kSliceAlignBytes * kSliceAlignBytes, 3};
  try {
    MemoryRotation rotation(*device_, plan, 1);
    FAIL() << "allocated a region of 1.5x the free memory";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the inline memory rotation needs"), std::string::npos) << what;
    EXPECT_NE(what.find("more than a quarter of its"), std::string::npos) << what;
    EXPECT_NE(what.find("leave mem.* out"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace sdc
