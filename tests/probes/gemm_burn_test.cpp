// The check at speed and gemm.burn.* on the CPU backend: the reference of random inputs is computed
// once per input set; a wrong element planted in the first, a middle or the last GEMM of a burn (and
// of gemm.repeat) is caught and located, naming the GEMM, the second and the conditions; a clean
// burn raises no alarm, reports its checked rate and says the CPU has no conditions to read; a burn
// that never reached the power limit or the maximum clock under load says so, however high they
// were before the load.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "host/backend.hpp"
#include "host/gemm.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {
namespace {

BurnConditions conditions(double power_w, double clock_mhz) {
  BurnConditions c;
  c.temperature_c = 71;
  c.sm_clock_mhz = clock_mhz;
  c.max_sm_clock_mhz = 1980;
  c.power_w = power_w;
  c.power_limit_w = 700;
  c.default_power_limit_w = 700;
  c.clock_event_reasons = kClockEventSwPowerCap;
  return c;
}

// A stand-in for NVML: fixed conditions.
ConditionsSource fixed_conditions(double power_w, double clock_mhz) {
  const BurnConditions c = conditions(power_w, clock_mhz);
  return {[c] { return c; }, ""};
}

RunOptions burn_options(uint64_t seed, uint32_t gemms) {
  RunOptions o;
  o.seed = seed;
  o.compute_bytes = uint64_t{128} * 128 * 18;  // n = 128
  o.burn_s = 600;                              // ended by the GEMM count
  o.iterations = gemms;
  return o;
}

TEST(GemmCheckAtSpeed, TheReferenceIsComputedOncePerInputSet) {
  auto devices = make_cpu_devices(1);
  GemmEngine& engine = *devices[0]->gemm();
  GemmSpec spec;
  spec.m = spec.n = spec.k = 128;
  spec.seed = 5;
  const GemmRun first = engine.run(spec);
  EXPECT_FALSE(first.inputs_reused);
  EXPECT_GT(first.reference_s, 0.0);
  const GemmRun again = engine.run(spec);
  EXPECT_TRUE(again.inputs_reused);
  EXPECT_EQ(again.reference_s, 0.0);
  EXPECT_EQ(again.report.mismatches, 0u);
  EXPECT_EQ(again.max_ratio, first.max_ratio);  // the same inputs, the same check
  spec.seed = 6;                                // new inputs: a new reference
  const GemmRun other = engine.run(spec);
  EXPECT_FALSE(other.inputs_reused);
  EXPECT_GT(other.reference_s, 0.0);
}

// One element of C wrong by 2 rms(C) in GEMM `at` only: caught in that GEMM and located.
class PlantedInGemm : public ::testing::TestWithParam<uint32_t> {};

TEST_P(PlantedInGemm, BurnCatchesAndLocatesItNamingTheGemmAndConditions) {
  const uint32_t at = GetParam(), n = 128, row = 9, col = 70;
  auto devices = make_cpu_devices(1);
  // bit 30 of an fp32 in [-64, 64] multiplies it by 2^128 or makes it tiny: far beyond 2 rms(C).
  Injector inj(parse_injection_specs("model=bitflip,bit=30,mode=transient,after=" + std::to_string(at) +
                                     ",index=" + std::to_string(row * n + col)),
               1);
  RunOptions o = burn_options(3, 5);
  o.injector = &inj;
  o.burn_conditions = fixed_conditions(650, 1755);
  const ProbeResult r = run_probe(*builtin_registry().find("gemm.burn.fp32"), *devices[0], o);
  ASSERT_EQ(r.outcome, Outcome::kFail) << r.reason;
  EXPECT_EQ(r.params["gemms"].get<uint64_t>(), 5u);
  EXPECT_EQ(r.report.mismatches, 1u);
  ASSERT_EQ(r.report.records.size(), 1u);
  EXPECT_EQ(r.report.records[0].index / n, row);
  EXPECT_EQ(r.report.records[0].index % n, col);
  const auto& wrong = r.params["wrong_results"];
  ASSERT_EQ(wrong.size(), 1u);
  EXPECT_EQ(wrong[0]["gemm"].get<uint32_t>(), at);
  EXPECT_EQ(wrong[0]["first_index"].get<uint64_t>(), uint64_t{row} * n + col);
  EXPECT_EQ(wrong[0]["phase"], "sustained");
  EXPECT_TRUE(wrong[0].contains("second"));
  EXPECT_EQ(wrong[0]["conditions"]["temperature_c"].get<double>(), 71.0);
  EXPECT_EQ(wrong[0]["conditions"]["sm_clock_mhz"].get<double>(), 1755.0);
  EXPECT_EQ(r.params["checked_tflops"].get<double>() > 0, true);
}

TEST_P(PlantedInGemm, RepeatCatchesAndLocatesItInThatRepeat) {
  const uint32_t at = GetParam(), n = 128, row = 100, col = 3;
  auto devices = make_cpu_devices(1);
  Injector inj(parse_injection_specs("model=bitflip,bit=30,mode=transient,after=" + std::to_string(at) +
                                     ",index=" + std::to_string(row * n + col)),
               1);
  RunOptions o;
  o.seed = 8;
  o.compute_bytes = uint64_t{n} * n * 18;
  o.iterations = 5;
  o.injector = &inj;
  const ProbeResult r = run_probe(*builtin_registry().find("gemm.repeat.bf16"), *devices[0], o);
  ASSERT_EQ(r.outcome, Outcome::kFail);
  EXPECT_EQ(r.report.mismatches, 1u);
  ASSERT_EQ(r.report.records.size(), 1u);
  EXPECT_EQ(r.report.records[0].index, uint64_t{row} * n + col);
  // Caught by its check (above tau), not only by the digests.
  EXPECT_GT(r.params["flagged_checks"].get<uint64_t>(), 0u);
  EXPECT_NE(r.params["digests"][at], r.params["digests"][at == 0 ? 1 : 0]);
}

INSTANTIATE_TEST_SUITE_P(FirstMiddleLast, PlantedInGemm, ::testing::Values(0u, 2u, 4u));

// The smallest wrong element every GEMM of a burn must catch: 2 rms(C) (its check's detectable error).
TEST(GemmBurn, EveryGemmIsSureToCatchAWrongElementOfTwiceTheRms) {
  auto devices = make_cpu_devices(1);
  RunOptions o = burn_options(4, 4);
  const ProbeResult clean = run_probe(*builtin_registry().find("gemm.burn.fp32"), *devices[0], o);
  ASSERT_EQ(clean.outcome, Outcome::kPass);
  EXPECT_LT(clean.params["detectable_multiple"].get<double>(), 2.0);
  EXPECT_LT(clean.params["max_ratio"].get<double>(), 1.0);
}

// The first GEMM generates the inputs and their check's reference, once: the checked rate leaves
// both out, so the phases' busy time and both fit in the burn's elapsed time.
TEST(GemmBurn, TheCheckedRateLeavesOutTheInputsAndTheirReference) {
  auto devices = make_cpu_devices(1);
  RunOptions o = burn_options(7, 1);
  o.compute_bytes = uint64_t{512} * 512 * 18;  // n = 512: generation takes far longer than the loop's bookkeeping
  const ProbeResult r = run_probe(*builtin_registry().find("gemm.burn.fp32"), *devices[0], o);
  ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
  ASSERT_EQ(r.params.at("n").get<uint32_t>(), 512u);
  const double generate_s = r.params.at("generate_s").get<double>();
  const double reference_s = r.params.at("reference_s").get<double>();
  EXPECT_GT(generate_s, 0.0);
  EXPECT_GT(reference_s, 0.0);
  const double busy_s =
      r.params.at("sustained").at("busy_s").get<double>() + r.params.at("pulsed").at("busy_s").get<double>();
  EXPECT_GT(busy_s, 0.0);
  EXPECT_LE(busy_s + generate_s + reference_s, r.params.at("elapsed_s").get<double>());
}

TEST(GemmBurn, CleanBurnPassesBothPhasesAndSaysTheCpuHasNoConditions) {
  auto devices = make_cpu_devices(1);
  RunOptions o;
  o.seed = 2;
  o.compute_bytes = uint64_t{64} * 64 * 18;
  o.burn_s = 1.2;  // 0.8 s sustained, then a pulsed period (0.5 s load, 0.5 s idle) cut at 1.2 s
  const ProbeResult r = run_probe(*builtin_registry().find("gemm.burn.fp32"), *devices[0], o);
  ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
  EXPECT_EQ(r.report.mismatches, 0u);
  EXPECT_GT(r.params["sustained"]["gemms"].get<uint64_t>(), 0u);
  EXPECT_GT(r.params["pulsed"]["gemms"].get<uint64_t>(), 0u);
  EXPECT_EQ(r.params["gemms"].get<uint64_t>(),
            r.params["sustained"]["gemms"].get<uint64_t>() + r.params["pulsed"]["gemms"].get<uint64_t>());
  EXPECT_EQ(r.report.checked, r.params["gemms"].get<uint64_t>() * 64 * 64);
  EXPECT_GE(r.params["elapsed_s"].get<double>(), 1.2);
  EXPECT_LT(r.params["max_ratio"].get<double>(), 1.0);
  EXPECT_GT(r.params["checked_tflops"].get<double>(), 0.0);
  EXPECT_EQ(r.params["conditions"].get<std::string>().rfind("unavailable: ", 0), 0u);
  EXPECT_FALSE(r.params.contains("samples"));
  EXPECT_FALSE(r.params.contains("reached_load"));
}

TEST(GemmBurn, SamplesEachSecondAndSaysWhenItNeverReachedTheLimitOrTheClock) {
  auto devices = make_cpu_devices(1);
  RunOptions o;
  o.seed = 2;
  o.compute_bytes = uint64_t{64} * 64 * 18;
  o.burn_s = 2.1;
  o.burn_conditions = fixed_conditions(200, 1000);  // 29% of 700 W, 51% of 1980 MHz
  const ProbeResult low = run_probe(*builtin_registry().find("gemm.burn.fp32"), *devices[0], o);
  ASSERT_EQ(low.outcome, Outcome::kPass);
  EXPECT_EQ(low.params["conditions"], "sampled");
  const auto& samples = low.params["samples"];
  ASSERT_GE(samples.size(), 3u);  // the start, then seconds 1 and 2
  EXPECT_EQ(samples[0]["second"].get<int>(), 0);
  EXPECT_EQ(samples.back()["second"].get<int>(), 2);
  EXPECT_EQ(samples[1]["clock_event_reasons"][0], "sw_power_cap");
  EXPECT_FALSE(low.params["reached_load"].get<bool>());
  EXPECT_NE(low.params["load_note"].get<std::string>().find("never reached the power limit"), std::string::npos);
  RunReport report;
  report.results.push_back(low);
  EXPECT_NE(results_table(report).find("note: never reached the power limit"), std::string::npos);

  o.burn_s = 1.2;  // a sample under load at second 1
  o.burn_conditions = fixed_conditions(690, 1500);
  const ProbeResult full = run_probe(*builtin_registry().find("gemm.burn.fp32"), *devices[0], o);
  EXPECT_TRUE(full.params["reached_load"].get<bool>());
  EXPECT_FALSE(full.params.contains("load_note"));

  // Neither power nor clock answered: unknown, never "reached" or "not reached".
  o.burn_conditions = fixed_conditions(NAN, NAN);
  const ProbeResult unread = run_probe(*builtin_registry().find("gemm.burn.fp32"), *devices[0], o);
  EXPECT_TRUE(unread.params["reached_load"].is_null());
  EXPECT_NE(unread.params["load_note"].get<std::string>().find("unknown"), std::string::npos);
  EXPECT_NE(unread.params["samples"][0].dump().find("\"power_w\":null"), std::string::npos);  // in the report
}

TEST(GemmBurn, JudgesTheLoadFromTheSamplesUnderLoadOnly) {
  // The GPU still boosts at the sample before the first GEMM; under load it runs at half its
  // maximum clock and half its power limit: a throttled burn, whatever the first sample says.
  auto devices = make_cpu_devices(1);
  RunOptions o;
  o.seed = 2;
  o.compute_bytes = uint64_t{64} * 64 * 18;
  o.burn_s = 1.2;  // the start, then second 1 in the pulse's load half (0.8-1.3 s)
  auto calls = std::make_shared<int>(0);
  o.burn_conditions =
      ConditionsSource{[calls] { return (*calls)++ == 0 ? conditions(700, 1980) : conditions(350, 990); }, ""};
  const ProbeResult r = run_probe(*builtin_registry().find("gemm.burn.fp32"), *devices[0], o);
  ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
  EXPECT_FALSE(r.params.at("reached_load").get<bool>());
  EXPECT_DOUBLE_EQ(r.params.at("max_power_fraction").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r.params.at("max_sm_clock_fraction").get<double>(), 0.5);
  EXPECT_NE(r.params.at("load_note").get<std::string>().find("never reached the power limit (at most 50% of 700 W)"),
            std::string::npos);
  const auto& samples = r.params.at("samples");
  ASSERT_GE(samples.size(), 2u);
  EXPECT_EQ(samples[0].at("sm_clock_mhz").get<double>(), 1980);  // the boost is recorded, not judged
  EXPECT_FALSE(samples[0].at("under_load").get<bool>());
  EXPECT_TRUE(samples[1].at("under_load").get<bool>());
  EXPECT_EQ(r.params.at("samples_under_load").get<uint64_t>(), 1u);
}

TEST(GemmBurn, StandardAndLongBurnOneTypePerDeviceQuickNone) {
  auto devices = make_cpu_devices(1);
  const DeviceIdentity& cpu = devices[0]->identity();
  const Probe& fp32 = *builtin_registry().find("gemm.burn.fp32");
  EXPECT_FALSE(fp32.included_at(Level::kQuick, cpu));
  EXPECT_TRUE(fp32.included_at(Level::kStandard, cpu));
  EXPECT_TRUE(fp32.included_at(Level::kLong, cpu));
  EXPECT_FALSE(builtin_registry().find("gemm.burn.bf16")->included_at(Level::kStandard, cpu));
  DeviceIdentity h200;
  h200.backend = "cuda";
  h200.compute_capability = "9.0";
  EXPECT_TRUE(builtin_registry().find("gemm.burn.bf16")->included_at(Level::kStandard, h200));
  EXPECT_FALSE(fp32.included_at(Level::kStandard, h200));
  DeviceIdentity v100 = h200;
  v100.compute_capability = "7.0";
  EXPECT_TRUE(fp32.included_at(Level::kLong, v100));
}

}  // namespace
}  // namespace sdc
