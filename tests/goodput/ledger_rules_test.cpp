// One hand-written log per labelling rule (DESIGN.md "Goodput", docs/goodput.md), with the expected
// nanoseconds worked out by hand in the comments.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>

#include "goodput/analyze.hpp"
#include "host/error.hpp"

namespace sdc::goodput {
namespace {

// One event line: t in ns, the event name, and extra fields ("\"step\":1").
std::string ev(int64_t t, const std::string& name, const std::string& extra = "") {
  return "{\"t\":" + std::to_string(t) + ",\"event\":\"" + name + "\"" + (extra.empty() ? "" : "," + extra) + "}\n";
}
std::string step(int64_t s) { return "\"step\":" + std::to_string(s); }
// A whole step: step_begin at b, step_end at e.
std::string st(int64_t b, int64_t e, int64_t s) { return ev(b, "step_begin", step(s)) + ev(e, "step_end", step(s)); }

Breakdown ledger_of(const std::string& log, LedgerOptions options = {}) {
  std::istringstream in(log);
  Breakdown b = analyze(in, options).breakdown;
  EXPECT_TRUE(b.balanced());
  return b;
}

struct Expect {
  int64_t wall, productive, queue, dt, warmup, rework, blocking;
};
void expect_labels(const Breakdown& b, const Expect& e) {
  EXPECT_EQ(b.wall_ns, e.wall);
  EXPECT_EQ(b.productive_ns, e.productive);
  EXPECT_EQ(b[Category::kQueue].ns, e.queue);
  EXPECT_EQ(b[Category::kDetectionTeardown].ns, e.dt);
  EXPECT_EQ(b[Category::kRestartWarmup].ns, e.warmup);
  EXPECT_EQ(b[Category::kRework].ns, e.rework);
  EXPECT_EQ(b[Category::kBlockingOverhead].ns, e.blocking);
}

// Rule 1, 6, 7: queue until the allocation, warm-up until the first step, kept steps productive.
TEST(GoodputRules, QueueWarmupProductive) {
  const std::string log = ev(0, "job_eligible") + ev(100, "alloc_granted") + ev(120, "process_start", "\"attempt\":0") +
                          ev(130, "init_begin") + ev(140, "init_end") + st(150, 250, 1) + st(260, 360, 2) +
                          ev(360, "job_end");
  // queue 0..100; warm-up 100..150; productive = steps 100 + 100 + the 10 ns between them.
  expect_labels(ledger_of(log), {360, 210, 100, 0, 50, 0, 0});
  EXPECT_EQ(ledger_of(log).sdc_lost_ns(), 0);
}

// Rule 4: saves, evals and data waits in the kept timeline are blocking overhead, also inside a step.
TEST(GoodputRules, BlockingIntervalsInsideAndBetweenSteps) {
  const std::string log = ev(0, "alloc_granted") + ev(0, "step_begin", step(1)) + ev(10, "data_wait_begin") +
                          ev(30, "data_wait_end") + ev(100, "step_end", step(1)) + ev(100, "ckpt_begin", step(1)) +
                          ev(140, "ckpt_end", step(1)) + ev(140, "ckpt_commit", step(1)) + ev(150, "eval_begin") +
                          ev(200, "eval_end") + st(200, 300, 2) + ev(300, "job_end");
  // blocking: data wait 20 + save 40 + eval 50 = 110; productive: 80 of step 1, 10 gap, 100 of step 2.
  expect_labels(ledger_of(log), {300, 190, 0, 0, 0, 0, 110});
}

// Rule 2: probe time is blocking overhead and SDC-attributed, even inside a step.
TEST(GoodputRules, ProbesAreBlockingAndSdc) {
  const std::string log = ev(0, "alloc_granted") + ev(0, "step_begin", step(1)) + ev(40, "probe_begin") +
                          ev(50, "probe_end", "\"probe\":\"gemm\",\"verdict\":\"pass\"") +
                          ev(100, "step_end", step(1)) + ev(100, "job_end");
  const Breakdown b = ledger_of(log);
  expect_labels(b, {100, 90, 0, 0, 0, 0, 10});
  EXPECT_EQ(b[Category::kBlockingOverhead].sdc_ns, 10);
  EXPECT_EQ(b.sdc_lost_ns(), 10);
}

// Rules 3 and 5 with an explicit restore: everything from the end of step 1's save to the last
// progress is rework (steps, an eval, a later tainted save, a data wait, the time between), except
// the probe; from the last progress to teardown_end is detection & teardown.
TEST(GoodputRules, RestoreEndDiscardsFromTheSaveOfItsStep) {
  const std::string log =
      ev(0, "alloc_granted") + ev(0, "process_start") + st(10, 110, 1) + ev(110, "ckpt_begin", step(1)) +
      ev(130, "ckpt_end", step(1)) + ev(130, "ckpt_commit", step(1)) + st(130, 230, 2) + ev(230, "eval_begin") +
      ev(250, "eval_end") + ev(250, "ckpt_begin", step(2)) + ev(270, "ckpt_end", step(2)) +
      ev(270, "ckpt_commit", step(2)) + ev(275, "data_wait_begin") + ev(285, "data_wait_end") + st(285, 385, 3) +
      ev(385, "probe_begin") + ev(395, "probe_end") + ev(400, "fault_detected", "\"kind\":\"xid\"") +
      ev(450, "teardown_end") + ev(450, "process_start", "\"attempt\":1") + ev(460, "restore_begin") +
      ev(480, "restore_end", step(1)) + st(500, 600, 2) + ev(600, "job_end");
  const Breakdown b = ledger_of(log);
  // warm-up 0..10 and 450..500 = 60; D&T 395..450 = 55; rework 130..395 minus the probe = 255
  // (step 2: 100, eval 20, save 20, gap 5, data wait 10, step 3: 100); blocking: save 1 (20) + probe
  // (10); productive: step 1 and the new step 2.
  expect_labels(b, {600, 200, 0, 55, 60, 255, 30});
  EXPECT_EQ(b[Category::kRework].sdc_ns, 0);  // a crash, not SDC
  EXPECT_EQ(b.rollbacks, 1);
}

// Rule 3: a step whose checkpoint had no blocking save is cut at its step_end.
TEST(GoodputRules, RestoreWithoutBlockingSaveCutsAtStepEnd) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + ev(100, "ckpt_commit", step(1)) +
                          ev(100, "eval_begin") + ev(130, "eval_end") + st(130, 230, 2) + ev(240, "fault_detected") +
                          ev(250, "teardown_end") + ev(260, "restore_end", step(1)) + st(270, 370, 2) +
                          ev(370, "job_end");
  // rework: eval 30 + step 2 100 = 130; D&T 230..250 = 20; warm-up 250..270 = 20.
  expect_labels(ledger_of(log), {370, 200, 0, 20, 20, 130, 0});
}

// Rule 3, implicit target after sdc_detected: the newest checkpoint committed at or before
// last_good_step (step 1), older than the newest one (step 3, tainted). Requeue, teardown, restart
// and rework are all SDC-attributed, and so is the probe time.
TEST(GoodputRules, SdcRollsBackToLastKnownGoodCheckpoint) {
  const std::string log =
      ev(0, "alloc_granted") + ev(0, "process_start") + st(0, 100, 1) + ev(100, "ckpt_commit", step(1)) +
      st(100, 200, 2) + ev(200, "probe_begin") + ev(210, "probe_end", "\"verdict\":\"pass\"") + st(210, 310, 3) +
      ev(310, "ckpt_commit", step(3)) + st(310, 410, 4) + ev(410, "probe_begin") +
      ev(420, "probe_end", "\"verdict\":\"fail\"") +
      ev(420, "sdc_detected", "\"device\":\"GPU-1\",\"last_good_step\":2") +
      ev(440, "node_quarantined", "\"device\":\"GPU-1\"") + ev(500, "alloc_released") + ev(600, "alloc_granted") +
      ev(600, "process_start", "\"attempt\":1") + st(700, 800, 2) + ev(800, "job_end");
  const Breakdown b = ledger_of(log);
  // rework: steps 2, 3, 4 = 300; D&T 420..500 = 80; queue 500..600 = 100; warm-up 600..700 = 100;
  // probes 20; productive: step 1 and the new step 2.
  expect_labels(b, {800, 200, 100, 80, 100, 300, 20});
  EXPECT_EQ(b[Category::kRework].sdc_ns, 300);
  EXPECT_EQ(b[Category::kDetectionTeardown].sdc_ns, 80);
  EXPECT_EQ(b[Category::kQueue].sdc_ns, 100);
  EXPECT_EQ(b[Category::kRestartWarmup].sdc_ns, 100);
  EXPECT_EQ(b[Category::kBlockingOverhead].sdc_ns, 20);
  EXPECT_EQ(b.sdc_lost_ns(), 600);
}

// Rule 3, implicit target after another fault: the newest committed checkpoint of the current
// lineage. The explicit restore to step 1 removed checkpoint 2 from the lineage, so the second
// fault goes back to step 1 again, not to the discarded checkpoint 2.
TEST(GoodputRules, RestoreDiscardsLaterCheckpointsFromTheLineage) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + ev(100, "ckpt_commit", step(1)) + st(100, 200, 2) +
                          ev(200, "ckpt_commit", step(2)) + ev(200, "fault_detected") + ev(210, "teardown_end") +
                          ev(220, "restore_end", step(1)) + st(230, 330, 2) + st(330, 430, 3) +
                          ev(430, "fault_detected") + ev(440, "teardown_end") + st(450, 550, 2) + ev(550, "job_end");
  // rework: step 2 (100), then steps 2 and 3 again (200); D&T 10 + 10; warm-up 20 + 10.
  expect_labels(ledger_of(log), {550, 200, 0, 20, 30, 300, 0});
}

