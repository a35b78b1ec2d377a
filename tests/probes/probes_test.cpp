// Every probe passes clean on the CPU backend and fails under an injected fault, naming the
// element, bit and device.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "host/backend.hpp"
#include "host/cpu_device.hpp"
#include "host/cpu_parallel.hpp"
#include "host/error.hpp"
#include "kernels/common/chains.hpp"
#include "probes/chain_probe.hpp"
#include "probes/memory_test.hpp"
#include "probes/reference_cache.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {
namespace {

class EveryProbe : public ::testing::TestWithParam<std::string> {
 protected:
  RunOptions small(uint64_t seed) const {
    RunOptions o;
    o.seed = seed;
    o.size_bytes = o.compute_bytes = 1 << 20;
    o.iterations = GetParam().rfind("mem.", 0) == 0 ? 1u : 64u;
    return o;
  }
  const Probe& probe() const { return *builtin_registry().find(GetParam()); }
};

TEST_P(EveryProbe, PassesCleanOnEveryVirtualDevice) {
  auto devices = make_cpu_devices(3);
  for (uint64_t seed : {1ULL, 0xdeadbeefULL}) {
    for (auto& d : devices) {
      const ProbeResult r = run_probe(probe(), *d, small(seed));
      EXPECT_EQ(r.outcome, Outcome::kPass) << r.reason;
      EXPECT_GT(r.report.checked, 0u);
      EXPECT_EQ(r.report.mismatches, 0u);
      EXPECT_EQ(r.seed, probe_seed(seed, GetParam()));
    }
  }
}

TEST_P(EveryProbe, FailsUnderAnInjectedFlipNamingElementBitAndDevice) {
  auto devices = make_cpu_devices(3);
  // Probes with a stated bound see flips above it: bit 62 lands in the exponent of every width
  // (62 mod 32 = 30, mod 16 = 14). Exact probes see any bit.
  const int bit = probe().has_stated_bound() ? 62 : 5;
  Injector inj(parse_injection_specs("device=1,probe=" + GetParam() + ",model=bitflip,bit=" + std::to_string(bit) +
                                     ",index=100,mode=permanent"),
               7);
  RunOptions o = small(42);
  o.injector = &inj;
  for (auto& d : devices) {
    const ProbeResult r = run_probe(probe(), *d, o);
    if (d->identity().index != 1) {
      EXPECT_EQ(r.outcome, Outcome::kPass) << "device " << d->identity().index;
      continue;
    }
    ASSERT_EQ(r.outcome, Outcome::kFail);
    EXPECT_EQ(r.device_index, 1);
    EXPECT_EQ(r.device_uuid, d->identity().uuid);
    ASSERT_FALSE(r.report.records.empty());
    EXPECT_EQ(r.report.records[0].index, 100u);
    const std::vector<int> bits = r.report.records[0].bit_positions();
    const int flipped = bit % static_cast<int>(r.report.records[0].width_bits);
    if (probe().has_stated_bound()) {
      // The expected value is the FP64 reference rounded once, so low bits may differ as well.
      EXPECT_NE(std::find(bits.begin(), bits.end(), flipped), bits.end());
    } else {
      EXPECT_EQ(bits, std::vector<int>{flipped});
    }
  }
}

TEST_P(EveryProbe, TransientFaultIsCaughtOnce) {
  auto devices = make_cpu_devices(1);
  Injector inj(parse_injection_specs("model=random,mode=transient"), 3);
  RunOptions o = small(9);
  o.injector = &inj;
  const ProbeResult first = run_probe(probe(), *devices[0], o);
  EXPECT_EQ(first.outcome, Outcome::kFail);
  EXPECT_EQ(first.report.mismatches, 1u);
  EXPECT_EQ(run_probe(probe(), *devices[0], o).outcome, Outcome::kPass);
}

std::vector<std::string> probe_ids() {
  std::vector<std::string> ids;
  for (const auto& p : builtin_registry().probes()) ids.push_back(p->id());
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Cpu, EveryProbe, ::testing::ValuesIn(probe_ids()), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
});

TEST(Registry, IdsAreUniqueDottedAndDocumented) {
  for (const auto& p : builtin_registry().probes()) {
    EXPECT_NE(p->id().find('.'), std::string::npos);
    EXPECT_FALSE(p->targets().empty());
    EXPECT_FALSE(p->blind_spots().empty());
  }
  EXPECT_GE(builtin_registry().probes().size(), 10u);
  EXPECT_THROW(builtin_registry().select({"nothing.*"}), std::exception);
  EXPECT_EQ(builtin_registry().select({"mem.*", "mem.march_c"}).size(), 6u);
}

