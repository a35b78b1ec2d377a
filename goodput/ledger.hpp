// The goodput ledger: labels every nanosecond of a run, streaming, with the rules of DESIGN.md
// ("Goodput") and docs/goodput.md. Memory is bounded by the steps since the oldest checkpoint that
// can still be a restore target, not by the length of the log.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "goodput/breakdown.hpp"
#include "goodput/event.hpp"

namespace sdc::goodput {

struct LedgerOptions {
  // Committed checkpoints of the current lineage kept as possible restore targets; a restore to an
  // older one is an input error. Older steps are settled and forgotten.
  int keep_checkpoints = 64;
  // A silence between events longer than this (while an allocation is held) counts as a gap.
  int64_t gap_threshold_ns = 600'000'000'000;
};

// The in-flight-step rule needs "the median duration of the steps completed so far"; the ledger and
// the simulator both use the median of the last kMedianWindow completed steps (the lower middle
// value when the count is even), which bounds memory and follows drift in step time.
inline constexpr size_t kMedianWindow = 4096;

class StepMedian {
 public:
  void add(int64_t duration_ns);
  int64_t median() const;  // 0 before any step completed

 private:
  std::vector<int64_t> ring_;
  size_t next_ = 0;
  mutable std::vector<int64_t> scratch_;  // median's working copy, kept to save an allocation a call
};

class Ledger {
 public:
  explicit Ledger(LedgerOptions options = {});

  // Feeds one event. Throws InputError (without changing the ledger) when the event is inconsistent
  // with what came before: time going backwards, an end without its begin, an event after job_end.
  void add(const Event& event);
  // Settles everything and returns the breakdown; the wall time ends at job_end or the last event.
  // Throws InputError, changing nothing, when the restore a fault left pending (restore_pending())
  // targets a checkpoint older than the kept ones.
  Breakdown finish();
  // A fault has started an incident whose restore is still to come (at the next step_begin, or in
  // finish()).
  bool restore_pending() const { return incident_ && !restored_; }
  // Lenient reading, after finish() threw: the incident is settled without its restore.
  void drop_pending_restore() { restored_ = true; }

  // Records currently held (for the memory-bound test).
  size_t open_steps() const { return records_.size(); }

 private:
  enum class Phase : uint8_t { kQueue, kWarmup, kTraining, kIncident, kEnded };
  enum class Work : uint8_t { kTrain, kBlock, kProbe };  // what a pending training segment was
  // kOverlapBit is a probe the loop does not wait for: it changes no label.
  enum Activity : uint8_t {
    kStepBit = 1,
    kCkptBit = 2,
    kEvalBit = 4,
    kDataWaitBit = 8,
    kProbeBit = 16,
    kOverlapBit = 32
  };
  static constexpr uint8_t kBlockBits = kCkptBit | kEvalBit | kDataWaitBit;
  // The blocking spans other than steps, each with the median of its completed durations: one still
  // open at a fault keeps its label for at most that median.
  static constexpr uint8_t kSpanBits[4] = {kCkptBit, kEvalBit, kDataWaitBit, kProbeBit};
  static constexpr size_t kSpanKinds = 4;
  // The index of `bit` in kSpanBits, or -1 (steps, probes the loop does not wait for).
  static int span_index(uint8_t bit);
  struct Segment {
    int64_t begin, end;
    Work work;
  };
  // A possible restore target: the end of step `step`'s save (its step_end when it had none), with
  // the tentative totals at that instant.
  struct Record {
    int64_t step;
    int64_t train_ns;
    int64_t block_ns;
    bool committed;
  };

  // The Activity bit of a begin or end event; 0 for other events. A probe_end without "blocking"
  // ends the one probe that is open.
  uint8_t activity_bit(const Event& event) const;
  void check(const Event& event) const;
  void label_until(int64_t t);
  void settle(Category category, int64_t ns, bool sdc);
  void commit_pending();
  // Labels the training time since the last progress when training stops at `t` without progress.
  void abandon_pending(int64_t t);
  void start_incident(bool sdc, const Event& event);
  // Index of the newest record whose step is <= `step` (optionally only committed ones), or -1.
  static int64_t newest_at_or_before(const std::deque<Record>& records, int64_t step, bool committed_only);
  void leave_training(uint8_t keep_open);
  void rollback_to_step(int64_t step, bool only_committed);
  void apply_implicit_restore();
  void on_commit(int64_t step);

  LedgerOptions options_;
  Breakdown totals_;
  bool started_ = false;
  int64_t t_first_ = 0;
  int64_t t_last_ = 0;
  Phase phase_ = Phase::kQueue;
  uint8_t open_ = 0;       // Activity bits currently open
  uint8_t abandoned_ = 0;  // activities cut short by a fault; their late end is ignored
  int64_t step_no_ = 0;
  int64_t step_begin_ = 0;
  std::vector<Segment> pending_;  // training time since the last progress, not yet labelled
  // Tentative totals of the current lineage: kept unless a rollback discards them.
  int64_t train_ns_ = 0;
  int64_t block_ns_ = 0;
  std::deque<Record> records_;
  int committed_ = 0;
  bool pruned_ = false;
  // Incident state: set by a fault, cleared by the first step of the next attempt.
  bool incident_ = false;
  bool incident_sdc_ = false;
  bool restored_ = false;
  bool have_last_good_ = false;
  int64_t last_good_step_ = 0;
  int64_t rework_from_ = 0;  // in-flight step at the stop: rework in [rework_from_, rework_until_)
  int64_t rework_until_ = 0;
  // The attempt whose detection & teardown is being counted, and whether it has had its fault.
  AttemptLoss attempt_;
  bool attempt_faulted_ = false;
  void end_attempt();
  StepMedian median_;
  std::array<StepMedian, kSpanKinds> span_median_;
  std::array<int64_t, kSpanKinds> span_begin_{};
};

}  // namespace sdc::goodput