// Rule 3: time an earlier incident already labelled keeps its label when a later SDC rollback
// spans it; only the new attempt's steps become (SDC) rework.
TEST(GoodputRules, LaterRollbackKeepsEarlierIncidentLabels) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + ev(100, "ckpt_commit", step(1)) + st(100, 200, 2) +
                          ev(200, "fault_detected") + ev(210, "teardown_end") + ev(220, "restore_end", step(1)) +
                          st(230, 330, 2) + ev(330, "ckpt_commit", step(2)) + st(330, 430, 3) +
                          ev(430, "sdc_detected", "\"last_good_step\":1") + ev(440, "teardown_end") + st(450, 550, 2) +
                          ev(550, "job_end");
  const Breakdown b = ledger_of(log);
  // Crash: rework 100 (step 2), D&T 10, warm-up 20. SDC: rework 200 (steps 2 and 3 again),
  // D&T 10, warm-up 10, all SDC.
  expect_labels(b, {550, 200, 0, 20, 30, 300, 0});
  EXPECT_EQ(b[Category::kRework].sdc_ns, 200);
  EXPECT_EQ(b[Category::kDetectionTeardown].sdc_ns, 10);
  EXPECT_EQ(b[Category::kRestartWarmup].sdc_ns, 10);
}

// Rule 5: a step in flight at the fault (a hang) is rework for the median completed step
// duration, detection & teardown beyond it.
TEST(GoodputRules, HungStepIsReworkForTheMedianThenDetection) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + st(100, 200, 2) + st(200, 500, 3) +
                          ev(500, "ckpt_commit", step(3)) + ev(510, "step_begin", step(4)) +
                          ev(1000, "fault_detected", "\"kind\":\"nccl_timeout\"") + ev(1200, "teardown_end") +
                          ev(1300, "job_end");
  // Median of 100, 100, 300 is 100: rework 510..610; D&T 500..1200 less that = 600; warm-up
  // 1200..1300 (the job ends before a new step).
  expect_labels(ledger_of(log), {1300, 500, 0, 600, 100, 100, 0});
}