TEST(Runner, ApiFailureIsSkippedNotFailed) {
  auto devices = make_cpu_devices(1);
  RunOptions o;
  o.seed = 1;
  o.size_bytes = uint64_t{1} << 62;  // no host can allocate this
  const ProbeResult r = run_probe(*builtin_registry().find("mem.march_c"), *devices[0], o);
  EXPECT_EQ(r.outcome, Outcome::kSkipped);
  EXPECT_FALSE(r.reason.empty());
}

TEST(Runner, SameSeedReplaysTheSameFault) {
  auto devices = make_cpu_devices(1);
  auto run = [&](uint64_t seed) {
    Injector inj(parse_injection_specs("model=bitflip"), seed);  // random element and bit
    RunOptions o;
    o.seed = seed;
    o.iterations = 32;
    o.injector = &inj;
    return run_probe(*builtin_registry().find("alu.fma64"), *devices[0], o);
  };
  const ProbeResult a = run(5), b = run(5);
  ASSERT_EQ(a.report.records.size(), 1u);
  EXPECT_EQ(a.report.records[0].index, b.report.records[0].index);
  EXPECT_EQ(a.report.records[0].observed, b.report.records[0].observed);
}

// A memory word is located by its address: the SM or core that read it is not where it is wrong.
TEST(Attribution, MemoryRecordsGiveTheByteOffsetNotAUnit) {
  RunReport report;
  DeviceIdentity gpu;
  gpu.backend = "cuda";
  report.devices.push_back(gpu);
  for (const char* probe : {"mem.march_c", "alu.fma32"}) {
    ProbeResult r;
    r.probe = probe;
    r.outcome = Outcome::kFail;
    MismatchRecord m;
    m.index = 0x100;
    m.observed = 1;
    m.unit = 5;
    m.lane = 3;
    r.report.mismatches = 1;
    r.report.records.push_back(m);
    report.results.push_back(r);
  }
  const std::string text = results_table(report);
  const size_t alu = text.find("alu.fma32");
  ASSERT_NE(alu, std::string::npos);
  const std::string mem_part = text.substr(0, alu);
  EXPECT_NE(mem_part.find("byte offset 0x800"), std::string::npos) << text;
  EXPECT_EQ(mem_part.find(" sm "), std::string::npos) << text;
  EXPECT_NE(text.find(" sm 5 lane 3", alu), std::string::npos) << text;

  const nlohmann::json mem = to_json(report.results[0])["records"][0];
  EXPECT_EQ(mem["byte_offset"], 0x800);
  EXPECT_FALSE(mem.contains("unit"));
  EXPECT_FALSE(mem.contains("lane"));
  EXPECT_EQ(to_json(report.results[1])["records"][0]["unit"], 5);
}

TEST(Attribution, APreemptedChainNamesNoSm) {
  RunReport report;
  DeviceIdentity gpu;
  gpu.backend = "cuda";
  report.devices.push_back(gpu);
  ProbeResult r;
  r.probe = "alu.fma32";
  r.outcome = Outcome::kFail;
  MismatchRecord m;
  m.observed = 1;
  m.preempted = true;
  m.lane = 4;
  r.report.mismatches = 1;
  r.report.records.push_back(m);
  report.results.push_back(r);
  const std::string text = results_table(report);
  EXPECT_NE(text.find("sm unknown (preempted"), std::string::npos) << text;
  EXPECT_EQ(to_json(r)["records"][0]["preempted"], true);
  EXPECT_FALSE(to_json(r)["records"][0].contains("unit"));
}

// A probe whose verification compares nothing: what iterations 0 or an empty buffer amounts to.
class ChecksNothing : public Probe {
 public:
  std::string id() const override { return "test.checks_nothing"; }
  std::string targets() const override { return "nothing"; }
  std::string blind_spots() const override { return "everything"; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }
  void run(ProbeContext&, ProbeResult&) const override {}
};

