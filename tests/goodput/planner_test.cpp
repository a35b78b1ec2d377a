// The planner's closed forms against numbers published with them, and the Monte Carlo against the
// closed forms.
#include <gtest/gtest.h>

#include <cmath>

#include "goodput/planner.hpp"

namespace sdc::goodput {
namespace {

constexpr double kMinute = 60, kHour = 3600;

// Daly (2006), Future Generation Computer Systems 22(3):303-312, figures 3-5: with dump time
// delta = 5 min and restart R = 10 min, the higher-order model predicts tau_opt = 117 min for
// M = 24 h, 57 min for M = 6 h and 9.1 min for M = 15 min.
TEST(GoodputPlanner, DalyMatchesPublishedOptima) {
  EXPECT_NEAR(daly_interval(5 * kMinute, 24 * kHour) / kMinute, 117, 0.5);
  EXPECT_NEAR(daly_interval(5 * kMinute, 6 * kHour) / kMinute, 57, 0.5);
  EXPECT_NEAR(daly_interval(5 * kMinute, 15 * kMinute) / kMinute, 9.1, 0.05);
  // Beyond delta >= 2M Daly's estimate is M itself.
  EXPECT_EQ(daly_interval(3 * kHour, 1 * kHour), 1 * kHour);
}

// Young (1974), Communications of the ACM 17(9): tau = sqrt(2 delta M); for Daly's case above
// (delta = 5 min, M = 24 h) that is 120 min, the first-order value Daly's 117 min refines.
TEST(GoodputPlanner, YoungFirstOrder) {
  EXPECT_DOUBLE_EQ(young_interval(5 * kMinute, 24 * kHour), 120 * kMinute);
  EXPECT_NEAR(young_interval(5 * kMinute, 6 * kHour) / kMinute, 60, 1e-9);
}

// Llama 3 (Dubey et al. 2024, section 3.3.4): 419 unexpected interruptions in a 54-day snapshot on
// 16,384 GPUs, i.e. one every ~3.1 hours. The planner's default rate reproduces that.
TEST(GoodputPlanner, LlamaThreeFailureRate) {
  PlanParams p;
  p.trials = 0;
  const PlanResult r = plan(p);
  EXPECT_NEAR(r.job_failures_per_day * 54, 419, 1e-9);
  EXPECT_NEAR(r.mttf_s / kHour, 54.0 * 24.0 / 419.0, 1e-9);  // 3.093 h
}

// Kokolis et al. (2024) project the mean time to failure of a job as 1 / (nodes x r_f); with RSC-1's
// 6.50 failures per 1,000 node-days that is ~1.8 h for 16,384 GPUs and ~0.23 h for 131,072 GPUs
// (their figures as recalled; see docs/goodput.md).
TEST(GoodputPlanner, MetaMttfProjection) {
  PlanParams p;
  p.trials = 0;
  p.failure_rate = 6.5e-3;
  p.nodes = 16384 / 8;
  EXPECT_NEAR(plan(p).mttf_s / kHour, 1.8, 0.05);
  p.nodes = 131072 / 8;
  EXPECT_NEAR(plan(p).mttf_s / kHour, 0.23, 0.01);
}

// The ETTR model term by term: 1 - lambda (u0 + T/2) - delta/(T + delta).
TEST(GoodputPlanner, MetaEttrModel) {
  const double lambda = 1.0 / (3 * kHour);  // one failure per 3 h
  // u0 = 10 min, T = 30 min, delta = 30 s: 1 - (600 + 900)/10800 - 30/1830 = 0.84473...
  EXPECT_NEAR(meta_ettr(lambda, 600, 1800, 30), 1.0 - 1500.0 / 10800.0 - 30.0 / 1830.0, 1e-12);
  EXPECT_EQ(meta_ettr(1.0, 600, 1800, 30), 0.0);  // clamped
  // SDC: each one costs u0 + P + T/2 of rework; probes cost c/P.
  const double sdc = 1.0 / (100 * kHour);
  EXPECT_NEAR(planned_ettr(lambda, sdc, 600, 1800, 30, 1, 600),
              meta_ettr(lambda, 600, 1800, 30) - sdc * (600 + 600 + 900) - 1.0 / 600, 1e-12);
}

// Check before commit: the rollback goes to the newest commit, T/2 + min(P, T)/2, and a check before
// each save costs c unless the cadence falls on the saves.
TEST(GoodputPlanner, CheckBeforeCommit) {
  const double lambda = 1.0 / (3 * kHour);
  const double sdc = 1.0 / (100 * kHour);
  // T = 30 min, P = 10 min: unbound 600 + 900 = 1500 s; bound 900 + 300 = 1200 s.
  EXPECT_DOUBLE_EQ(sdc_rework_s(1800, 600, false), 1500);
  EXPECT_DOUBLE_EQ(sdc_rework_s(1800, 600, true), 1200);
  // P beyond T: the check at each save finds it, a whole interval after the last commit.
  EXPECT_DOUBLE_EQ(sdc_rework_s(1800, 7200, true), 1800);
  // Saves on the cadence (1800 = 3 x 600): no extra checks.
  EXPECT_NEAR(planned_ettr(lambda, sdc, 600, 1800, 30, 1, 600, true),
              meta_ettr(lambda, 600, 1800, 30) - sdc * (600 + 1200) - 1.0 / 600, 1e-12);
  // Off the cadence (P = 700 s): one more check per save.
  EXPECT_NEAR(planned_ettr(lambda, sdc, 600, 1800, 30, 1, 700, true),
              meta_ettr(lambda, 600, 1800, 30) - sdc * (600 + 900 + 350) - 1.0 / 700 - 1.0 / 1830, 1e-12);
  PlanParams p;
  p.trials = 0;
  p.sdc_rate = 1e-3;
  const PlanResult r = plan(p);
  EXPECT_DOUBLE_EQ(r.sdc_rework_unbound_s, 600 + 900);
  EXPECT_DOUBLE_EQ(r.sdc_rework_bound_s, 900 + 300);
  EXPECT_GT(r.bound_ettr, r.planned_ettr);
}

// The optimal intervals are stationary points of the planned ETTR.
TEST(GoodputPlanner, OptimaAreOptimal) {
  PlanParams p;
  p.trials = 0;
  p.sdc_rate = 1e-3;
  const PlanResult r = plan(p);
  const double lf = r.job_failures_per_day / 86400, ls = p.sdc_rate * static_cast<double>(p.nodes) / 86400;
  EXPECT_NEAR(r.optimal_ckpt_interval_s, std::sqrt(2 * p.ckpt_write_s / (lf + ls)), 1e-9);
  EXPECT_NEAR(r.optimal_probe_interval_s, std::sqrt(p.probe_cost_s / ls), 1e-9);
  auto ettr = [&](double t, double probe) {
    return planned_ettr(lf, ls, p.restart_s, t, p.ckpt_write_s, p.probe_cost_s, probe);
  };
  const double best = ettr(r.optimal_ckpt_interval_s, r.optimal_probe_interval_s);
  EXPECT_DOUBLE_EQ(best, r.optimal_ettr);
  for (double f : {0.8, 1.25}) {
    EXPECT_LT(ettr(r.optimal_ckpt_interval_s * f, r.optimal_probe_interval_s), best);
    EXPECT_LT(ettr(r.optimal_ckpt_interval_s, r.optimal_probe_interval_s * f), best);
  }
  p.sdc_rate = 0;
  EXPECT_EQ(plan(p).optimal_probe_interval_s, 0.0);
}

// The exact Poisson form: with delta = 0 and no restart cost, a segment of T takes
// (e^(lambda T) - 1) / lambda of wall time.
TEST(GoodputPlanner, PoissonEttr) {
  const double lambda = 1.0 / 10000;
  EXPECT_NEAR(poisson_ettr(lambda, 0, 1000, 0), 0.1 / std::expm1(0.1), 1e-12);
  EXPECT_NEAR(poisson_ettr(0, 600, 1800, 30), 1800.0 / 1830.0, 1e-12);
  // It approaches the first-order model as failures get rare.
  EXPECT_NEAR(poisson_ettr(1e-8, 600, 1800, 30), meta_ettr(1e-8, 600, 1800, 30), 1e-4);
}

// The Monte Carlo (the event simulator, 16,384 GPUs at Llama 3's failure rate) reproduces the exact
// Poisson form when there is no SDC, and the first-order model with SDC to within its second-order
// error (about lambda^2 (T + delta)^2 / 12 of the wall time, here ~0.003).
TEST(GoodputPlanner, MonteCarloAgreesWithClosedForms) {
  PlanParams p;
  p.trials = 40;
  p.days = 20;
  p.sdc_rate = 0;
  p.probe_cost_s = 0;
  const PlanResult r = plan(p);
  EXPECT_NEAR(r.mc_mean, r.poisson_ettr, 0.003);
  EXPECT_LE(r.mc_low, r.mc_mean);
  EXPECT_GE(r.mc_high, r.mc_mean);
  EXPECT_GT(r.mc_high, r.mc_low);
  EXPECT_EQ(r.mc_trials, 40);
  p.sdc_rate = 2e-4;
  p.probe_cost_s = 1;
  const PlanResult s = plan(p);
  EXPECT_NEAR(s.mc_mean, s.planned_ettr, 0.02);
  EXPECT_LT(s.mc_mean, r.mc_mean);  // SDC and probes cost
}

}  // namespace
}  // namespace sdc::goodput