// The detection & teardown of each attempt, split at its fault, is what a hang's report carries: the
// wait from the last progress to the fault, and the teardown after it. They sum to the category.
TEST(GoodputRules, DetectionAndTeardownPerAttempt) {
  const std::string log = ev(0, "alloc_granted") + ev(0, "process_start", "\"attempt\":0") + st(0, 100, 1) +
                          st(100, 200, 2) + ev(200, "ckpt_commit", step(2)) + ev(210, "step_begin", step(3)) +
                          ev(1000, "fault_detected", "\"kind\":\"RuntimeError\"") + ev(1200, "teardown_end") +
                          ev(1300, "process_start", "\"attempt\":1,\"slurm_restart\":2") + st(1300, 1400, 3) +
                          ev(1400, "job_end");
  const Breakdown b = ledger_of(log);
  // Median step 100: rework 210..310; detection 200..210 and 310..1000 = 700; teardown 1000..1200.
  ASSERT_EQ(b.attempts.size(), 1u);
  EXPECT_EQ(b.attempts[0].attempt, 0);
  EXPECT_EQ(b.attempts[0].slurm_restart, -1);
  EXPECT_EQ(b.attempts[0].detection_ns, 700);
  EXPECT_EQ(b.attempts[0].teardown_ns, 200);
  EXPECT_EQ(b[Category::kDetectionTeardown].ns, 900);

  // A stop with no fault event, found at the next start: all of it is detection, the first
  // attempt's; the second's hang is the second's.
  const std::string silent = ev(0, "alloc_granted") + ev(0, "process_start", "\"attempt\":0") + st(0, 100, 1) +
                             ev(500, "process_start", "\"attempt\":1,\"slurm_restart\":2") + st(500, 600, 2) +
                             ev(900, "fault_detected") + ev(950, "job_end");
  const Breakdown c = ledger_of(silent);
  ASSERT_EQ(c.attempts.size(), 2u);
  EXPECT_EQ(c.attempts[0].attempt, 0);
  EXPECT_EQ(c.attempts[0].detection_ns, 400);
  EXPECT_EQ(c.attempts[0].teardown_ns, 0);
  EXPECT_EQ(c.attempts[1].attempt, 1);
  EXPECT_EQ(c.attempts[1].slurm_restart, 2);
  EXPECT_EQ(c.attempts[1].detection_ns, 300);
  EXPECT_EQ(c.attempts[1].teardown_ns, 50);
}