TEST(Runner, AResultThatCheckedNothingIsSkippedAndTheRunCouldNotTest) {
  auto devices = make_cpu_devices(1);
  RunOptions o;
  o.seed = 1;
  const ChecksNothing nothing;
  const ProbeResult r = run_probe(nothing, *devices[0], o);
  EXPECT_EQ(r.outcome, Outcome::kSkipped);
  EXPECT_NE(r.reason.find("checked 0 elements"), std::string::npos) << r.reason;
  // A real probe asked for no passes, as a golden file with "iterations": 0 once did.
  o.iterations = 0;
  o.size_bytes = 1 << 16;
  const RunReport report = run_probes({builtin_registry().find("mem.own_address"), &nothing}, devices, o, "qualify");
  for (const auto& x : report.results) EXPECT_NE(x.outcome, Outcome::kPass) << x.probe;
  EXPECT_EQ(exit_code_of(report), 2);
  EXPECT_EQ(npd_verdict(report).rfind("UNKNOWN: could not test", 0), 0u) << npd_verdict(report);
}

// A value that knows its size, for ReferenceCache.
struct Sized {
  size_t size;
  size_t bytes() const { return size; }
};

TEST(ReferenceCache, ComputesOncePerKeyAndKeepsTheMostRecentWithinItsBounds) {
  ReferenceCache<int, Sized> cache(2, 100);
  int computed = 0;
  auto get = [&](int key, size_t size = 10) {
    return cache.get(key, [&] {
      ++computed;
      return Sized{size};
    });
  };
  EXPECT_EQ(get(1)->size, 10u);
  get(1);
  EXPECT_EQ(computed, 1);
  EXPECT_EQ(cache.stats().hits, 1u);
  get(2);
  get(1);  // 1 is now the most recent, so 3 evicts 2
  get(3);
  EXPECT_EQ(cache.stats().entries, 2u);
  get(1);
  EXPECT_EQ(computed, 3);
  get(2);
  EXPECT_EQ(computed, 4);
  // Too large for the whole budget: returned, never kept, and nothing else is evicted for it.
  EXPECT_EQ(get(9, 101)->size, 101u);
  get(9, 101);
  EXPECT_EQ(computed, 6);
  EXPECT_EQ(cache.stats().entries, 2u);
  // Bounded by bytes as well as by count.
  get(4, 95);
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().bytes, 95u);
}

TEST(ReferenceCache, ThreadsAskingForOneKeyShareOneComputation) {
  ReferenceCache<int, Sized> cache(4, 1000);
  std::atomic<int> computed{0};
  std::vector<std::thread> threads;
  std::vector<const Sized*> seen(8);
  for (size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      seen[t] = cache
                    .get(7,
                         [&] {
                           ++computed;
                           std::this_thread::sleep_for(std::chrono::milliseconds(20));
                           return Sized{1};
                         })
                    .get();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(computed, 1);
  for (const Sized* p : seen) EXPECT_EQ(p, seen[0]);
}

// ALU probes at a short chain length: small enough for any machine.
RunOptions chain_options(uint64_t seed, Injector* injector = nullptr) {
  RunOptions o;
  o.seed = seed;
  o.iterations = 64;
  o.injector = injector;
  return o;
}

// The job run_chain_probe sized, from the result's params.
ChainJob job_of(const ProbeResult& r, ChainKind kind, const char* name) {
  ChainJob job;
  job.kind = kind;
  job.seed = r.seed;
  job.seeds = r.params.at(name).at("seeds").get<uint32_t>();
  job.copies = r.params.at(name).at("copies").get<uint64_t>();
  job.iterations = r.params.at(name).at("iterations").get<uint32_t>();
  return job;
}

TEST(ChainCache, ARepeatedConfigurationIsNotRecomputed) {
  auto devices = make_cpu_devices(1);
  const Probe& probe = *builtin_registry().find("alu.fma32");
  const ReferenceCacheStats goldens = chain_golden_cache_stats(), digests = chain_digest_cache_stats();
  const ProbeResult first = run_probe(probe, *devices[0], chain_options(0x5eed01));
  ASSERT_EQ(first.outcome, Outcome::kPass) << first.reason;
  EXPECT_EQ(chain_golden_cache_stats().computed, goldens.computed + 1);
  EXPECT_EQ(chain_digest_cache_stats().computed, digests.computed + 1);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const ProbeResult again = run_probe(probe, *devices[0], chain_options(0x5eed01));
    ASSERT_EQ(again.outcome, Outcome::kPass) << again.reason;
    EXPECT_EQ(*again.golden_digest, *first.golden_digest);
    EXPECT_EQ(*again.digest, *again.golden_digest);
  }
  EXPECT_EQ(chain_golden_cache_stats().computed, goldens.computed + 1);
  EXPECT_EQ(chain_digest_cache_stats().computed, digests.computed + 1);
  EXPECT_EQ(chain_digest_cache_stats().hits, digests.hits + 3);
}

