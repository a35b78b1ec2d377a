#include "goodput/simulator.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <deque>
#include <random>
#include <vector>

#include "goodput/ledger.hpp"
#include "host/error.hpp"

namespace sdc::goodput {
namespace {

constexpr int64_t kNever = INT64_MAX;

// The simulator accounts for time as it creates it: it knows which steps its rollbacks discard, so
// its breakdown is the ground truth the ledger must reproduce from the events alone.
class Simulation {
 public:
  Simulation(const SimParams& p, const LineSink& emit)
      : p_(p), emit_(emit), rng_(p.seed), format_rng_(p.seed ^ 0x9E3779B97F4A7C15ull) {}

  SimResult run();

 private:
  // The blocking spans besides steps; one cut short by a fault keeps its label for the median
  // duration of its kind.
  enum Span : uint8_t { kCkpt, kEval, kDataWait, kProbe, kSpanKinds };
  struct Checkpoint {
    int64_t step;
    int64_t train_ns;  // tentative totals at the end of its save
    int64_t block_ns;
  };

  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return p > 0 && uniform() < p; }
  int64_t uniform_ns(int64_t lo, int64_t hi) {
    return hi <= lo ? lo : lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }
  int64_t jitter(int64_t mean, int64_t spread) { return std::max<int64_t>(1, mean + uniform_ns(-spread, spread)); }
  int64_t exponential_after(int64_t t, double per_day) {
    if (per_day <= 0) return kNever;
    const double wait = -std::log1p(-uniform()) / per_day * static_cast<double>(kNsPerDay);
    if (wait >= 9.0e18 - static_cast<double>(t)) return kNever;
    return t + static_cast<int64_t>(wait);
  }

  void event(int64_t t, const char* name, const char* key = nullptr, int64_t value = 0, const char* tail = nullptr);
  void add(Category c, int64_t ns, bool sdc) {
    CategoryNs& x = result_.truth[c];
    x.ns += ns;
    if (sdc) x.sdc_ns += ns;
  }
  // The ledger's median: the lower middle of the last kMedianWindow durations; 0 for none.
  static int64_t median(const std::deque<int64_t>& durations);
  static void remember(std::deque<int64_t>& durations, int64_t duration);
  // Runs one save, eval, data wait or probe of `len` after a short gap. A fault before its end cuts it
  // short and starts the incident; then it returns false.
  bool activity(const char* begin, const char* end, int64_t len, const char* step_key, int64_t step, Span kind,
                const char* end_tail, int64_t fault_at);
  // A fault detected at `detected`; `in_flight` is the begin of the step it interrupted, or -1;
  // `kept_ns` is the part of a span cut short by the fault that keeps its label (blocking overhead).
  void incident(int64_t detected, int64_t in_flight, bool sdc, int64_t kept_ns = 0);