// Rule 5: the in-flight rework stops at the fault when the fault comes before the median step time;
// detection & teardown starts there. The median of an even count is the lower middle value.
TEST(GoodputRules, InFlightReworkEndsAtTheFault) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + st(100, 400, 2) + ev(400, "ckpt_commit", step(2)) +
                          ev(410, "step_begin", step(3)) + ev(440, "fault_detected") + ev(460, "teardown_end") +
                          ev(460, "job_end");
  // Median of 100 and 300 is 100, but the fault comes 30 ns into step 3: rework 410..440 = 30;
  // D&T 400..410 and 440..460 = 30 (it used to count rework up to the median, through teardown).
  expect_labels(ledger_of(log), {460, 400, 0, 30, 0, 30, 0});
}

// The same in seconds: 10 s steps, a crash seen 1 s into step 3, 60 s of teardown. Rework is 1 s,
// not the median 10 s running on past the fault.
TEST(GoodputRules, FaultSeenOneSecondIntoAStep) {
  const int64_t s = 1'000'000'000;
  const std::string log = ev(0, "alloc_granted") + st(0, 10 * s, 1) + st(10 * s, 20 * s, 2) +
                          ev(20 * s, "ckpt_commit", step(2)) + ev(20 * s, "step_begin", step(3)) +
                          ev(21 * s, "fault_detected", "\"kind\":\"xid\"") + ev(81 * s, "teardown_end") +
                          ev(81 * s, "job_end");
  // productive 0..20 s; rework 20..21 s; D&T 21..81 s = 60 s.
  expect_labels(ledger_of(log), {81 * s, 20 * s, 0, 60 * s, 0, 1 * s, 0});
}

// A restart with no fault event: silence after a committed save, then process_start and a restore
// to that same step. The silence is an unreported failure's detection & teardown; nothing was
// discarded, so it is not rework and not a rollback. A fault_detected at the restart gives the same.
TEST(GoodputRules, SilentRestartAfterCommittedSaveIsDetection) {
  const std::string head = ev(0, "alloc_granted") + ev(0, "process_start") + st(10, 110, 1) +
                           ev(110, "ckpt_begin", step(1)) + ev(130, "ckpt_end", step(1)) +
                           ev(130, "ckpt_commit", step(1));
  const std::string tail = ev(1130, "process_start") + ev(1140, "restore_begin") + ev(1150, "restore_end", step(1)) +
                           st(1160, 1260, 2) + ev(1260, "job_end");
  // warm-up 0..10 and 1130..1160 = 40; productive steps 1 and 2 = 200; blocking the save 110..130 =
  // 20; D&T the silence 130..1130 = 1000. 40 + 200 + 20 + 1000 = 1260.
  const Breakdown silent = ledger_of(head + tail);
  expect_labels(silent, {1260, 200, 0, 1000, 40, 0, 20});
  EXPECT_EQ(silent.rollbacks, 0);
  const Breakdown reported = ledger_of(head + ev(1130, "fault_detected") + tail);
  expect_labels(reported, {1260, 200, 0, 1000, 40, 0, 20});
  EXPECT_EQ(reported.rollbacks, 0);
}