// An isolated worker's watchdog hears from the host's scalar goldens after every seed, however slow
// the core: a loaded core under a sanitizer once went 2 s silent over 64 seeds and was called hung.
TEST(ChainCache, TheHostsGoldensBeatAfterEverySeed) {
  ChainJob job;
  job.kind = ChainKind::kFma32;
  job.seed = 0x5eed0b;  // no other test computes this configuration: nothing is cached
  job.seeds = 128;
  job.iterations = 64;
  job.copies = 128;
  uint32_t beats = 0;
  const std::shared_ptr<const ChainExpected> expected = chain_expected(job, [&] { ++beats; });
  EXPECT_EQ(expected->goldens->size(), static_cast<size_t>(job.seeds) * kChainOutputsPerCopy);
  EXPECT_EQ(beats, job.seeds);
}

TEST(ChainCache, AnotherSeedOrCopyLayoutGetsItsOwnCorrectDigest) {
  // Two devices of different widths: their copy counts differ (copies scale with cores).
  const int core = available_cores().front();
  CpuDevice narrow(0, {core}), wide(1, {core, core});
  const Probe& probe = *builtin_registry().find("alu.int64");
  const ProbeResult a = run_probe(probe, narrow, chain_options(0x5eed02));
  const ProbeResult b = run_probe(probe, narrow, chain_options(0x5eed03));
  const ProbeResult c = run_probe(probe, wide, chain_options(0x5eed02));
  for (const ProbeResult* r : {&a, &b, &c}) {
    ASSERT_EQ(r->outcome, Outcome::kPass) << r->reason;
    // Correct: the vector code on the device agrees with the scalar goldens' digest, and the cached
    // digest is the one chain_output_digest gives for this job.
    EXPECT_EQ(*r->digest, *r->golden_digest);
    const ChainJob job = job_of(*r, ChainKind::kInt64, "int64");
    EXPECT_EQ(*r->golden_digest, chain_output_digest(job, chain_goldens(job)));
  }
  EXPECT_NE(job_of(a, ChainKind::kInt64, "int64").copies, job_of(c, ChainKind::kInt64, "int64").copies);
  EXPECT_NE(*a.golden_digest, *b.golden_digest);
  EXPECT_NE(*a.golden_digest, *c.golden_digest);
}

TEST(ChainCache, AnInjectedFaultIsCaughtWithACachedDigest) {
  auto devices = make_cpu_devices(1);
  const Probe& probe = *builtin_registry().find("alu.fma64");
  const ProbeResult clean = run_probe(probe, *devices[0], chain_options(0x5eed04));
  ASSERT_EQ(clean.outcome, Outcome::kPass) << clean.reason;
  const ReferenceCacheStats before = chain_digest_cache_stats();
  Injector inj(parse_injection_specs("probe=alu.fma64,model=bitflip,bit=3,index=100"), 1);
  const ProbeResult faulty = run_probe(probe, *devices[0], chain_options(0x5eed04, &inj));
  EXPECT_EQ(chain_digest_cache_stats().computed, before.computed);  // served from the cache
  EXPECT_EQ(chain_digest_cache_stats().hits, before.hits + 1);
  ASSERT_EQ(faulty.outcome, Outcome::kFail);
  ASSERT_EQ(faulty.report.records.size(), 1u);
  EXPECT_EQ(faulty.report.records[0].index, 100u);
  EXPECT_EQ(faulty.report.records[0].bit_positions(), std::vector<int>{3});
  EXPECT_EQ(*faulty.golden_digest, *clean.golden_digest);
  EXPECT_NE(*faulty.digest, *faulty.golden_digest);  // consensus sees the fault as well
}

}  // namespace
}  // namespace sdc

namespace sdc {
namespace {

// The host memory setting for one test; the suite's presets set it for every test (32M).
class HostMemorySetting {
 public:
  explicit HostMemorySetting(const char* value) {
    if (const char* old = std::getenv(kHostMemoryVariable)) old_ = old;
    if (value) {
      ::setenv(kHostMemoryVariable, value, 1);
    } else {
      ::unsetenv(kHostMemoryVariable);
    }
  }
  ~HostMemorySetting() {
    if (old_) {
      ::setenv(kHostMemoryVariable, old_->c_str(), 1);
    } else {
      ::unsetenv(kHostMemoryVariable);
    }
  }

