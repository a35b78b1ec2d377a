#include "goodput/ledger.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "host/error.hpp"

namespace sdc::goodput {
namespace {

InputError too_old(int64_t step, int keep) {
  return InputError("restore target step " + std::to_string(step) + " is older than the " + std::to_string(keep) +
                    " newest checkpoints the ledger keeps (raise --keep-checkpoints)");
}

int64_t overlap(int64_t a, int64_t b, int64_t lo, int64_t hi) {
  return std::max<int64_t>(0, std::min(b, hi) - std::max(a, lo));
}

struct Window {
  int64_t begin, end;
};

// How much of [a, b) the union of `windows` covers.
int64_t covered(int64_t a, int64_t b, std::vector<Window> windows) {
  std::sort(windows.begin(), windows.end(), [](const Window& x, const Window& y) { return x.begin < y.begin; });
  int64_t total = 0;
  int64_t reached = a;
  for (const Window& w : windows) {
    const int64_t from = std::max(w.begin, reached);
    const int64_t to = std::min(w.end, b);
    if (to > from) {
      total += to - from;
      reached = to;
    }
  }
  return total;
}

}  // namespace

void StepMedian::add(int64_t duration_ns) {
  if (ring_.size() < kMedianWindow) {
    ring_.push_back(duration_ns);
  } else {
    ring_[next_] = duration_ns;
    next_ = (next_ + 1) % kMedianWindow;
  }
}

int64_t StepMedian::median() const {
  if (ring_.empty()) return 0;
  scratch_.assign(ring_.begin(), ring_.end());
  auto mid = scratch_.begin() + static_cast<std::ptrdiff_t>((scratch_.size() - 1) / 2);
  std::nth_element(scratch_.begin(), mid, scratch_.end());
  return *mid;
}

Ledger::Ledger(LedgerOptions options) : options_(options) {
  if (options_.keep_checkpoints < 1) throw InputError("keep_checkpoints must be at least 1");
}

namespace {

bool is_begin(EventKind kind) {
  return kind == EventKind::kStepBegin || kind == EventKind::kCkptBegin || kind == EventKind::kEvalBegin ||
         kind == EventKind::kDataWaitBegin || kind == EventKind::kProbeBegin;
}

}  // namespace

int Ledger::span_index(uint8_t bit) {
  for (size_t i = 0; i < kSpanKinds; ++i) {
    if (kSpanBits[i] == bit) return static_cast<int>(i);
  }
  return -1;
}

uint8_t Ledger::activity_bit(const Event& event) const {
  switch (event.kind) {
    case EventKind::kStepBegin:
    case EventKind::kStepEnd: return kStepBit;
    case EventKind::kCkptBegin:
    case EventKind::kCkptEnd: return kCkptBit;
    case EventKind::kEvalBegin:
    case EventKind::kEvalEnd: return kEvalBit;
    case EventKind::kDataWaitBegin:
    case EventKind::kDataWaitEnd: return kDataWaitBit;
    case EventKind::kProbeBegin: return event.blocking.value_or(true) ? kProbeBit : kOverlapBit;
    case EventKind::kProbeEnd: {
      if (event.blocking) return *event.blocking ? kProbeBit : kOverlapBit;
      const uint8_t live = (open_ & (kProbeBit | kOverlapBit)) ? open_ : abandoned_;
      return (live & kOverlapBit) && !(live & kProbeBit) ? kOverlapBit : kProbeBit;
    }
    default: return 0;
  }
}

void Ledger::check(const Event& event) const {
  // The reader enforces these ranges; events built in code must keep them too (no overflow below).
  if (event.t < 0) throw InputError("\"t\" " + std::to_string(event.t) + " is out of range " + std::string(kTimeRange));
  if ((event.step && *event.step < 0) || (event.last_good_step && *event.last_good_step < 0)) {
    throw InputError("a step must not be negative");
  }
  if (phase_ == Phase::kEnded) throw InputError(std::string(event_name(event.kind)) + " after job_end");
  if (started_ && event.t < t_last_) {
    throw InputError("time goes backwards (" + std::to_string(event.t) + " ns after " + std::to_string(t_last_) +
                     " ns)");
  }
  if (event.kind == EventKind::kProbeEnd && !event.blocking && (open_ & kProbeBit) && (open_ & kOverlapBit)) {
    throw InputError("probe_end without \"blocking\" while a blocking and a non-blocking probe are open");
  }
  const uint8_t bit = activity_bit(event);
  if (bit != 0 && is_begin(event.kind) && (open_ & bit)) {
    throw InputError(std::string(event_name(event.kind)) + " while the previous one is still open");
  }
  if (bit != 0 && !is_begin(event.kind) && !(open_ & bit) && !(abandoned_ & bit)) {
    const std::string_view name = event_name(event.kind);  // "x_end" -> "x_begin"
    throw InputError(std::string(name) + " without " + std::string(name.substr(0, name.size() - 3)) + "begin");
  }
  if (event.kind == EventKind::kStepEnd && (open_ & bit) && *event.step != step_no_) {
    throw InputError("step_end for step " + std::to_string(*event.step) + " without step_begin (step " +
                     std::to_string(step_no_) + " is open)");
  }
  // Rollbacks must land on a step the ledger still holds.
  const int keep = options_.keep_checkpoints;
  if (event.kind == EventKind::kRestoreEnd && pruned_ && newest_at_or_before(records_, *event.step, false) < 0) {
    throw too_old(*event.step, keep);
  }
  if (event.kind == EventKind::kStepBegin && phase_ != Phase::kTraining && incident_ && !restored_ && pruned_) {
    const bool by_last_good = incident_sdc_ && have_last_good_;
    const int64_t bound = by_last_good ? last_good_step_ : INT64_MAX;
    if (newest_at_or_before(records_, bound, true) < 0) throw too_old(bound, keep);
  }
  if (event.kind == EventKind::kStepBegin && pruned_ && !records_.empty() && *event.step <= records_.back().step &&
      newest_at_or_before(records_, *event.step - 1, false) < 0) {
    throw too_old(*event.step - 1, keep);
  }
}

int64_t Ledger::newest_at_or_before(const std::deque<Record>& records, int64_t step, bool committed_only) {
  // Steps increase along the lineage, so the candidates are a prefix.
  auto it =
      std::upper_bound(records.begin(), records.end(), step, [](int64_t s, const Record& r) { return s < r.step; });
  int64_t idx = static_cast<int64_t>(it - records.begin()) - 1;
  while (committed_only && idx >= 0 && !records[static_cast<size_t>(idx)].committed) --idx;
  return idx;
}

void Ledger::settle(Category category, int64_t ns, bool sdc) {
  CategoryNs& c = totals_[category];
  c.ns += ns;
  if (sdc) c.sdc_ns += ns;
  if (category == Category::kDetectionTeardown) (attempt_faulted_ ? attempt_.teardown_ns : attempt_.detection_ns) += ns;
}

void Ledger::end_attempt() {
  if (attempt_.detection_ns + attempt_.teardown_ns > 0) totals_.attempts.push_back(attempt_);
  attempt_ = {};
  attempt_faulted_ = false;
}

void Ledger::label_until(int64_t t) {
  const int64_t a = t_last_;
  const int64_t len = t - a;
  t_last_ = t;
  if (len <= 0) return;
  if (phase_ != Phase::kQueue && len > options_.gap_threshold_ns) {
    ++totals_.gap_count;
    totals_.gap_ns += len;
  }
  if (open_ & kOverlapBit) totals_.overlapped_probe_ns += len;
  switch (phase_) {
    case Phase::kQueue: settle(Category::kQueue, len, incident_sdc_); break;
    case Phase::kWarmup:
      if (open_ & kProbeBit) {
        settle(Category::kBlockingOverhead, len, true);
      } else if (open_ & kBlockBits) {
        settle(Category::kBlockingOverhead, len, false);
      } else {
        settle(Category::kRestartWarmup, len, incident_sdc_);
      }
      break;
    case Phase::kTraining: {
      const Work work = (open_ & kProbeBit) ? Work::kProbe : (open_ & kBlockBits) ? Work::kBlock : Work::kTrain;
      if (!pending_.empty() && pending_.back().work == work && pending_.back().end == a) {
        pending_.back().end = t;
      } else {
        // Built in place: a temporary copied in stalled on reading its one-byte field back.
        Segment& s = pending_.emplace_back();
        s.begin = a;
        s.end = t;
        s.work = work;
      }
      break;
    }
    case Phase::kIncident: {
      if (open_ & kProbeBit) {
        settle(Category::kBlockingOverhead, len, true);
        break;
      }
      const int64_t rework = overlap(a, t, rework_from_, rework_until_);
      settle(Category::kRework, rework, incident_sdc_);
      settle((open_ & kBlockBits) ? Category::kBlockingOverhead : Category::kDetectionTeardown, len - rework,
             !(open_ & kBlockBits) && incident_sdc_);
      break;
    }
    case Phase::kEnded: break;
  }
}

void Ledger::commit_pending() {
  for (const Segment& s : pending_) {
    const int64_t len = s.end - s.begin;
    switch (s.work) {
      case Work::kTrain: train_ns_ += len; break;
      case Work::kBlock: block_ns_ += len; break;
      case Work::kProbe: settle(Category::kBlockingOverhead, len, true); break;
    }
  }
  pending_.clear();
}

void Ledger::leave_training(uint8_t keep_open) {
  abandoned_ |= static_cast<uint8_t>(open_ & ~keep_open);
  open_ &= keep_open;
}

void Ledger::abandon_pending(int64_t t) {
  // Time since the last progress was not progress: detection & teardown, except what was in flight.
  // A blocking span (probe, save, eval, data wait) keeps its label from its begin for the median of
  // its kind or until t, whichever comes first; a step is rework for the median step time m or
  // until t, where no such span covers it.
  rework_from_ = rework_until_ = 0;
  if (open_ & kStepBit) {
    rework_from_ = step_begin_;
    rework_until_ = step_begin_ + std::min(median_.median(), t - step_begin_);
  }
  std::vector<Window> probe_kept;
  std::vector<Window> block_kept;
  for (size_t i = 0; i < kSpanKinds; ++i) {
    if (!(open_ & kSpanBits[i])) continue;
    const Window kept{span_begin_[i], span_begin_[i] + std::min(span_median_[i].median(), t - span_begin_[i])};
    (kSpanBits[i] == kProbeBit ? probe_kept : block_kept).push_back(kept);
  }
  for (const Segment& s : pending_) {
    const int64_t len = s.end - s.begin;
    std::vector<Window> kept_windows = s.work == Work::kProbe   ? probe_kept
                                       : s.work == Work::kBlock ? block_kept
                                                                : std::vector<Window>{};
    const int64_t kept = covered(s.begin, s.end, kept_windows);
    kept_windows.push_back({rework_from_, rework_until_});
    const int64_t rework = covered(s.begin, s.end, kept_windows) - kept;
    settle(Category::kBlockingOverhead, kept, s.work == Work::kProbe);
    settle(Category::kRework, rework, incident_sdc_);
    settle(Category::kDetectionTeardown, len - kept - rework, incident_sdc_);
  }
  pending_.clear();
  // Whatever was running has stopped; a late *_end from the dying process is ignored.
  leave_training(0);
}

void Ledger::start_incident(bool sdc, const Event& event) {
  if (sdc) {
    incident_sdc_ = true;
    if (event.last_good_step) {
      // Two reports in one incident: trust the more conservative one.
      last_good_step_ = have_last_good_ ? std::min(last_good_step_, *event.last_good_step) : *event.last_good_step;
      have_last_good_ = true;
    }
  }
  incident_ = true;
  restored_ = false;
  if (phase_ == Phase::kTraining) {
    abandon_pending(event.t);
    phase_ = Phase::kIncident;
  } else if (phase_ == Phase::kWarmup) {
    rework_from_ = rework_until_ = 0;
    phase_ = Phase::kIncident;
  }
  attempt_faulted_ = true;  // detection & teardown from here on is the teardown
}

void Ledger::rollback_to_step(int64_t step, bool committed_only) {
  const int64_t idx = newest_at_or_before(records_, step, committed_only);
  int64_t base_train = 0;
  int64_t base_block = 0;
  if (idx >= 0) {
    base_train = records_[static_cast<size_t>(idx)].train_ns;
    base_block = records_[static_cast<size_t>(idx)].block_ns;
  } else if (pruned_) {
    // check() rules this out for restores while reading; this is the one at the end of the log.
    throw too_old(step, options_.keep_checkpoints);
  }
  const int64_t lost = (train_ns_ - base_train) + (block_ns_ - base_block);
  if (lost > 0) ++totals_.rollbacks;
  settle(Category::kRework, lost, incident_sdc_);
  train_ns_ = base_train;
  block_ns_ = base_block;
  // A restore to step s discards the checkpoints committed after s: they leave the lineage.
  while (static_cast<int64_t>(records_.size()) > idx + 1) {
    if (records_.back().committed) --committed_;
    records_.pop_back();
  }
}

void Ledger::apply_implicit_restore() {
  if (incident_sdc_ && have_last_good_) {
    rollback_to_step(last_good_step_, true);
  } else {
    rollback_to_step(INT64_MAX, true);
  }
}

void Ledger::on_commit(int64_t step) {
  const int64_t idx = newest_at_or_before(records_, step, false);
  if (idx < 0) return;
  Record& r = records_[static_cast<size_t>(idx)];
  if (r.step != step || r.committed) return;
  r.committed = true;
  ++committed_;
  // Settle what lies before the oldest checkpoint that can still be restored.
  while (committed_ > options_.keep_checkpoints) {
    while (!records_.front().committed) records_.pop_front();
    records_.pop_front();
    --committed_;
    while (!records_.front().committed) records_.pop_front();
    pruned_ = true;
  }
}

void Ledger::add(const Event& event) {
  check(event);
  if (!started_) {
    started_ = true;
    t_first_ = t_last_ = event.t;
  }
  const uint8_t bit = activity_bit(event);
  label_until(event.t);
  switch (event.kind) {
    case EventKind::kJobEligible:
    case EventKind::kInitBegin:
    case EventKind::kInitEnd:
    case EventKind::kRestoreBegin:
    case EventKind::kNodeQuarantined: break;
    case EventKind::kAllocGranted:
      if (phase_ != Phase::kTraining) phase_ = Phase::kWarmup;
      break;
    case EventKind::kAllocReleased:
    case EventKind::kProcessStart:
      // Training stopped with no fault event: an unreported failure, detected here.
      if (phase_ == Phase::kTraining) abandon_pending(event.t);
      leave_training(0);
      phase_ = event.kind == EventKind::kAllocReleased ? Phase::kQueue : Phase::kWarmup;
      if (event.kind == EventKind::kProcessStart) {
        end_attempt();
        attempt_.slurm_restart = event.slurm_restart.value_or(-1);
        attempt_.attempt = event.attempt.value_or(-1);
      }
      break;
    case EventKind::kJobEnd:
      if (phase_ == Phase::kTraining) commit_pending();
      phase_ = Phase::kEnded;
      break;
    case EventKind::kTeardownEnd:
      if (phase_ == Phase::kIncident) phase_ = Phase::kWarmup;
      break;
    case EventKind::kRestoreEnd:
      if (phase_ == Phase::kTraining) commit_pending();
      rollback_to_step(*event.step, false);
      restored_ = true;
      break;
    case EventKind::kFaultDetected:
    case EventKind::kSdcDetected: start_incident(event.kind == EventKind::kSdcDetected, event); break;
    case EventKind::kStepBegin:
      if (phase_ != Phase::kTraining) {
        // The first step of an attempt settles the incident before it.
        if (incident_ && !restored_) apply_implicit_restore();
        incident_ = incident_sdc_ = restored_ = have_last_good_ = false;
        phase_ = Phase::kTraining;
      }
      // Re-running a step the lineage already holds, without a restore_end, is a restore too.
      if (!records_.empty() && *event.step <= records_.back().step) {
        commit_pending();
        rollback_to_step(*event.step - 1, false);
      }
      open_ |= kStepBit;
      abandoned_ &= static_cast<uint8_t>(~kStepBit);
      step_no_ = *event.step;
      step_begin_ = event.t;
      break;
    case EventKind::kCkptBegin:
    case EventKind::kEvalBegin:
    case EventKind::kDataWaitBegin:
    case EventKind::kProbeBegin: {
      open_ |= bit;
      abandoned_ &= static_cast<uint8_t>(~bit);
      const int i = span_index(bit);
      if (i >= 0) span_begin_[static_cast<size_t>(i)] = event.t;
      break;
    }
    case EventKind::kStepEnd:
    case EventKind::kCkptEnd:
    case EventKind::kEvalEnd:
    case EventKind::kDataWaitEnd:
    case EventKind::kProbeEnd:
      if (!(open_ & bit)) {  // the late end of an activity a fault cut short
        abandoned_ &= static_cast<uint8_t>(~bit);
        break;
      }
      open_ &= static_cast<uint8_t>(~bit);
      if (event.kind == EventKind::kStepEnd) median_.add(event.t - step_begin_);
      if (const int i = span_index(bit); i >= 0) {
        span_median_[static_cast<size_t>(i)].add(event.t - span_begin_[static_cast<size_t>(i)]);
      }
      // The end of a probe the loop did not wait for is not progress.
      if (phase_ != Phase::kTraining || bit == kOverlapBit) break;
      commit_pending();
      if (event.kind == EventKind::kStepEnd) {
        Record& r = records_.emplace_back();  // in place, as a segment is
        r.step = *event.step;
        r.train_ns = train_ns_;
        r.block_ns = block_ns_;
      } else if (event.kind == EventKind::kCkptEnd && !records_.empty() && records_.back().step == *event.step) {
        records_.back().train_ns = train_ns_;  // the cut moves to the end of the blocking save
        records_.back().block_ns = block_ns_;
      }
      break;
    case EventKind::kCkptCommit: on_commit(*event.step); break;
  }
}

Breakdown Ledger::finish() {
  if (!started_) return {};
  if (phase_ == Phase::kTraining) commit_pending();
  if (incident_ && !restored_) apply_implicit_restore();
  incident_ = false;
  phase_ = Phase::kEnded;
  end_attempt();
  Breakdown out = totals_;
  out.productive_ns = train_ns_;
  out[Category::kBlockingOverhead].ns += block_ns_;
  out.wall_ns = t_last_ - t_first_;
  if (!out.balanced()) throw std::logic_error("goodput ledger: labels do not sum to the wall time");
  return out;
}

}  // namespace sdc::goodput
