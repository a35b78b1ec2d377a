#include "goodput/tally.hpp"

#include <algorithm>
#include <filesystem>
#include <regex>

namespace sdc::goodput {
namespace {

void close(int64_t& begin, int64_t t, Activity& a) {
  if (begin < 0) return;
  ++a.count;
  a.ns += t - begin;
  begin = -1;
}

}  // namespace

int64_t rank_from_name(const std::string& path) {
  static const std::regex kRank("rank([0-9]{1,18})");
  const std::string name = std::filesystem::path(path).filename().string();
  int64_t rank = -1;
  for (auto it = std::sregex_iterator(name.begin(), name.end(), kRank); it != std::sregex_iterator(); ++it) {
    rank = std::stoll((*it)[1].str());
  }
  return rank;
}

void TallyCounter::start_file(size_t order, int64_t name_rank, bool only_file) {
  order_ = order;
  rank_ = name_rank;
  first_event_ = true;
  only_file_ = only_file;
  save_begin_ = wait_begin_ = eval_begin_ = probe_begin_ = -1;
  saves_ = attempt_saves_ = first_save_end_ = last_save_end_ = saved_span_ns_ = save_gaps_ = 0;
}

void TallyCounter::end_attempt() {
  if (attempt_saves_ > 1) {
    saved_span_ns_ += last_save_end_ - first_save_end_;
    save_gaps_ += attempt_saves_ - 1;
  }
  attempt_saves_ = 0;
}

void TallyCounter::add(const Event& e) {
  // Only the first event's "rank" says whose file it is (as in the merge).
  if (first_event_ && e.rank) rank_ = *e.rank;
  first_event_ = false;
  const bool rank0 = rank_ == 0 || (rank_ < 0 && only_file_);
  if (e.where) {
    tally_.starts.push_back(
        {e.rank.value_or(rank0 ? 0 : rank_), e.slurm_restart.value_or(-1), e.attempt.value_or(-1), *e.where});
  }
  if (e.kind == EventKind::kFaultDetected || e.kind == EventKind::kSdcDetected) {
    faults_.push_back(e.t);
    if (!rank0) other_faults_.push_back(e.t);
  } else if (!rank0) {
    return;  // another rank's activity: the job's is rank 0's
  }
  if (is_restart(e.kind)) restarts_.push_back(e.t);
  switch (e.kind) {
    case EventKind::kCkptBegin: save_begin_ = e.t; break;
    case EventKind::kCkptEnd:
      if (save_begin_ >= 0) {
        ++saves_;
        if (attempt_saves_++ == 0) first_save_end_ = e.t;
        last_save_end_ = e.t;
      }
      close(save_begin_, e.t, tally_.saves);
      break;
    case EventKind::kDataWaitBegin: wait_begin_ = e.t; break;
    case EventKind::kDataWaitEnd: close(wait_begin_, e.t, tally_.data_waits); break;
    case EventKind::kEvalBegin: eval_begin_ = e.t; break;
    case EventKind::kEvalEnd: close(eval_begin_, e.t, tally_.evals); break;
    case EventKind::kProbeBegin: probe_begin_ = e.t; break;
    case EventKind::kProbeEnd: close(probe_begin_, e.t, tally_.probes); break;
    case EventKind::kStepEnd: step_ends_.push_back(e.t); break;
    case EventKind::kProcessStart: end_attempt(); break;
    case EventKind::kFaultDetected:
    case EventKind::kSdcDetected:
      // A fault ends what was running; a late end from the dying process is not a duration.
      save_begin_ = wait_begin_ = eval_begin_ = probe_begin_ = -1;
      break;
    default: break;
  }
}

void TallyCounter::end_file() {
  end_attempt();
  if (saves_ > most_saves_ || (saves_ > 0 && saves_ == most_saves_ && order_ < most_saves_order_)) {
    most_saves_ = saves_;
    most_saves_order_ = order_;
    tally_.save_interval_ns = save_gaps_ > 0 ? saved_span_ns_ / save_gaps_ : 0;
  }
}

Tally TallyCounter::finish() {
  // Each file's are in time order: one file's need no sort.
  for (auto* times : {&faults_, &step_ends_, &other_faults_, &restarts_}) {
    if (!std::is_sorted(times->begin(), times->end())) std::sort(times->begin(), times->end());
  }
  // As in the merge, a fault on another rank stops the job: rank 0's steps after it and before its
  // next start belong to the dying attempt and are no progress.
  auto last_before = [](const std::vector<int64_t>& times, int64_t t) {
    const auto it = std::lower_bound(times.begin(), times.end(), t);
    return it == times.begin() ? int64_t{-1} : *(it - 1);
  };
  step_ends_.erase(std::remove_if(step_ends_.begin(), step_ends_.end(),
                                  [&](int64_t t) {
                                    const int64_t fault = last_before(other_faults_, t);
                                    return fault >= 0 && last_before(restarts_, t) < fault;
                                  }),
                   step_ends_.end());
  tally_.incidents = 0;
  for (size_t i = 0; i < faults_.size(); ++i) {
    // A new incident unless the previous report came after the last step that ended before this one.
    const auto last_step = std::upper_bound(step_ends_.begin(), step_ends_.end(), faults_[i]);
    const bool progressed = last_step != step_ends_.begin() && *(last_step - 1) > (i > 0 ? faults_[i - 1] : -1);
    if (i == 0 || progressed) ++tally_.incidents;
  }
  return tally_;
}

}  // namespace sdc::goodput
