// sfu.transcendental on the CPU backend: the seeded inputs lie where the documented bounds hold, the
// bound check accepts correct results and rejects wrong ones, clean devices pass with one digest, an
// exponent flip is caught by the FP64 check, and a flip within the bound is left to consensus.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "host/backend.hpp"
#include "host/cpu_device.hpp"
#include "host/cpu_parallel.hpp"
#include "kernels/common/sfu.hpp"
#include "probes/sfu_transcendental.hpp"
#include "scheduler/consensus/consensus.hpp"
#include "scheduler/consensus/golden.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {
namespace {

constexpr SfuFunction kAll[] = {SfuFunction::kSin,  SfuFunction::kCos,   SfuFunction::kExp,
                                SfuFunction::kLog2, SfuFunction::kRsqrt, SfuFunction::kDivide};
constexpr uint64_t kInputs = 20000;

const Probe& sfu_probe() { return *builtin_registry().find("sfu.transcendental"); }

// n CPU devices of one equivalence class (one core each) on any machine: make_cpu_devices splits
// the cores into groups whose sizes may differ.
std::vector<std::unique_ptr<Device>> one_class(int n) {
  const std::vector<int> cores = available_cores();
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < n; ++i)
    devices.push_back(std::make_unique<CpuDevice>(i, std::vector<int>{cores[i % cores.size()]}));
  return devices;
}

// `v` moved `steps` floats away from zero.
float away_from_zero(float v, int steps) {
  for (int s = 0; s < steps; ++s) v = std::nextafter(v, std::copysign(INFINITY, v));
  return v;
}

float flip(float v, int bit) { return float_of_bits(bits_of_float(v) ^ (1u << bit)); }

TEST(SfuElements, PinnedInputs) {
  // The CUDA kernel regenerates these bits: a change here changes every device's digest.
  EXPECT_EQ(bits_of_float(sfu_input(7, SfuFunction::kSin, 3).x), 0x403d32d1u);
  EXPECT_EQ(bits_of_float(sfu_input(7, SfuFunction::kCos, 3).x), 0x3f3fab8du);
  EXPECT_EQ(bits_of_float(sfu_input(7, SfuFunction::kExp, 3).x), 0x4133f2f5u);
  EXPECT_EQ(bits_of_float(sfu_input(7, SfuFunction::kLog2, 3).x), 0x3f1fd8a5u);
  EXPECT_EQ(bits_of_float(sfu_input(7, SfuFunction::kRsqrt, 3).x), 0x3dafcaccu);
  EXPECT_EQ(bits_of_float(sfu_input(7, SfuFunction::kDivide, 3).x), 0xc4e921dbu);
  EXPECT_EQ(bits_of_float(sfu_input(7, SfuFunction::kDivide, 3).y), 0xb9a32c3eu);
}

TEST(SfuElements, InputsLieWhereTheDocumentedBoundsHold) {
  for (uint64_t seed : {1ULL, 0xdeadbeefULL}) {
    for (SfuFunction f : kAll) {
      std::set<bool> signs;
      uint64_t log2_absolute = 0;
      for (uint64_t k = 0; k < kInputs; ++k) {
        const SfuArgs a = sfu_input(seed, f, k);
        ASSERT_TRUE(std::isnormal(a.x) || a.x == 0.0f) << a.x;
        signs.insert(std::signbit(a.x));
        const double x = std::fabs(a.x), y = std::fabs(a.y);
        switch (f) {
          case SfuFunction::kSin:
          case SfuFunction::kCos: ASSERT_LE(x, M_PI); break;
          case SfuFunction::kExp: ASSERT_LE(x, 20.0); break;
          case SfuFunction::kLog2:
            ASSERT_GE(a.x, 0x1p-10f);
            ASSERT_LT(a.x, 0x1p10f);
            log2_absolute += a.x >= 0.5f && a.x <= 2.0f;
            break;
          case SfuFunction::kRsqrt:
            ASSERT_GE(a.x, 0x1p-20f);
            ASSERT_LT(a.x, 0x1p20f);
            break;
          case SfuFunction::kDivide:
            ASSERT_GE(x, 0x1p-20);
            ASSERT_LT(x, 0x1p20);
            ASSERT_GE(y, 0x1p-20);
            ASSERT_LT(y, 0x1p20);
            break;
        }
        if (f != SfuFunction::kDivide) {
          EXPECT_EQ(a.y, 1.0f);
        }
      }
      const bool signed_inputs =
          f == SfuFunction::kSin || f == SfuFunction::kCos || f == SfuFunction::kExp || f == SfuFunction::kDivide;
      EXPECT_EQ(signs.size(), signed_inputs ? 2u : 1u);
      // log2: 2 of 20 binades fall in the absolute-error range [0.5, 2].
      if (f == SfuFunction::kLog2) {
        EXPECT_GT(log2_absolute, kInputs / 20);
        EXPECT_LT(log2_absolute, kInputs * 3 / 20);
      }
    }
  }
  // The divisor is an independent draw.
  const SfuArgs d = sfu_input(1, SfuFunction::kDivide, 0);
  EXPECT_NE(std::fabs(d.x), std::fabs(d.y));
}

