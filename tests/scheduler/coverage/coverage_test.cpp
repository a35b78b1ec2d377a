#include <gtest/gtest.h>

#include <set>

#include "host/backend.hpp"
#include "scheduler/coverage/coverage.hpp"

namespace sdc {
namespace {

TEST(ClopperPearson, MatchesPublishedValues) {
  // Exact intervals from the beta quantiles: 0 of 10 -> [0, 0.3085]; 10 of 10 -> [0.6915, 1];
  // 5 of 10 -> [0.1871, 0.8129]; 3000 of 3000 -> lower 0.99877.
  auto [lo, hi] = clopper_pearson(0, 10);
  EXPECT_DOUBLE_EQ(lo, 0.0);
  EXPECT_NEAR(hi, 0.30850, 1e-4);
  std::tie(lo, hi) = clopper_pearson(10, 10);
  EXPECT_NEAR(lo, 0.69150, 1e-4);
  EXPECT_DOUBLE_EQ(hi, 1.0);
  std::tie(lo, hi) = clopper_pearson(5, 10);
  EXPECT_NEAR(lo, 0.18709, 1e-4);
  EXPECT_NEAR(hi, 0.81291, 1e-4);
  std::tie(lo, hi) = clopper_pearson(3000, 3000);
  EXPECT_NEAR(lo, 1 - 0.001229, 2e-5);
  EXPECT_THROW(clopper_pearson(1, 0), std::invalid_argument);
}

// The small campaign CI runs: every changed output of an exact probe is detected, and no clean run
// alarms. A regression in any probe's verification or in the injector fails it.
TEST(Coverage, SmallCampaignCatchesEveryExactFlipAndNoCleanRunAlarms) {
  auto devices = make_cpu_devices(1);
  CoverageOptions options;
  options.trials = 340;  // round robin: about six per probe of the catalogue
  options.clean_runs = 2;
  options.seed = 2026;
  const CoverageReport report = run_coverage(*devices[0], options);
  const CoverageCounts exact = report.totals(false);
  EXPECT_GT(exact.changed, 150u);
  EXPECT_EQ(exact.missed, 0u);
  EXPECT_EQ(exact.detected, exact.changed);
  EXPECT_EQ(report.false_positives, 0u) << ::testing::PrintToString(report.false_positive_probes);
  EXPECT_GE(report.clean_runs, 2 * report.bounded.size());
  EXPECT_EQ(report.exit_code(), 0);
  // Every model was exercised.
  std::set<std::string> models;
  for (const auto& [key, c] : report.cells) models.insert(std::get<2>(key));
  EXPECT_EQ(models, (std::set<std::string>{"bitflip", "lane", "multibit", "random", "stuck"}));
}

// --gemm-n and --gemm-bounds cuda: the CPU runs a GEMM probe at the given size with the GPU's
// bounds, and the clean runs' figures are published. Random fp8 is checked per element (tile 1)
// against its exact reference; the GPU's chunked model is the looser, so its detectable change is
// the larger, and both stay under 2x the rms of C.
TEST(Coverage, GemmProbesRunAtTheGivenSizeWithTheGpusTiles) {
  auto devices = make_cpu_devices(1);
  CoverageOptions options;
  options.probes = {"gemm.random.e4m3"};
  options.trials = 0;
  options.clean_runs = 2;
  options.gemm_n = 512;
  double detectable[2] = {0, 0};
  for (const bool cuda : {true, false}) {
    options.gemm_cuda_model = cuda;
    const CoverageReport report = run_coverage(*devices[0], options);
    EXPECT_EQ(report.false_positives, 0u);
    ASSERT_EQ(report.gemm_bounds.count("gemm.random.e4m3"), 1u);
    const GemmBoundStats& g = report.gemm_bounds.at("gemm.random.e4m3");
    EXPECT_EQ(g.n, 512u);
    EXPECT_EQ(g.k, 512u);
    EXPECT_EQ(g.runs, 2u);
    EXPECT_EQ(g.tile, 1u);
    EXPECT_LT(g.max_ratio, 1.0);
    EXPECT_GT(g.detectable_multiple, 0.0);
    EXPECT_LT(g.detectable_multiple, 2.0);
    detectable[cuda ? 1 : 0] = g.detectable_multiple;
    const std::string md = coverage_markdown(report, "test");
    EXPECT_NE(md.find("| gemm.random.e4m3 | 512 | 512 | " + std::to_string(g.tile) + " | 2 |"), std::string::npos)
        << md;
  }
  EXPECT_GT(detectable[1], 2 * detectable[0]);
}

TEST(Coverage, MaskedFaultsAreNotCountedAsChanged) {
  // A stuck-at-1 bit on words written all-ones changes nothing until the inverse is written.
  auto devices = make_cpu_devices(1);
  CoverageOptions options;
  options.probes = {"mem.own_address"};
  options.models = {FaultModel::kStuck};
  options.trials = 40;
  const CoverageReport report = run_coverage(*devices[0], options);
  const CoverageCounts t = report.totals(false);
  EXPECT_EQ(t.injected, 40u);
  EXPECT_LT(t.changed, t.injected);  // transient stuck bits that matched what was written
  EXPECT_EQ(t.changed, t.detected);
  EXPECT_EQ(t.missed, 0u);
}

TEST(Coverage, ReportsAreReproducibleFromTheSeed) {
  auto devices = make_cpu_devices(1);
  CoverageOptions options;
  options.probes = {"alu.*"};
  options.trials = 40;
  options.seed = 9;
  const auto a = coverage_json(run_coverage(*devices[0], options));
  const auto b = coverage_json(run_coverage(*devices[0], options));
  EXPECT_EQ(a["cells"], b["cells"]);
  const std::string md = coverage_markdown(run_coverage(*devices[0], options), "sdcprobe coverage --seed 9");
  EXPECT_NE(md.find("sdcprobe coverage --seed 9"), std::string::npos);
  EXPECT_NE(md.find("| alu.fma32 | fp32 |"), std::string::npos);
}

}  // namespace
}  // namespace sdc
