#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "scheduler/inline/inline_probe.hpp"

namespace sdc {
namespace {

TEST(Cadence, PlannerOptimumWhenTheBudgetAllowsIt) {
  // 1 s steps, 0.1 s probes, one SDC per 100 device-days: the optimum sqrt(c / lambda) is about
  // 9,295 s, far above the 10 steps the 1% budget requires.
  const double lambda = 0.01 / 86400.0;
  const int64_t every = choose_probe_every(1.0, 0.1, 0.01, 0.01);
  EXPECT_EQ(every, static_cast<int64_t>(std::ceil(std::sqrt(0.1 / lambda))));
}

TEST(Cadence, NeverExceedsTheBudget) {
  // A fleet with frequent SDC wants frequent probes, but 50 ms probes on 100 ms steps within a 1%
  // budget need at least 50 steps between probes; the margin makes it 56.
  const int64_t every = choose_probe_every(0.1, 0.05, 1000.0, 0.01);
  EXPECT_EQ(every, static_cast<int64_t>(std::ceil(0.05 / (kBudgetMargin * 0.01 * 0.1))));
  EXPECT_LE(0.05 / (every * 0.1), 0.01);
  EXPECT_GE(0.05 / (every * 0.1), 0.85 * 0.01);
}

// A job of N ranks that all probe at the same step has N times one device's SDC rate, so the
// planner's optimum is sqrt(N) times shorter; the budget's bound (one probe time per probe) is not.
// The step and probe of a 1B-parameter model on an H200: 100 ms steps, a 28.75 ms probe.
TEST(Cadence, JobOfNRanksProbesSqrtNTimesMoreOften) {
  const double lambda = kDefaultSdcRatePerDeviceDay / 86400.0;
  const std::map<int64_t, int64_t> expected = {{1, 191'385}, {8, 67'665}, {1024, 5'981}};
  for (const auto& [ranks, steps] : expected) {
    const int64_t every = choose_probe_every(0.1, 0.02875, kDefaultSdcRatePerDeviceDay, 0.01, ranks);
    EXPECT_EQ(every, static_cast<int64_t>(std::ceil(std::sqrt(0.02875 / (lambda * ranks)) / 0.1))) << ranks;
    EXPECT_EQ(every, steps) << ranks;
  }
  EXPECT_EQ(choose_probe_every(0.1, 0.02875, kDefaultSdcRatePerDeviceDay, 0.01),
            choose_probe_every(0.1, 0.02875, kDefaultSdcRatePerDeviceDay, 0.01, 1));
  // The budget bound stays one probe per 0.05 / (0.9 * 0.01 * 0.1) steps at any N.
  for (int64_t ranks : {1, 8, 1024}) {
    EXPECT_EQ(choose_probe_every(0.1, 0.05, 1000.0, 0.01, ranks),
              static_cast<int64_t>(std::ceil(0.05 / (kBudgetMargin * 0.01 * 0.1))))
        << ranks;
  }
  EXPECT_THROW(choose_probe_every(0.1, 0.02875, kDefaultSdcRatePerDeviceDay, 0.01, 0), std::invalid_argument);
}

// The cadence line says N.
TEST(Cadence, TheCadenceLineNamesTheJobsRanks) {
  InlineConfig c;
  c.backend = "cpu";
  c.probes = {"alu.int64"};
  c.ranks = 1024;
  c.seed = 5;
  InlineProbe probe(c);
  for (int64_t step = 0; step <= kCalibrationSteps + 1; ++step) probe.step(step, nullptr);
  probe.finish();
  const std::string cadence = probe.verdict().value("cadence", "");
  EXPECT_NE(cadence.find("on 1024 ranks"), std::string::npos) << probe.verdict().dump();
}

TEST(Cadence, DefaultRateComesFromPublishedFleetData) {
  EXPECT_NEAR(kDefaultSdcRatePerDeviceDay, 6.0 / (54.0 * 16384.0), 1e-15);
  EXPECT_THROW(choose_probe_every(0, 0.1, 1, 0.01), std::invalid_argument);
}

// Inside a training process a GEMM probe runs at the inline working set (n = 1024 for bf16 and for
// random fp8, whose reference shares the set; 2048 for exact fp8), not at a level's size (8192 on a
// GPU; 256 for a CPU's quick level, which the inline probe runs).
TEST(InlineSizing, GemmProbesRunAtTheInlineWorkingSet) {
  InlineConfig c;
  c.backend = "cpu";
  c.probes = {"gemm.random.bf16", "gemm.random.e4m3", "gemm.exact.e4m3"};
  c.every = 1000;
  c.seed = 5;
  InlineProbe probe(c);
  const nlohmann::json results = probe.verdict()["results"];
  ASSERT_EQ(results.size(), 3u);
  std::map<std::string, int> n;
  for (const auto& r : results) {
    EXPECT_EQ(r["outcome"], "pass") << r.dump();
    n[r["probe"].get<std::string>()] = r["params"]["n"].get<int>();
  }
  EXPECT_EQ(n["gemm.random.bf16"], 1024);
  EXPECT_EQ(n["gemm.random.e4m3"], 1024);
  EXPECT_EQ(n["gemm.exact.e4m3"], 2048);
}

TEST(Cadence, ARateThatUnderflowsToZeroPerSecondHasNoFiniteOptimum) {
  // 1e-320 per device-day is 0 per second in doubles: one rank's interval is the cap, never the
  // budget's bound, so that more ranks never probe less often than one (found by inline_abi_fuzzer).
  const int64_t one = choose_probe_every(0.1, 0.01, 1e-320, 0.01, 1);
  EXPECT_EQ(one, int64_t{1000000000000000});
  EXPECT_LE(choose_probe_every(0.1, 0.01, 1e-320, 0.01, int64_t{1} << 20), one);
}

}  // namespace
}  // namespace sdc