 private:
  std::optional<std::string> old_;
};

// A CPU device with a fixed amount of free memory, of which the scratch buffer it holds is in use.
class SmallMemoryDevice : public CpuDevice {
 public:
  explicit SmallMemoryDevice(uint64_t bytes, int sharing = 1) : CpuDevice(0, {0}, sharing), bytes_(bytes) {}
  uint64_t free_memory_bytes() const override { return bytes_ - scratch_bytes(); }

 private:
  uint64_t bytes_;
};

TEST(MemorySizing, TheCpuSparesHalfOfWhatIsAvailableSharedAmongItsDevices) {
  const HostMemorySetting unset(nullptr);
  SmallMemoryDevice device(64ULL << 20);
  EXPECT_EQ(device.spare_memory_bytes(), 32ULL << 20);
  device.scratch(32ULL << 20);  // the first probe's buffer, kept for the next one: still free to it
  EXPECT_EQ(device.spare_memory_bytes(), 32ULL << 20);
  EXPECT_EQ(SmallMemoryDevice(64ULL << 20, 4).spare_memory_bytes(), 8ULL << 20);
}

TEST(MemorySizing, TheHostMemorySettingBoundsTheCpuButNeverPastWhatIsAvailable) {
  {
    const HostMemorySetting set("16M");
    EXPECT_EQ(SmallMemoryDevice(64ULL << 20).spare_memory_bytes(), 16ULL << 20);
    EXPECT_EQ(SmallMemoryDevice(64ULL << 20, 2).spare_memory_bytes(), 8ULL << 20);
  }
  {
    const HostMemorySetting set("1G");
    EXPECT_EQ(SmallMemoryDevice(64ULL << 20).spare_memory_bytes(), 64ULL << 20);
  }
  for (const char* bad : {"077", "-1", "4KB", "512K", ""}) {
    const HostMemorySetting set(bad);
    try {
      SmallMemoryDevice device(64ULL << 20);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(kHostMemoryVariable), std::string::npos) << e.what();
    }
  }
}

TEST(MemorySizing, GpusKeepAReserveOfTheLargerOf4GiBAndATwentieth) {
  SmallMemoryDevice device(64ULL << 30);
  const uint64_t total = device.identity().memory_bytes;
  const uint64_t reserve = std::max<uint64_t>(4ULL << 30, total / 20);
  // The backends' default, which the CPU overrides.
  EXPECT_EQ(device.Device::spare_memory_bytes(), (64ULL << 30) - reserve);
  EXPECT_EQ(SmallMemoryDevice(1ULL << 30).Device::spare_memory_bytes(), 0u);
}

TEST(MemorySizing, TheBufferIsAllThatIsSpareWhenItFitsTheTimeElseWhatTheTimeAllows) {
  const Device::MemoryRates rates{1e9, 10e9};  // 1 GB/s to allocate, 10 GB/s to fill
  const MemoryTime time{2, 1};                 // 2 s to allocate, 1 s of passes
  // Passes of 10 bytes per byte in 1 s: 1 GB, in whole MiB; 80 bytes per byte: 125 MB.
  EXPECT_EQ(memory_probe_bytes(uint64_t{1} << 40, rates, time, 10), 953ULL << 20);
  EXPECT_EQ(memory_probe_bytes(uint64_t{1} << 40, rates, time, 80), 119ULL << 20);
  // Allocation at 1 GB/s for 2 s bounds a probe of little traffic.
  EXPECT_EQ(memory_probe_bytes(uint64_t{1} << 40, rates, time, 1), 1907ULL << 20);
  EXPECT_EQ(memory_probe_bytes(64ULL << 20, rates, time, 10), 64ULL << 20);  // all that is spare fits
  EXPECT_EQ(memory_probe_bytes((64ULL << 20) + 5, rates, time, 10), 64ULL << 20);
  EXPECT_EQ(memory_probe_bytes(0, rates, time, 10), 1ULL << 20);  // never below 1 MiB
  EXPECT_EQ(memory_probe_bytes(uint64_t{1} << 40, rates, MemoryTime{1e-6, 1e-6}, 10), 1ULL << 20);
  EXPECT_EQ(memory_probe_bytes(5ULL << 20, Device::MemoryRates{}, time, 10), 5ULL << 20);  // too fast to time
  // The buffer the last probe left is reused without allocating: only the passes and what is spare
  // bound a probe up to its size.
  EXPECT_EQ(memory_probe_bytes(uint64_t{1} << 40, rates, time, 1, 4000ULL << 20), 4000ULL << 20);
  EXPECT_EQ(memory_probe_bytes(uint64_t{1} << 40, rates, time, 1, 1ULL << 30), 1907ULL << 20);
  EXPECT_EQ(memory_probe_bytes(2ULL << 30, rates, time, 1, 3ULL << 30), 2ULL << 30);
  const MemoryTime quick = memory_probe_time(Level::kQuick);
  EXPECT_LE(quick.allocate_s + 6 * quick.passes_s, 0.4 * 50);  // well inside quick's budget
}

TEST(MemorySizing, RatesAreMeasuredOnceAndKept) {
  auto devices = make_cpu_devices(1);
  const Device::MemoryRates& first = measured_memory_rates(*devices[0]);
  EXPECT_GT(first.allocate_bytes_per_s, 0);
  EXPECT_GT(first.fill_bytes_per_s, 0);
  EXPECT_EQ(&measured_memory_rates(*devices[0]), &first);
  EXPECT_EQ(devices[0]->scratch_bytes(), 0u);  // the measurement's buffer is its own
}

// The traffic each probe states sizes its buffer: it must be the traffic it makes.
TEST(MemorySizing, EachMemoryProbeStatesTheTrafficItMakes) {
  auto devices = make_cpu_devices(1);
  for (Level level : {Level::kQuick, Level::kStandard, Level::kLong}) {
    for (const auto& p : builtin_registry().probes()) {
      if (p->id().rfind("mem.", 0) != 0) continue;
      RunOptions o;
      o.seed = 3;
      o.level = level;
      o.size_bytes = 1 << 20;
      const ProbeResult r = run_probe(*p, *devices[0], o);
      ASSERT_EQ(r.outcome, Outcome::kPass) << p->id() << ": " << r.reason;
      EXPECT_DOUBLE_EQ(r.params.at("traffic_per_byte").get<double>() * double(1 << 20), double(r.bytes))
          << p->id() << " at " << level_name(level);
    }
  }
}

TEST(MemorySizing, WithoutASizeEachProbeTestsWhatTheDeviceSparesWithinItsTime) {
  const HostMemorySetting set("8M");
  auto devices = make_cpu_devices(1);
  RunOptions o;
  o.seed = 1;
  const ProbeResult r = run_probe(*builtin_registry().find("mem.march_c"), *devices[0], o);
  ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
  const uint64_t spare = r.params.at("spare_bytes").get<uint64_t>();
  EXPECT_EQ(spare, 8ULL << 20);
  EXPECT_EQ(r.params.at("bytes").get<uint64_t>(),
            memory_probe_bytes(spare, measured_memory_rates(*devices[0]), memory_probe_time(Level::kQuick), 10));
  EXPECT_EQ(r.bytes, 10 * r.params.at("bytes").get<uint64_t>());
}

TEST(MemorySizing, ATimeBoxedProbeCoversThePrefixThatFitsWhatIsLeftOfItsBox) {
  // 1 GB/s and 4 bytes of traffic per byte left: 1 s fits 250 MB, in whole MiB.
  EXPECT_EQ(memory_prefix_bytes(1ULL << 30, 1.0, 1e9, 4), 238ULL << 20);
  EXPECT_EQ(memory_prefix_bytes(64ULL << 20, 1.0, 1e9, 4), 64ULL << 20);  // it all fits: never grows
  EXPECT_EQ(memory_prefix_bytes(1ULL << 30, -2.0, 1e9, 4), 1ULL << 20);   // the box is over: 1 MiB
  EXPECT_EQ(memory_prefix_bytes(1ULL << 30, 1e-9, 1e9, 4), 1ULL << 20);
  EXPECT_EQ(memory_prefix_bytes(1ULL << 30, 1.0, 0, 4), 1ULL << 30);  // no rate yet: as planned
}

// A device whose first fill takes longer than a quick probe's whole box (a node whose other jobs
// took its memory bandwidth once the probe was sized).
class SlowFirstFillDevice : public CpuDevice {
 public:
  SlowFirstFillDevice() : CpuDevice(0, {0}) {}
  void fill(DeviceBuffer& buf, size_t words, const Pattern& p) override {
    if (fills_++ == 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(memory_probe_time(Level::kQuick).passes_s + 0.5));
    CpuDevice::fill(buf, words, p);
  }