TEST(SfuElements, BoundsAreTheDocumentedOnes) {
  EXPECT_DOUBLE_EQ(sfu_bound(SfuFunction::kSin, {1.0f, 1.0f}).limit, std::exp2(-21.41));
  EXPECT_TRUE(sfu_bound(SfuFunction::kSin, {1.0f, 1.0f}).absolute);
  EXPECT_DOUBLE_EQ(sfu_bound(SfuFunction::kCos, {1.0f, 1.0f}).limit, std::exp2(-21.19));
  EXPECT_EQ(sfu_bound(SfuFunction::kExp, {10.0f, 1.0f}).limit, 2 + 11);  // 2 + floor(11.73)
  EXPECT_EQ(sfu_bound(SfuFunction::kExp, {-0.5f, 1.0f}).limit, 2);
  EXPECT_FALSE(sfu_bound(SfuFunction::kExp, {-0.5f, 1.0f}).absolute);
  EXPECT_TRUE(sfu_bound(SfuFunction::kLog2, {0.5f, 1.0f}).absolute);
  EXPECT_EQ(sfu_bound(SfuFunction::kLog2, {2.0f, 1.0f}).limit, 0x1p-22);
  EXPECT_FALSE(sfu_bound(SfuFunction::kLog2, {2.5f, 1.0f}).absolute);
  EXPECT_EQ(sfu_bound(SfuFunction::kLog2, {0.25f, 1.0f}).limit, 2);
  EXPECT_EQ(sfu_bound(SfuFunction::kRsqrt, {3.0f, 1.0f}).limit, 2);
  EXPECT_EQ(sfu_bound(SfuFunction::kDivide, {3.0f, 7.0f}).limit, 2);
}

TEST(SfuElements, CheckAcceptsCorrectResultsAndRejectsWrongOnes) {
  for (SfuFunction f : kAll) {
    for (uint64_t k = 0; k < kInputs; ++k) {
      const SfuArgs a = sfu_input(3, f, k);
      const double ref = sfu_reference(f, a);
      const float cr = static_cast<float>(ref);  // correctly rounded (up to the reference's own error)
      ASSERT_TRUE(sfu_within_bound(f, a, cr, ref)) << k;
      ASSERT_LE(sfu_error_ratio(f, a, cr, ref), 0.5);
      // A flip of the lowest significand bit is an ulp: within every bound here.
      ASSERT_TRUE(sfu_within_bound(f, a, flip(cr, 0), ref)) << k;
      // The top exponent bit is far outside every bound.
      ASSERT_FALSE(sfu_within_bound(f, a, flip(cr, 30), ref)) << k;
      const SfuBound b = sfu_bound(f, a);
      if (b.absolute) {
        ASSERT_FALSE(sfu_within_bound(f, a, static_cast<float>(ref + 2 * b.limit), ref)) << k;
      } else {
        // k ulps from the correctly rounded result are allowed, k + 2 are not.
        const int ulps = static_cast<int>(b.limit);
        ASSERT_TRUE(sfu_within_bound(f, a, away_from_zero(cr, ulps), ref)) << k;
        ASSERT_FALSE(sfu_within_bound(f, a, away_from_zero(cr, ulps + 2), ref)) << k;
      }
    }
    const SfuArgs a = sfu_input(3, f, 0);
    const double ref = sfu_reference(f, a);
    EXPECT_FALSE(sfu_within_bound(f, a, NAN, ref));
    EXPECT_FALSE(sfu_within_bound(f, a, INFINITY, ref));
    EXPECT_EQ(sfu_error_ratio(f, a, NAN, ref), HUGE_VAL);
  }
}