// The same with step 2 in flight when the process restarts: the step is rework for the median step
// time (100), the rest of the silence detection & teardown; still no rollback.
TEST(GoodputRules, SilentRestartWithAStepInFlight) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + ev(100, "ckpt_commit", step(1)) +
                          ev(100, "step_begin", step(2)) + ev(1100, "process_start") +
                          ev(1150, "restore_end", step(1)) + st(1150, 1250, 2) + ev(1250, "job_end");
  // productive 0..100 and 1150..1250 = 200; rework 100..200 = 100; D&T 200..1100 = 900; warm-up
  // 1100..1150 = 50. 200 + 100 + 900 + 50 = 1250.
  const Breakdown b = ledger_of(log);
  expect_labels(b, {1250, 200, 0, 900, 50, 100, 0});
  EXPECT_EQ(b.rollbacks, 0);
}

// A silent restart that then restores an older checkpoint discards the kept steps after it: that is
// rework and a rollback; the silence stays detection & teardown.
TEST(GoodputRules, SilentRestartToAnOlderCheckpointIsARollback) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + ev(100, "ckpt_commit", step(1)) + st(100, 200, 2) +
                          ev(200, "ckpt_commit", step(2)) + ev(700, "process_start") + ev(750, "restore_end", step(1)) +
                          st(750, 850, 2) + ev(850, "job_end");
  // productive 0..100 and 750..850 = 200; rework step 2 100..200 = 100; D&T 200..700 = 500; warm-up
  // 700..750 = 50. 200 + 100 + 500 + 50 = 850.
  const Breakdown b = ledger_of(log);
  expect_labels(b, {850, 200, 0, 500, 50, 100, 0});
  EXPECT_EQ(b.rollbacks, 1);
}

// Rule 5: alloc_released ends detection & teardown as teardown_end does; the time after is queue.
TEST(GoodputRules, DetectionEndsAtAllocReleased) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + ev(100, "ckpt_commit", step(1)) +
                          ev(150, "fault_detected") + ev(170, "alloc_released") + ev(270, "alloc_granted") +
                          st(300, 400, 2) + ev(400, "job_end");
  expect_labels(ledger_of(log), {400, 200, 100, 70, 30, 0, 0});
}

// A fault with no committed checkpoint restarts from scratch: all kept time so far is rework.
TEST(GoodputRules, NoCheckpointMeansRestartFromScratch) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + st(100, 200, 2) + ev(200, "fault_detected") +
                          ev(220, "teardown_end") + st(230, 330, 1) + ev(330, "job_end");
  expect_labels(ledger_of(log), {330, 100, 0, 20, 10, 200, 0});
}

// A fault after which the job ends without restarting still discards the uncheckpointed steps.
TEST(GoodputRules, JobEndingAfterAFaultDiscardsUncommittedSteps) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + ev(100, "ckpt_commit", step(1)) + st(100, 200, 2) +
                          ev(200, "fault_detected") + ev(250, "alloc_released") + ev(250, "job_end");
  expect_labels(ledger_of(log), {250, 100, 0, 50, 0, 100, 0});
}

// Re-running a step the lineage holds, without restore_end or fault, is a rollback to the step
// before it (a crash the log did not report).
TEST(GoodputRules, RepeatedStepWithoutRestoreIsARollback) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + st(100, 200, 2) + ev(200, "process_start") +
                          st(250, 350, 2) + ev(350, "job_end");
  // Step 2 (100) is rework; 200..250 is warm-up of the new process.
  expect_labels(ledger_of(log), {350, 200, 0, 0, 50, 100, 0});
}

