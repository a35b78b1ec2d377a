// Every probe passes clean on the CPU backend and fails under an injected fault, naming the
// element, bit and device.
#include <gtest/gtest.h>

#include <algorithm>
#include <new>

#include "host/backend.hpp"
#include "host/cpu_device.hpp"
#include "probes/memory_test.hpp"
#include "scheduler/catalogue.hpp"
#include "scheduler/runner.hpp"

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

}  // namespace
}  // namespace sdc

namespace sdc {
namespace {

// A CPU device with a fixed amount of memory, of which the scratch buffer it holds is in use.
class SmallMemoryDevice : public CpuDevice {
 public:
  SmallMemoryDevice() : CpuDevice(0, {0}) {}
  uint64_t free_memory_bytes() const override { return (64ULL << 20) - scratch_bytes(); }
};

TEST(MemorySizing, TheScratchBufferAlreadyHeldCountsAsFree) {
  SmallMemoryDevice device;
  const uint64_t first = default_memory_bytes(device, Level::kStandard);
  EXPECT_EQ(first, 32ULL << 20);  // half of the free 64 MiB
  device.scratch(first);          // the first probe's buffer, kept for the next one
  EXPECT_EQ(default_memory_bytes(device, Level::kStandard), first);
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

TEST(CpuDevice, AnAllocationTooLargeToRoundUpFailsCleanly) {
  auto devices = make_cpu_devices(1);
  EXPECT_THROW(devices[0]->allocate(~size_t{0}), std::bad_alloc);
  EXPECT_THROW(devices[0]->allocate(~size_t{0} - 62), std::bad_alloc);
}

}  // namespace
}  // namespace sdc