 private:
  int fills_ = 0;
};

// The probe ends its passes within its box (one operation over): the rest of its sequence runs on
// 1 MiB, and it passes on what it covered, reporting it; the rate it saw is kept for the next probe.
TEST(MemorySizing, AProbeSlowerThanItsRatesSaidShrinksToItsBoxAndPassesOnWhatItCovered) {
  const HostMemorySetting set("16M");
  SlowFirstFillDevice device;
  device.memory_rates() = Device::MemoryRates{1e15, 1e15};  // far faster than any device: sized to all it spares
  RunOptions o;
  o.seed = 1;
  const ProbeResult r = run_probe(*builtin_registry().find("mem.march_c"), device, o);
  ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
  EXPECT_EQ(r.params.at("planned_bytes").get<uint64_t>(), 16ULL << 20);
  EXPECT_EQ(r.params.at("bytes").get<uint64_t>(), 1ULL << 20);
  // The fill of all 16 MiB, then March C-'s five checks (four of them rewriting) of the 1 MiB prefix.
  EXPECT_EQ(r.bytes, (16ULL << 20) + 9 * (1ULL << 20));
  EXPECT_EQ(r.report.checked, 5 * (1ULL << 20) / 8);
  EXPECT_LT(device.memory_rates()->fill_bytes_per_s, 1e13);
  // An injected fault in the prefix is still caught: the shrunk sequence is whole.
  Injector injector(parse_injection_specs("model=bitflip,index=7"), 1, 0);
  o.injector = &injector;
  EXPECT_EQ(run_probe(*builtin_registry().find("mem.march_c"), device, o).outcome, Outcome::kFail);
}

// A CPU device whose allocations take at least `delay_s`: a stand-in for faulting in a large buffer.
class SlowAllocationDevice : public CpuDevice {
 public:
  explicit SlowAllocationDevice(double delay_s) : CpuDevice(0, {available_cores().front()}), delay_s_(delay_s) {}
  std::unique_ptr<DeviceBuffer> allocate(size_t bytes) override {
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s_));
    return CpuDevice::allocate(bytes);
  }

 private:
  double delay_s_;
};