  SimParams p_;
  const LineSink& emit_;
  std::mt19937_64 rng_;
  std::mt19937_64 format_rng_;  // separate, so writing events or not gives the same run
  std::string line_;
  SimResult result_;
  int64_t t_ = 0;
  int64_t train_ns_ = 0;  // kept training time (steps and the time between them) of the lineage
  int64_t block_ns_ = 0;  // kept saves, evals and data waits of the lineage
  std::vector<Checkpoint> lineage_;
  std::deque<int64_t> step_durations_;
  std::array<std::deque<int64_t>, kSpanKinds> span_durations_;
  int64_t step_ = 0;       // last completed step of the lineage
  int64_t last_pass_ = 0;  // step of the last clean probe
  int64_t warm_from_ = 0;
  int64_t restore_to_ = -1;
  bool explicit_restore_ = false;
  bool incident_sdc_ = false;
  int attempt_ = 0;
};

void Simulation::event(int64_t t, const char* name, const char* key, int64_t value, const char* tail) {
  ++result_.events;
  if (!emit_) return;
  char num[32];
  line_.assign("{\"t\":");
  if (p_.rfc3339_prob > 0 && static_cast<double>(format_rng_() >> 11) * 0x1.0p-53 < p_.rfc3339_prob) {
    line_ += '"';
    line_ += format_rfc3339_ns(t);
    line_ += '"';
  } else {
    line_.append(num, std::to_chars(num, num + sizeof num, t).ptr);
  }
  line_ += ",\"event\":\"";
  line_ += name;
  line_ += '"';
  if (key != nullptr) {
    line_ += ",\"";
    line_ += key;
    line_ += "\":";
    line_.append(num, std::to_chars(num, num + sizeof num, value).ptr);
  }
  if (tail != nullptr) line_ += tail;
  line_ += '}';
  emit_(line_);
}

int64_t Simulation::median(const std::deque<int64_t>& durations) {
  if (durations.empty()) return 0;
  std::vector<int64_t> sorted(durations.begin(), durations.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted[(sorted.size() - 1) / 2];
}

void Simulation::remember(std::deque<int64_t>& durations, int64_t duration) {
  durations.push_back(duration);
  if (durations.size() > kMedianWindow) durations.pop_front();
}

bool Simulation::activity(const char* begin, const char* end, int64_t len, const char* step_key, int64_t step,
                          Span kind, const char* end_tail, int64_t fault_at) {
  const bool probe = kind == kProbe;
  const int64_t gap = uniform_ns(0, p_.gap_max_ns);
  const int64_t start = t_ + gap;
  if (fault_at < start) {
    incident(std::max(fault_at, t_), -1, false);
    return false;
  }
  event(start, begin, step_key, step, probe ? ",\"probe\":\"gemm.exact.bf16\"" : nullptr);
  if (fault_at < start + len) {
    const int64_t kept = std::min(fault_at - start, median(span_durations_[kind]));
    add(Category::kBlockingOverhead, kept, probe);
    incident(fault_at, -1, false, kept);
    return false;
  }
  train_ns_ += gap;
  t_ = start + len;
  event(t_, end, step_key, step, end_tail);
  remember(span_durations_[kind], len);
  if (probe) {
    add(Category::kBlockingOverhead, len, true);  // the detector's cost, always
  } else {
    block_ns_ += len;
  }
  return true;
}

void Simulation::incident(int64_t detected, int64_t in_flight, bool sdc, int64_t kept_ns) {
  const int64_t last_progress = t_;
  if (sdc) {
    ++result_.sdc_detections;
    event(detected, "sdc_detected", "last_good_step", last_pass_, ",\"device\":\"GPU-5e2c0d1a\"");
  } else {
    ++result_.faults;
    event(detected, "fault_detected", nullptr, 0, ",\"kind\":\"xid\"");
  }
  const int64_t stopped = detected + jitter(p_.teardown_ns, p_.teardown_ns / 4);
  if (sdc) event(detected + (stopped - detected) / 2, "node_quarantined", nullptr, 0, ",\"device\":\"GPU-5e2c0d1a\"");
  int64_t rework = 0;
  // The step in flight is rework for the median step time or until the fault is detected.
  if (in_flight >= 0)
    rework = std::max<int64_t>(0, std::min(detected, in_flight + median(step_durations_)) - in_flight);
  add(Category::kRework, rework, sdc);
  add(Category::kDetectionTeardown, stopped - last_progress - rework - kept_ns, sdc);

  // Roll back: after an SDC to the newest checkpoint at or before the last clean probe.
  const int64_t bound = sdc ? last_pass_ : kNever;
  while (!lineage_.empty() && lineage_.back().step > bound) lineage_.pop_back();
  const Checkpoint target = lineage_.empty() ? Checkpoint{0, 0, 0} : lineage_.back();
  add(Category::kRework, (train_ns_ - target.train_ns) + (block_ns_ - target.block_ns), sdc);
  train_ns_ = target.train_ns;
  block_ns_ = target.block_ns;
  step_ = target.step;
  last_pass_ = target.step;
  restore_to_ = target.step;
  explicit_restore_ = chance(p_.explicit_restore_prob);
  incident_sdc_ = sdc;

  t_ = stopped;
  if (chance(p_.requeue_prob)) {
    event(t_, "alloc_released");
    const int64_t queued = jitter(p_.requeue_ns, p_.requeue_ns / 2);
    add(Category::kQueue, queued, sdc);
    t_ += queued;
    event(t_, "alloc_granted");
  } else {
    event(t_, "teardown_end");
  }
  warm_from_ = t_;
  ++attempt_;
}

SimResult Simulation::run() {
  const int64_t end = p_.start_ns + p_.duration_ns;
  t_ = p_.start_ns;
  event(t_, "job_eligible");
  t_ += p_.first_queue_ns;
  add(Category::kQueue, p_.first_queue_ns, false);
  event(t_, "alloc_granted");
  warm_from_ = t_;
  for (;;) {
    // Warm-up: from the allocation (or the end of teardown) to the first step.
    event(t_, "process_start", "attempt", attempt_);
    const int64_t warm = jitter(p_.warmup_ns, p_.warmup_ns / 5);
    event(t_, "init_begin");
    event(t_ + warm / 2, "init_end");
    if (restore_to_ >= 0 && explicit_restore_) {
      event(t_ + warm / 2, "restore_begin");
      event(t_ + warm * 3 / 4, "restore_end", "step", restore_to_);
    }
    t_ += warm;
    add(Category::kRestartWarmup, t_ - warm_from_, incident_sdc_);
    incident_sdc_ = false;

    const int64_t fault_at = exponential_after(t_, p_.faults_per_day);
    const bool fault_in_step = chance(p_.in_step_fault_prob);
    const int64_t hang = chance(p_.hang_prob) ? p_.hang_ns : 0;
    int64_t sdc_at = exponential_after(t_, p_.sdc_per_day);
    int64_t corrupt_from = -1;
    bool first = true;
    for (;;) {
      if (t_ >= end) {
        event(t_, "job_end");
        result_.truth.wall_ns = t_ - p_.start_ns;
        result_.truth.productive_ns = train_ns_;
        result_.truth[Category::kBlockingOverhead].ns += block_ns_;
        return result_;
      }
      if (!first && chance(p_.data_wait_prob) &&
          !activity("data_wait_begin", "data_wait_end", jitter(p_.data_wait_ns, p_.data_wait_ns / 2), nullptr, 0,
                    kDataWait, nullptr, fault_at)) {
        break;
      }
      // The step. A fault inside it leaves it in flight.
      const int64_t gap = first ? 0 : uniform_ns(0, p_.gap_max_ns);
      const int64_t begin = t_ + gap;
      const int64_t duration = jitter(p_.step_ns, p_.step_jitter_ns);
      const int64_t k = step_ + 1;
      if (fault_at < begin + duration && (fault_in_step || fault_at < begin)) {
        if (fault_at < begin) {
          incident(std::max(fault_at, t_), -1, false);
        } else {
          event(begin, "step_begin", "step", k);
          incident(fault_at + hang, begin, false);
        }
        break;
      }
      first = false;
      train_ns_ += gap + duration;
      event(begin, "step_begin", "step", k);
      // A probe the loop does not wait for runs inside the step; its verdict is read at the step's end.
      const bool probe_due = p_.probe_every > 0 && k % p_.probe_every == 0;
      const bool background = probe_due && chance(p_.background_probe_prob);
      if (background) {
        const int64_t from = begin + duration / 4;
        const int64_t len = std::min(jitter(p_.probe_ns, p_.probe_ns / 4), begin + duration - from);
        const bool caught = corrupt_from >= 0 || sdc_at < begin + duration;
        event(from, "probe_begin", nullptr, 0, ",\"probe\":\"gemm.exact.bf16\",\"blocking\":false");
        event(from + len, "probe_end", nullptr, 0,
              caught ? ",\"probe\":\"gemm.exact.bf16\",\"blocking\":false,\"verdict\":\"fail\""
                     : ",\"probe\":\"gemm.exact.bf16\",\"blocking\":false,\"verdict\":\"pass\"");
        result_.truth.overlapped_probe_ns += len;
      }
      t_ = begin + duration;
      event(t_, "step_end", "step", k);
      step_ = k;
      remember(step_durations_, duration);
      if (sdc_at < t_ && corrupt_from < 0) {
        corrupt_from = k;
        sdc_at = kNever;
      }
      // The probe of step k; false when it ends the attempt (a fault during it, or SDC found).
      auto probe = [&]() {
        const bool caught = corrupt_from >= 0;
        if (!background &&
            !activity("probe_begin", "probe_end", jitter(p_.probe_ns, p_.probe_ns / 4), nullptr, 0, kProbe,
                      caught ? ",\"probe\":\"gemm.exact.bf16\",\"verdict\":\"fail\""
                             : ",\"probe\":\"gemm.exact.bf16\",\"verdict\":\"pass\"",
                      fault_at)) {
          return false;
        }
        if (caught) {
          incident(t_, -1, true);
          return false;
        }
        last_pass_ = k;
        return true;
      };
      const bool save_due = p_.ckpt_every > 0 && k % p_.ckpt_every == 0;
      const Checkpoint at_step_end{k, train_ns_, block_ns_};
      // Check before commit: the probe runs before the save, due or not, and SDC is never committed.
      const bool check_first = p_.check_before_commit && save_due && p_.probe_every > 0;
      if (check_first && !probe()) break;
      if (save_due) {
        if (chance(p_.async_ckpt_prob)) {
          event(t_, "ckpt_commit", "step", k);  // no blocking part: the cut is the step's end
          lineage_.push_back(at_step_end);
        } else {
          if (!activity("ckpt_begin", "ckpt_end", jitter(p_.ckpt_write_ns, p_.ckpt_write_ns / 4), "step", k, kCkpt,
                        nullptr, fault_at)) {
            break;
          }
          event(t_, "ckpt_commit", "step", k);
          lineage_.push_back({k, train_ns_, block_ns_});
        }
      }
      if (probe_due && !check_first && !probe()) break;
      if (p_.eval_every > 0 && k % p_.eval_every == 0 &&
          !activity("eval_begin", "eval_end", jitter(p_.eval_ns, p_.eval_ns / 4), nullptr, 0, kEval, nullptr,
                    fault_at)) {
        break;
      }
    }
  }
}

}  // namespace

std::string format_rfc3339_ns(int64_t unix_ns) {
  int64_t secs = unix_ns / kNsPerSecond;
  int64_t frac = unix_ns % kNsPerSecond;
  if (frac < 0) {
    frac += kNsPerSecond;
    --secs;
  }
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = yoe + era * 400 + (m <= 2);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%09lldZ", static_cast<long long>(y),
                static_cast<long long>(m), static_cast<long long>(d), static_cast<long long>(rem / 3600),
                static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60), static_cast<long long>(frac));
  return buf;
}

SimResult simulate(const SimParams& params, const LineSink& emit) {
  if (params.step_ns <= 0 || params.duration_ns <= 0)
    throw InputError("simulate: step time and duration must be positive");
  Simulation sim(params, emit);
  return sim.run();
}

}  // namespace sdc::goodput
