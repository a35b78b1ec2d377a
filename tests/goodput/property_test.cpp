// The ledger against the simulator's ground truth, on random simulated logs: exact, in integer ns.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <sstream>
#include <string>

#include "goodput/analyze.hpp"
#include "goodput/event.hpp"
#include "goodput/simulator.hpp"

namespace sdc::goodput {
namespace {

// Random parameters that reach every rule: hangs, in-step faults, requeues, implicit and explicit
// restores, async checkpoints, SDC rollbacks past tainted checkpoints, background probes, RFC 3339
// times.
SimParams random_params(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  auto prob = [&]() { return static_cast<double>(rng() % 1001) / 1000.0; };
  SimParams p;
  p.seed = seed;
  p.step_ns = pick(1'000'000, 20 * kNsPerSecond);
  p.step_jitter_ns = pick(0, p.step_ns / 2);
  p.gap_max_ns = pick(0, p.step_ns / 10);
  p.duration_ns = p.step_ns * pick(20, 400);
  p.first_queue_ns = pick(0, 1000 * kNsPerSecond);
  p.ckpt_every = pick(0, 25);
  p.ckpt_write_ns = pick(1, 3 * p.step_ns);
  p.async_ckpt_prob = prob();
  p.probe_every = pick(0, 30);
  p.probe_ns = pick(1, p.step_ns / 5 + 1);
  p.background_probe_prob = prob() < 0.3 ? prob() : 0.0;
  p.check_before_commit = prob() < 0.3;
  p.eval_every = pick(0, 60);
  p.eval_ns = pick(1, 4 * p.step_ns);
  p.data_wait_prob = prob() / 4;
  p.data_wait_ns = pick(1, p.step_ns);
  // Rates per day high enough for several incidents within the short simulated runs.
  const double run_days = static_cast<double>(p.duration_ns) / static_cast<double>(kNsPerDay);
  p.faults_per_day = static_cast<double>(pick(0, 8)) / run_days;
  p.sdc_per_day = static_cast<double>(pick(0, 4)) / run_days;
  p.in_step_fault_prob = prob();
  p.hang_prob = prob();
  p.hang_ns = pick(1, 20 * p.step_ns);
  p.teardown_ns = pick(1, 10 * p.step_ns);
  p.warmup_ns = pick(1, 10 * p.step_ns);
  p.requeue_prob = prob();
  p.requeue_ns = pick(1, 30 * p.step_ns);
  p.explicit_restore_prob = prob();
  p.rfc3339_prob = prob() < 0.2 ? 0.5 : 0.0;
  return p;
}

TEST(GoodputProperty, LedgerEqualsSimulatorTruthOnTenThousandRandomLogs) {
  constexpr uint64_t kRuns = 10'000;
  uint64_t with_sdc = 0, with_faults = 0, with_background = 0, events = 0;
  std::string log;
  for (uint64_t seed = 1; seed <= kRuns; ++seed) {
    const SimParams p = random_params(seed);
    log.clear();
    const SimResult sim = simulate(p, [&](std::string_view line) {
      log.append(line);
      log += '\n';
    });
    ASSERT_TRUE(sim.truth.balanced()) << "seed " << seed;
    std::istringstream in(log);
    const Analysis got = analyze(in);
    ASSERT_TRUE(got.breakdown.balanced()) << "seed " << seed;
    ASSERT_EQ(got.breakdown.wall_ns, sim.truth.wall_ns) << "seed " << seed;
    ASSERT_EQ(got.breakdown.productive_ns, sim.truth.productive_ns) << "seed " << seed;
    for (Category c : kCategories) {
      ASSERT_EQ(got.breakdown[c].ns, sim.truth[c].ns) << "seed " << seed << " " << category_key(c);
      ASSERT_EQ(got.breakdown[c].sdc_ns, sim.truth[c].sdc_ns) << "seed " << seed << " " << category_key(c);
    }
    ASSERT_EQ(got.breakdown.overlapped_probe_ns, sim.truth.overlapped_probe_ns) << "seed " << seed;
    // Each attempt's detection & teardown, which a hang carries, adds up to the category.
    int64_t per_attempt = 0;
    for (const AttemptLoss& a : got.breakdown.attempts) per_attempt += a.detection_ns + a.teardown_ns;
    ASSERT_EQ(per_attempt, got.breakdown[Category::kDetectionTeardown].ns) << "seed " << seed;
    ASSERT_EQ(got.stats.events, sim.events);
    with_sdc += sim.sdc_detections > 0;
    with_faults += sim.faults > 0;
    with_background += sim.truth.overlapped_probe_ns > 0;
    events += sim.events;
  }
  // The random parameters must actually exercise the incident rules.
  EXPECT_GT(with_sdc, kRuns / 5);
  EXPECT_GT(with_faults, kRuns / 2);
  EXPECT_GT(with_background, kRuns / 20);
  RecordProperty("events", std::to_string(events));
}

// Check before commit: no SDC is ever found with a commit newer than the last clean probe (no
// tainted commit), while an unbound cadence (probes every 7 steps, saves every 5) commits some.
TEST(GoodputProperty, CheckBeforeCommitLeavesNoTaintedCommit) {
  for (const bool bound : {true, false}) {
    int64_t detections = 0, tainted = 0;
    for (uint64_t seed = 1; seed <= 200; ++seed) {
      SimParams p;
      p.seed = seed;
      p.duration_ns = 2000 * p.step_ns;
      p.ckpt_every = 5;
      p.probe_every = 7;
      p.faults_per_day = 0;
      p.sdc_per_day = 20.0 * static_cast<double>(kNsPerDay) / static_cast<double>(p.duration_ns);
      p.check_before_commit = bound;
      std::optional<int64_t> newest_commit;
      simulate(p, [&](std::string_view line) {
        const Event e = parse_event(line);
        if (e.kind == EventKind::kCkptCommit) newest_commit = e.step;
        if (e.kind == EventKind::kRestoreEnd) newest_commit = e.step;
        if (e.kind == EventKind::kSdcDetected) {
          ++detections;
          if (newest_commit && *newest_commit > *e.last_good_step) ++tainted;
        }
      });
    }
    EXPECT_GT(detections, 100) << bound;
    if (bound) {
      EXPECT_EQ(tainted, 0);
    } else {
      EXPECT_GT(tainted, 10);
    }
  }
}

}  // namespace
}  // namespace sdc::goodput