RunOptions options(uint64_t seed, Injector* injector = nullptr) {
  RunOptions o;
  o.seed = seed;
  o.injector = injector;
  return o;
}

std::vector<ConsensusRecord> records_of(const std::vector<std::unique_ptr<Device>>& devices,
                                        const std::vector<ProbeResult>& results) {
  std::vector<DeviceIdentity> ids;
  for (const auto& d : devices) ids.push_back(d->identity());
  return consensus_records(ids, results, "host", 0);
}

// A GPU record's lane is the lane of the thread that computed the element in launch_sfu's
// grid-stride layout, for any block of a multiple of 32 threads.
TEST(SfuElements, TheLaneOfAnElementIsTheLaneOfTheThreadThatComputesIt) {
  for (const auto& [blocks, threads] : {std::pair<uint64_t, uint64_t>{3, 64}, {5, 256}, {1, 32}}) {
    const uint64_t stride = blocks * threads, total = 6 * 1000 + 7;
    for (uint64_t t = 0; t < stride; ++t) {
      for (uint64_t e = t; e < total; e += stride) ASSERT_EQ(sfu_lane_of(e), static_cast<int>(t % 32)) << e;
    }
  }
}

TEST(SfuProbe, CleanCpuDevicesPassAndShareOneDigest) {
  auto devices = one_class(4);
  for (uint64_t seed : {1ULL, 2ULL, 0xdeadbeefULL}) {
    std::vector<ProbeResult> results;
    for (auto& d : devices) {
      const ProbeResult r = run_probe(sfu_probe(), *d, options(seed));
      ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
      EXPECT_EQ(r.report.mismatches, 0u);
      EXPECT_EQ(r.report.checked, 6u << 16);  // quick on the CPU: 2^16 inputs per function
      ASSERT_TRUE(r.digest.has_value());
      EXPECT_FALSE(r.golden_digest.has_value());  // not correctly rounded: no host golden
      EXPECT_EQ(r.params["library_version"].get<std::string>(), d->math_library());
#if defined(__GLIBC__)
      EXPECT_EQ(d->math_library().rfind("glibc ", 0), 0u) << d->math_library();
#endif
      EXPECT_NE(equivalence_class(d->identity(), r).find(d->math_library()), std::string::npos);
      for (const auto& [name, ratio] : r.params["max_ratio"].items()) {
        EXPECT_GT(ratio.get<double>(), 0.0) << name;
        EXPECT_LE(ratio.get<double>(), 1.0) << name;
      }
      if (!results.empty()) {
        EXPECT_EQ(*r.digest, *results.front().digest) << "device " << d->identity().index;
      }
      results.push_back(r);
    }
    const ConsensusOutcome v = vote(records_of(devices, results));
    ASSERT_EQ(v.votes.size(), 1u);
    EXPECT_EQ(v.votes[0].kind, VoteKind::kAgreed);
    EXPECT_TRUE(v.suspects.empty());
  }
}

TEST(SfuProbe, AnExponentFlipIsCaughtByTheFp64CheckOnItsDeviceOnly) {
  auto devices = make_cpu_devices(4);
  Injector inj(parse_injection_specs("device=2,probe=sfu.transcendental,model=bitflip,bit=30,index=200000"), 5);
  for (auto& d : devices) {
    const ProbeResult r = run_probe(sfu_probe(), *d, options(11, &inj));
    if (d->identity().index != 2) {
      EXPECT_EQ(r.outcome, Outcome::kPass) << "device " << d->identity().index;
      continue;
    }
    ASSERT_EQ(r.outcome, Outcome::kFail);
    EXPECT_EQ(r.report.mismatches, 1u);
    ASSERT_EQ(r.report.records.size(), 1u);
    EXPECT_EQ(r.report.records[0].index, 200000u);  // function 3 (log2), input 3392
    EXPECT_EQ(r.report.records[0].width_bits, 32u);
    // The expected value is the FP64 reference rounded once, so a low bit may differ as well.
    const std::vector<int> bits = r.report.records[0].bit_positions();
    EXPECT_NE(std::find(bits.begin(), bits.end(), 30), bits.end());
  }
}

