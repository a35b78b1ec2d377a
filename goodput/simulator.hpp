// A discrete-event simulator of a training run with failures and SDC. It writes the run's event log
// and, independently of the ledger, the ground-truth breakdown of its wall time, so the ledger can be
// tested for exactness. The planner's Monte Carlo runs the same simulator without writing events.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "goodput/breakdown.hpp"

namespace sdc::goodput {

inline constexpr int64_t kNsPerSecond = 1'000'000'000;
inline constexpr int64_t kNsPerDay = 86'400 * kNsPerSecond;

struct SimParams {
  uint64_t seed = 1;
  int64_t start_ns = 1'798'761'600 * kNsPerSecond;  // 2027-01-01T00:00:00Z
  int64_t duration_ns = kNsPerDay;                  // the job ends at the first step boundary after this
  int64_t first_queue_ns = 600 * kNsPerSecond;
  int64_t step_ns = 10 * kNsPerSecond;        // mean step time
  int64_t step_jitter_ns = kNsPerSecond / 2;  // uniform +-
  int64_t gap_max_ns = kNsPerSecond / 100;    // unlabelled time between activities, uniform [0, max]
  int64_t ckpt_every = 180;                   // steps; 0 = never
  int64_t ckpt_write_ns = 30 * kNsPerSecond;  // blocking part of a save
  double async_ckpt_prob = 0.2;               // a save with no blocking part (commit only)
  int64_t probe_every = 90;                   // steps; 0 = no probes (SDC goes undetected)
  int64_t probe_ns = kNsPerSecond / 10;
  double background_probe_prob = 0.0;  // a probe runs inside its step, the loop not waiting for it
  bool check_before_commit = false;    // a probe runs before every save, which is committed if it passes
  int64_t eval_every = 500;            // steps; 0 = never
  int64_t eval_ns = 60 * kNsPerSecond;
  double data_wait_prob = 0.02;
  int64_t data_wait_ns = 2 * kNsPerSecond;
  double faults_per_day = 8.0;  // job-level rates (nodes x rate per node-day)
  double sdc_per_day = 0.5;
  double in_step_fault_prob = 0.7;  // a crash lands inside a step (else between activities)
  double hang_prob = 0.2;           // an in-step fault hangs before it is detected
  int64_t hang_ns = 600 * kNsPerSecond;
  int64_t teardown_ns = 120 * kNsPerSecond;
  int64_t warmup_ns = 300 * kNsPerSecond;  // process start to first step (init, restore, set-up)
  double requeue_prob = 0.3;
  int64_t requeue_ns = 900 * kNsPerSecond;
  double explicit_restore_prob = 0.7;  // restore_end present; else the ledger infers the target
  double rfc3339_prob = 0.0;           // fraction of times written as RFC 3339 strings
};

struct SimResult {
  Breakdown truth;
  uint64_t events = 0;
  int64_t faults = 0;
  int64_t sdc_detections = 0;
};

// Runs one simulated job. `emit` receives each event as one JSON line (without the newline); pass
// nullptr to skip writing events (the planner's Monte Carlo).
using LineSink = std::function<void(std::string_view line)>;
SimResult simulate(const SimParams& params, const LineSink& emit);

// "2027-01-01T00:00:00.000000000Z"
std::string format_rfc3339_ns(int64_t unix_ns);

}  // namespace sdc::goodput