// The allocation's overrun comes out of the passes: the box is over when they start, so the whole
// sequence runs on 1 MiB and passes on it. The allocation's rate is kept, so the next probe that
// needs a larger buffer sizes it from what this one saw; a probe that reuses the buffer gets the
// passes' time alone.
TEST(MemorySizing, AnAllocationSlowerThanItsBoxTakesTheRestFromThePasses) {
  const HostMemorySetting set("16M");
  // Slower than a quick probe's whole box, allocation and passes (faulting in memory on a node whose
  // other jobs took the cores once the probe was sized).
  const MemoryTime quick = memory_probe_time(Level::kQuick);
  const double delay_s = quick.allocate_s + quick.passes_s + 0.5;
  SlowAllocationDevice device(delay_s);
  device.memory_rates() = Device::MemoryRates{1e15, 1e15};  // sized to all it spares
  RunOptions o;
  o.seed = 1;
  const ProbeResult r = run_probe(*builtin_registry().find("mem.march_c"), device, o);
  ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
  EXPECT_DOUBLE_EQ(r.params.at("time_box_s").get<double>(), quick.allocate_s + quick.passes_s);
  EXPECT_EQ(r.params.at("planned_bytes").get<uint64_t>(), 16ULL << 20);
  EXPECT_EQ(r.params.at("bytes").get<uint64_t>(), 1ULL << 20);
  EXPECT_EQ(r.bytes, 10 * (1ULL << 20));  // March C-: a fill and five checks, four rewriting
  EXPECT_EQ(r.report.checked, 5 * (1ULL << 20) / 8);
  EXPECT_LE(device.memory_rates()->allocate_bytes_per_s, double(16ULL << 20) / delay_s);
  const ProbeResult reused = run_probe(*builtin_registry().find("mem.own_address"), device, o);
  ASSERT_EQ(reused.outcome, Outcome::kPass) << reused.reason;
  EXPECT_DOUBLE_EQ(reused.params.at("time_box_s").get<double>(), quick.passes_s);
}