TEST(SfuProbe, AFlipWithinTheBoundIsLeftToConsensus) {
  const std::string spec = "probe=sfu.transcendental,model=bitflip,bit=0,index=77777,mode=permanent";
  {
    // Four devices: device 2 passes its own check, but the majority names it.
    auto devices = one_class(4);
    Injector inj(parse_injection_specs("device=2," + spec), 5);
    std::vector<ProbeResult> results;
    for (auto& d : devices) {
      results.push_back(run_probe(sfu_probe(), *d, options(11, &inj)));
      EXPECT_EQ(results.back().outcome, Outcome::kPass) << "device " << d->identity().index;
    }
    EXPECT_NE(*results[2].digest, *results[0].digest);
    const ConsensusOutcome v = vote(records_of(devices, results));
    ASSERT_EQ(v.votes.size(), 1u);
    EXPECT_EQ(v.votes[0].probe, "sfu.transcendental");
    EXPECT_EQ(v.votes[0].kind, VoteKind::kMajority);
    ASSERT_EQ(v.suspects.size(), 1u);
    EXPECT_EQ(v.suspects[0].device.device_index, 2);
    EXPECT_EQ(v.suspects[0].accusers, 3);
  }
  {
    // Two devices and no golden: one of them is wrong, and the vote says no more than that.
    auto devices = one_class(2);
    Injector inj(parse_injection_specs("device=1," + spec), 5);
    std::vector<ProbeResult> results;
    for (auto& d : devices) results.push_back(run_probe(sfu_probe(), *d, options(11, &inj)));
    const ConsensusOutcome v = vote(records_of(devices, results));
    ASSERT_EQ(v.votes.size(), 1u);
    EXPECT_EQ(v.votes[0].kind, VoteKind::kInconclusive);
    EXPECT_TRUE(v.suspects.empty());
    EXPECT_TRUE(v.inconclusive());
  }
}

TEST(SfuProbe, IsRunEverywhereAndRecordedInGoldenFiles) {
  auto devices = make_cpu_devices(1);
  for (Level level : {Level::kQuick, Level::kStandard, Level::kLong}) {
    EXPECT_TRUE(sfu_probe().included_at(level, devices[0]->identity()));
  }
  EXPECT_TRUE(sfu_probe().has_stated_bound());
  bool recorded = false;
  for (const Probe* p : builtin_registry().select(golden_probe_globs())) recorded |= p->id() == "sfu.transcendental";
  EXPECT_TRUE(recorded);
}

TEST(SfuProbe, SizeOverrideSetsTheInputsPerFunction) {
  auto devices = make_cpu_devices(1);
  RunOptions o = options(3);
  o.compute_bytes = 24 * 1000;  // 1000 floats per function, rounded down to a multiple of 64
  const ProbeResult r = run_probe(sfu_probe(), *devices[0], o);
  EXPECT_EQ(r.outcome, Outcome::kPass) << r.reason;
  EXPECT_EQ(r.params["elements_per_function"], 960u);
  EXPECT_EQ(r.report.checked, 6u * 960);
}

// 1,024 inputs per function: small enough to run many times.
RunOptions small_options(uint64_t seed, Injector* injector = nullptr) {
  RunOptions o = options(seed, injector);
  o.compute_bytes = kSfuFunctions * sizeof(float) * 1024;
  return o;
}

TEST(SfuReference, ARepeatedInputSetReusesItsReference) {
  auto devices = make_cpu_devices(1);
  const ReferenceCacheStats before = sfu_reference_cache_stats();
  const ProbeResult first = run_probe(sfu_probe(), *devices[0], small_options(0x5f0001));
  ASSERT_EQ(first.outcome, Outcome::kPass) << first.reason;
  EXPECT_EQ(sfu_reference_cache_stats().computed, before.computed + 1);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const ProbeResult again = run_probe(sfu_probe(), *devices[0], small_options(0x5f0001));
    ASSERT_EQ(again.outcome, Outcome::kPass) << again.reason;
    EXPECT_EQ(*again.digest, *first.digest);
    EXPECT_EQ(again.params["max_ratio"], first.params["max_ratio"]);
  }
  EXPECT_EQ(sfu_reference_cache_stats().computed, before.computed + 1);
  EXPECT_EQ(sfu_reference_cache_stats().hits, before.hits + 3);
}

