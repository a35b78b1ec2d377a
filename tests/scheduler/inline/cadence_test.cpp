#include <gtest/gtest.h>

#include <cmath>

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

TEST(Cadence, DefaultRateComesFromPublishedFleetData) {
  EXPECT_NEAR(kDefaultSdcRatePerDeviceDay, 6.0 / (54.0 * 16384.0), 1e-15);
  EXPECT_THROW(choose_probe_every(0, 0.1, 1, 0.01), std::invalid_argument);
}

// Inside a training process a GEMM probe runs at the inline working set (n = 1024 for bf16), not
// at a level's size (8192 on a GPU; 256 for a CPU's quick level, which the inline probe runs).
TEST(InlineSizing, GemmProbesRunAtTheInlineWorkingSet) {
  InlineConfig c;
  c.backend = "cpu";
  c.probes = {"gemm.random.bf16"};
  c.every = 1000;
  c.seed = 5;
  InlineProbe probe(c);
  const nlohmann::json results = probe.verdict()["results"];
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["outcome"], "pass");
  EXPECT_EQ(results[0]["params"]["n"], 1024);
}

}  // namespace
}  // namespace sdc