TEST(MemorySizing, EachResultReportsTheFractionOfMemoryTested) {
  auto devices = make_cpu_devices(1);
  RunOptions o;
  o.seed = 1;
  o.size_bytes = 1 << 20;
  o.iterations = 1;
  const ProbeResult r = run_probe(*builtin_registry().find("mem.own_address"), *devices[0], o);
  ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
  EXPECT_DOUBLE_EQ(r.params.at("memory_fraction").get<double>(),
                   double(1 << 20) / double(devices[0]->identity().memory_bytes));
}

TEST(SizeOption, SizesMemoryProbesOnly) {
  auto devices = make_cpu_devices(1);
  RunOptions plain;
  plain.seed = 1;
  plain.iterations = 2;
  RunOptions sized = plain;
  sized.size_bytes = 1 << 20;
  for (const char* id : {"gemm.exact.fp32", "sfu.transcendental"}) {
    const ProbeResult a = run_probe(*builtin_registry().find(id), *devices[0], plain);
    const ProbeResult b = run_probe(*builtin_registry().find(id), *devices[0], sized);
    ASSERT_EQ(b.outcome, Outcome::kPass) << id << ": " << b.reason;
    EXPECT_EQ(a.params.value("n", 0), b.params.value("n", 0)) << id;
    EXPECT_EQ(a.params.value("elements_per_function", 0), b.params.value("elements_per_function", 0)) << id;
  }
  const ProbeResult mem = run_probe(*builtin_registry().find("mem.own_address"), *devices[0], sized);
  EXPECT_EQ(mem.params.at("bytes").get<uint64_t>(), 1u << 20);
}

// The rate a memory probe reports is its passes' own: allocating its buffer is setup.
// write_and_check fuses each check with the next pattern's fill: the same bytes as separate fills
// and checks, every pattern checked, no false alarm, and the buffer left holding the last pattern.
TEST(MemoryTest, WriteAndCheckChecksEveryPatternAndCountsItsBytes) {
  auto devices = make_cpu_devices(1);
  Device& device = *devices[0];
  ProbeContext ctx{device,       0,     Level::kQuick, uint64_t{1} << 16, std::nullopt, std::nullopt,
                   std::nullopt, false, std::nullopt,  std::nullopt};
  ProbeResult result;
  MemoryTest mem(ctx, result, 8);
  const std::vector<Pattern> sequence = {{PatternKind::kWalkingOnes, 5, 0, false},
                                         {PatternKind::kSolid, 0, 0, true},
                                         {PatternKind::kModulo20, 2, 9, false},
                                         {PatternKind::kRandomBlocks, 9, 4, true}};
  mem.write_and_check(sequence);
  const uint64_t words = mem.words();
  EXPECT_EQ(result.report.mismatches, 0u);
  EXPECT_EQ(result.report.checked, words * sequence.size());
  EXPECT_EQ(result.bytes, 8 * words * (1 + 2 * (sequence.size() - 1) + 1));
  DeviceBuffer& buffer = device.scratch(words * 8);
  EXPECT_EQ(device.verify(buffer, words, sequence.back(), nullptr, Direction::kUp).mismatches, 0u);
  EXPECT_GT(device.verify(buffer, words, sequence.front(), nullptr, Direction::kUp).mismatches, 0u);
}

TEST(MemorySizing, AllocatingTheBufferIsSetupOutsideTheRate) {
  const double delay_s = 0.2;
  SlowAllocationDevice device(delay_s);
  RunOptions o;
  o.seed = 1;
  o.size_bytes = 1 << 20;
  o.iterations = 1;
  const ProbeResult r = run_probe(*builtin_registry().find("mem.march_c"), device, o);
  ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
  EXPECT_GE(r.setup_s, delay_s);
  EXPECT_LE(r.setup_s, r.duration_s);
  EXPECT_EQ(to_json(r).at("setup_s").get<double>(), r.setup_s);
  ProbeResult timed = r;
  timed.duration_s = 3;
  timed.setup_s = 1;
  timed.bytes = 8'000'000'000;
  EXPECT_EQ(rate_text(timed), "4.00 GB/s");  // over the 2 s of passes, not the 3 s in all
}

TEST(CpuDevice, AnAllocationTooLargeToRoundUpFailsCleanly) {
  auto devices = make_cpu_devices(1);
  EXPECT_THROW(devices[0]->allocate(~size_t{0}), std::bad_alloc);
  EXPECT_THROW(devices[0]->allocate(~size_t{0} - 62), std::bad_alloc);
}

}  // namespace
}  // namespace sdc