// Gaps: a silence longer than the threshold keeps the label of its state and is counted.
TEST(GoodputRules, GapsAreLabelledByStateAndCounted) {
  LedgerOptions options;
  options.gap_threshold_ns = 50;
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + st(200, 240, 2) + ev(240, "job_end");
  const Breakdown b = ledger_of(log, options);
  expect_labels(b, {240, 240, 0, 0, 0, 0, 0});
  EXPECT_EQ(b.gap_count, 2);  // the 100 ns gap between steps and the 100 ns step 1
  EXPECT_EQ(b.gap_ns, 200);
}

// Times may be RFC 3339 strings with fractional seconds; they mix with integer nanoseconds.
TEST(GoodputRules, Rfc3339Times) {
  const int64_t base = 1'798'761'600LL * 1'000'000'000LL;  // 2027-01-01T00:00:00Z
  const std::string log =
      "{\"t\":\"2027-01-01T00:00:00Z\",\"event\":\"alloc_granted\"}\n"
      "{\"t\":\"2027-01-01T00:00:00.5Z\",\"event\":\"step_begin\",\"step\":1}\n"
      "{\"t\":\"2027-01-01T01:00:01.5+01:00\",\"event\":\"step_end\",\"step\":1}\n" +
      ev(base + 2'000'000'000, "job_end");
  expect_labels(ledger_of(log), {2'000'000'000, 1'500'000'000, 0, 0, 500'000'000, 0, 0});
  EXPECT_EQ(parse_rfc3339_ns("1970-01-01T00:00:00.000000001Z"), 1);
  EXPECT_EQ(parse_rfc3339_ns("2024-02-29T12:00:00-00:30"), 1'709'208'000LL * 1'000'000'000LL + 1'800'000'000'000LL);
}

// An event handed to the ledger directly, without a log line.
Event event(int64_t t, EventKind kind, std::optional<int64_t> s = std::nullopt) {
  Event e;
  e.t = t;
  e.kind = kind;
  e.step = s;
  return e;
}

// Memory: the ledger holds only the steps since the oldest checkpoint it keeps.
TEST(GoodputRules, OpenStepsAreBoundedByKeptCheckpoints) {
  LedgerOptions options;
  options.keep_checkpoints = 4;
  Ledger ledger(options);
  int64_t t = 0;
  ledger.add(event(t, EventKind::kAllocGranted));
  size_t most = 0;
  for (int64_t s = 1; s <= 10'000; ++s) {
    ledger.add(event(t, EventKind::kStepBegin, s));
    t += 10;
    ledger.add(event(t, EventKind::kStepEnd, s));
    if (s % 10 == 0) ledger.add(event(t, EventKind::kCkptCommit, s));
    most = std::max(most, ledger.open_steps());
  }
  EXPECT_LE(most, 5u * 10u);  // (keep + 1) checkpoints of 10 steps
  ledger.add(event(t, EventKind::kJobEnd));
  EXPECT_EQ(ledger.finish().productive_ns, 100'000);
}

// A restore older than the checkpoints the ledger keeps is an error, not a silent under-count.
TEST(GoodputRules, RestorePastTheKeptCheckpointsIsAnError) {
  LedgerOptions options;
  options.keep_checkpoints = 1;
  const std::string log = ev(0, "alloc_granted") + st(0, 10, 1) + ev(10, "ckpt_commit", step(1)) + st(10, 20, 2) +
                          ev(20, "ckpt_commit", step(2)) + ev(30, "fault_detected") + ev(40, "restore_end", step(1));
  std::istringstream in(log);
  try {
    analyze(in, options);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("line 9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--keep-checkpoints"), std::string::npos) << e.what();
  }
}

// An InputError's message from analysing `log`, or "" when it is accepted.
std::string error_of(const std::string& log) {
  std::istringstream in(log);
  try {
    analyze(in);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::string kBackground = "\"blocking\":false";

// Rule 2: a probe the loop does not wait for is overlapped probe time, a diagnostic; the steps it
// overlaps stay productive. A blocking probe in the same timeline (the replica check while the inline
// probe runs in the background) is still blocking overhead.
TEST(GoodputRules, NonBlockingProbeIsOverlappedTimeNotOverhead) {
  const std::string log = ev(0, "alloc_granted") + ev(0, "step_begin", step(1)) + ev(50, "probe_begin", kBackground) +
                          ev(100, "step_end", step(1)) + st(100, 200, 2) + ev(200, "probe_begin", "\"blocking\":true") +
                          ev(210, "probe_end", "\"blocking\":true") + ev(210, "step_begin", step(3)) +
                          ev(250, "probe_end", kBackground) + ev(300, "step_end", step(3)) + ev(300, "job_end");
  const Breakdown b = ledger_of(log);
  // productive: steps 1..3 (100 + 100 + 90); blocking: the replica check 200..210, SDC-attributed;
  // overlapped: the background probe 50..250.
  expect_labels(b, {300, 290, 0, 0, 0, 0, 10});
  EXPECT_EQ(b[Category::kBlockingOverhead].sdc_ns, 10);
  EXPECT_EQ(b.overlapped_probe_ns, 200);
}

// The end of a background probe is not progress: a step in flight at a fault stays in flight from its
// begin, rework for the median step time and detection & teardown after it.
TEST(GoodputRules, NonBlockingProbeEndIsNotProgress) {
  const std::string log =
      ev(0, "alloc_granted") + st(0, 100, 1) + ev(100, "ckpt_begin", step(1)) + ev(120, "ckpt_end", step(1)) +
      ev(120, "ckpt_commit", step(1)) + ev(120, "step_begin", step(2)) + ev(130, "probe_begin", kBackground) +
      ev(300, "probe_end", kBackground) + ev(400, "fault_detected", "\"kind\":\"xid\"") + ev(450, "teardown_end") +
      ev(450, "process_start") + ev(460, "restore_end", step(1)) + st(470, 570, 2) + ev(570, "job_end");
  // m = 100 (step 1): step 2 in flight is rework 120..220, D&T 220..450 = 230; warm-up 450..470;
  // productive steps 1 and 2 (again); blocking the save (20). Were 300 progress, 120..300 would
  // be rework.
  const Breakdown b = ledger_of(log);
  expect_labels(b, {570, 200, 0, 230, 20, 100, 20});
  EXPECT_EQ(b.overlapped_probe_ns, 170);
}

// Rule 5: a blocking probe still open at an unreported stop (a peer killed inside the replica check's
// collective) keeps its label for the median probe time; the rest of the wait is detection & teardown.
TEST(GoodputRules, OpenProbeAtAStopIsCappedAtTheMedianProbe) {
  const std::string log = ev(0, "alloc_granted") + ev(0, "process_start") + st(0, 100, 1) + ev(100, "probe_begin") +
                          ev(110, "probe_end") + ev(110, "ckpt_begin", step(1)) + ev(130, "ckpt_end", step(1)) +
                          ev(130, "ckpt_commit", step(1)) + st(130, 230, 2) + ev(230, "probe_begin") +
                          ev(1230, "process_start") + ev(1235, "restore_begin") + ev(1240, "restore_end", step(1)) +
                          st(1250, 1350, 2) + ev(1350, "job_end");
  // The median probe is 10: 230..240 blocking (SDC), 240..1230 = 990 detection & teardown. rework: step
  // 2's first run 130..230; warm-up 1230..1250; blocking: probes 10 + 10, save 20; productive 100 + 100.
  const Breakdown b = ledger_of(log);
  expect_labels(b, {1350, 200, 0, 990, 20, 100, 40});
  EXPECT_EQ(b[Category::kBlockingOverhead].sdc_ns, 20);
  EXPECT_EQ(b[Category::kDetectionTeardown].sdc_ns, 0);
}

// Rule 5: a save still open at a fault keeps its label for the median save time.
TEST(GoodputRules, OpenSaveAtAFaultIsCappedAtTheMedianSave) {
  const std::string log = ev(0, "alloc_granted") + st(0, 100, 1) + ev(100, "ckpt_begin", step(1)) +
                          ev(140, "ckpt_end", step(1)) + ev(140, "ckpt_commit", step(1)) + st(140, 240, 2) +
                          ev(240, "ckpt_begin", step(2)) + ev(400, "fault_detected", "\"kind\":\"io\"") +
                          ev(500, "teardown_end") + ev(500, "process_start") + ev(510, "restore_end", step(1)) +
                          st(520, 620, 2) + ev(620, "job_end");
  // rework: step 2 140..240; the open save 240..280 (median 40) is blocking, 280..500 = 220 detection &
  // teardown; warm-up 500..520; blocking 40 + 40; productive 100 + 100.
  expect_labels(ledger_of(log), {620, 200, 0, 220, 20, 100, 80});
}

// Rule 5: a data wait open inside a step in flight keeps its label for the median data wait; the
// step's rework window (m = 100) covers the rest of its first 100 ns.
TEST(GoodputRules, OpenDataWaitInsideAStepInFlight) {
  const std::string log = ev(0, "alloc_granted") + ev(0, "step_begin", step(1)) + ev(10, "data_wait_begin") +
                          ev(30, "data_wait_end") + ev(100, "step_end", step(1)) + ev(100, "step_begin", step(2)) +
                          ev(110, "data_wait_begin") + ev(400, "fault_detected", "\"kind\":\"xid\"") +
                          ev(400, "teardown_end") + ev(400, "process_start") + st(410, 510, 2) + ev(510, "job_end");
  // No commit: the restart rolls back to the start, so step 1 (100, its data wait included) is rework.
  // Step 2 in flight: 100..110 rework; the data wait 110..130 (median 20) blocking; 130..200 rework;
  // 200..400 detection & teardown. rework 100 + 10 + 70 = 180; warm-up 400..410; productive step 2.
  expect_labels(ledger_of(log), {510, 100, 0, 200, 10, 180, 20});
}

TEST(GoodputRules, BlockingFieldMustBeABoolean) {
  const std::string log = ev(0, "alloc_granted") + ev(10, "probe_begin", "\"blocking\":1");
  const std::string error = error_of(log);
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
  EXPECT_NE(error.find("\"blocking\" must be true or false"), std::string::npos) << error;
}

TEST(GoodputRules, AmbiguousProbeEndIsAnError) {
  const std::string both = ev(0, "alloc_granted") + ev(0, "probe_begin", kBackground) + ev(10, "probe_begin");
  const std::string error = error_of(both + ev(20, "probe_end"));
  EXPECT_NE(error.find("line 4"), std::string::npos) << error;
  EXPECT_NE(error.find("blocking"), std::string::npos) << error;
  // With one probe open, an end without the field ends that one; naming the kind that is not open
  // is an end without its begin.
  EXPECT_EQ(error_of(ev(0, "alloc_granted") + ev(0, "probe_begin", kBackground) + ev(20, "probe_end")), "");
  EXPECT_NE(
      error_of(ev(0, "alloc_granted") + ev(0, "probe_begin", kBackground) + ev(20, "probe_end", "\"blocking\":true"))
          .find("without probe_begin"),
      std::string::npos);
}

// Found by coverage-guided fuzzing: the restore a fault leaves for the end of the log, to a
// forgotten checkpoint, named no line and stopped --lenient too.
TEST(GoodputRules, RestoreAtTheEndOfTheLogPastTheKeptCheckpointsNamesTheFault) {
  LedgerOptions options;
  options.keep_checkpoints = 1;
  // Lines 1-7: two committed steps (step 1 forgotten once step 2 commits); line 8: SDC after step 1.
  const std::string log = ev(0, "alloc_granted") + st(0, 10, 1) + ev(10, "ckpt_commit", step(1)) + st(10, 20, 2) +
                          ev(20, "ckpt_commit", step(2)) + ev(30, "sdc_detected", "\"last_good_step\":1") +
                          ev(40, "alloc_released");
  std::istringstream strict(log);
  try {
    analyze(strict, options);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "line 8: the restore after this fault, at the end of the log: restore target step 1 is older than the 1 "
              "newest checkpoints the ledger keeps (raise --keep-checkpoints)");
  }
  // Lenient: that line is skipped and counted, and the incident settles without the restore.
  std::istringstream lenient(log);
  const Analysis a = analyze(lenient, options, true);
  EXPECT_EQ(a.stats.skipped, 1u);
  EXPECT_EQ(a.stats.first_skip.rfind("line 8: the restore after this fault", 0), 0u) << a.stats.first_skip;
  EXPECT_TRUE(a.breakdown.balanced());
  EXPECT_EQ(a.breakdown.productive_ns, 20);
  EXPECT_EQ(a.breakdown[Category::kRework].ns, 0);
  // With the checkpoint kept, the same log rolls back to step 1 and reads strictly.
  EXPECT_EQ(ledger_of(log)[Category::kRework].ns, 10);
}

}  // namespace
}  // namespace sdc::goodput