TEST(SfuReference, EachNewSeedGetsItsOwnHostReferenceAndTheCacheStaysBounded) {
  auto devices = make_cpu_devices(1);
  const ReferenceCacheStats before = sfu_reference_cache_stats();
  std::set<std::string> digests;
  const uint64_t seeds[] = {0x5f0002, 0x5f0003, 0x5f0004};
  for (uint64_t seed : seeds) {
    const ProbeResult r = run_probe(sfu_probe(), *devices[0], small_options(seed));
    ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
    digests.insert(digest_hex(*r.digest));
    // The kept reference is the FP64 function of the seeded inputs, as computed without a cache.
    const uint64_t n = r.params["elements_per_function"].get<uint64_t>();
    const std::shared_ptr<const SfuReferenceSet> set = sfu_reference_set(r.seed, n);
    ASSERT_EQ(set->reference.size(), n * kSfuFunctions);
    for (uint64_t i = 0; i < n * kSfuFunctions; i += 97) {
      const SfuFunction f = sfu_function_of(i, n);
      const SfuArgs a = sfu_input(r.seed, f, i % n);
      ASSERT_EQ(set->reference[i], sfu_reference(f, a)) << i;
      ASSERT_EQ(set->allowed[i], sfu_allowed_error(f, a, sfu_reference(f, a))) << i;
    }
  }
  EXPECT_EQ(digests.size(), 3u);  // new inputs, not the first set's again
  EXPECT_EQ(sfu_reference_cache_stats().computed, before.computed + 3);
  EXPECT_LE(sfu_reference_cache_stats().entries, kSfuCacheSets);
  EXPECT_LE(sfu_reference_cache_stats().bytes, kSfuCacheBytes);
  // Only the last kSfuCacheSets sets are kept: the first seed's is computed again.
  const ProbeResult r = run_probe(sfu_probe(), *devices[0], small_options(seeds[0]));
  ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
  EXPECT_EQ(sfu_reference_cache_stats().computed, before.computed + 4);
}

TEST(SfuReference, AnInjectedFaultIsCaughtOnACacheHit) {
  auto devices = make_cpu_devices(1);
  const ProbeResult clean = run_probe(sfu_probe(), *devices[0], small_options(0x5f0005));
  ASSERT_EQ(clean.outcome, Outcome::kPass) << clean.reason;
  const ReferenceCacheStats before = sfu_reference_cache_stats();
  Injector inj(parse_injection_specs("probe=sfu.transcendental,model=bitflip,bit=30,index=3000"), 5);
  const ProbeResult faulty = run_probe(sfu_probe(), *devices[0], small_options(0x5f0005, &inj));
  EXPECT_EQ(sfu_reference_cache_stats().computed, before.computed);
  EXPECT_EQ(sfu_reference_cache_stats().hits, before.hits + 1);
  ASSERT_EQ(faulty.outcome, Outcome::kFail);
  EXPECT_EQ(faulty.report.mismatches, 1u);
  ASSERT_EQ(faulty.report.records.size(), 1u);
  EXPECT_EQ(faulty.report.records[0].index, 3000u);  // function 2 (exp), input 952
  const std::vector<int> bits = faulty.report.records[0].bit_positions();
  EXPECT_NE(std::find(bits.begin(), bits.end(), 30), bits.end());
}

// A set larger than the cache's budget is neither kept nor built whole: the probe computes each
// element's reference as it checks it, and still catches a fault.
TEST(SfuReference, ASetLargerThanTheBudgetIsCheckedWithoutBeingHeld) {
  const uint64_t per_function = (kSfuCacheBytes / (kSfuFunctions * 2 * sizeof(double)) + 64) / 64 * 64;
  const ReferenceCacheStats before = sfu_reference_cache_stats();
  EXPECT_EQ(sfu_reference_set(0x5f0006, per_function), nullptr);
  auto devices = make_cpu_devices(1);
  Injector inj(parse_injection_specs("probe=sfu.transcendental,model=bitflip,bit=30,index=12345678"), 5);
  RunOptions o = options(0x5f0006, &inj);
  o.compute_bytes = kSfuFunctions * sizeof(float) * per_function;
  const ProbeResult r = run_probe(sfu_probe(), *devices[0], o);
  EXPECT_EQ(r.params["elements_per_function"].get<uint64_t>(), per_function);
  EXPECT_EQ(sfu_reference_cache_stats().computed, before.computed);
  EXPECT_EQ(sfu_reference_cache_stats().entries, before.entries);
  ASSERT_EQ(r.outcome, Outcome::kFail) << r.reason;
  EXPECT_EQ(r.report.mismatches, 1u);
  ASSERT_EQ(r.report.records.size(), 1u);
  EXPECT_EQ(r.report.records[0].index, 12345678u);
}

}  // namespace
}  // namespace sdc
