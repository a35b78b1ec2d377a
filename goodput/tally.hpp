// What a job's event logs measured besides the ledger's labels: the count and time of its blocking
// saves, data waits, evals and probes, the spacing of its saves, and its incidents. The fleet's work
// list uses them to say what dominates blocking overhead and which checkpoint interval the planner
// would pick (docs/goodput.md, "Cluster").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "goodput/event.hpp"

namespace sdc::goodput {

struct Activity {
  int64_t count = 0;  // completed begin..end pairs
  int64_t ns = 0;     // their total duration
  bool operator==(const Activity& o) const { return count == o.count && ns == o.ns; }
};

// Where a rank ran in one attempt: its process_start's rank record (goodput/event.hpp).
struct RankStart {
  int64_t rank = 0;
  int64_t slurm_restart = -1, attempt = -1;  // -1: the process_start does not say
  RankRecord where;
};

struct Tally {
  Activity saves, data_waits, evals, probes;
  // Mean time between the ends of consecutive saves of one attempt (from a process_start to the
  // next), over the attempts of the file with the most saves; 0 when no attempt saved twice. The
  // time from an attempt's last save to the next attempt's first (a crash, a requeue) is not an
  // interval the loop chose.
  int64_t save_interval_ns = 0;
  // Faults and SDC detections, one per incident: reports by several ranks with no step_end of rank 0
  // between them are one incident; a step_end after another rank's fault and before rank 0 starts
  // over is the dying attempt's (as in the merge), not progress.
  int64_t incidents = 0;
  // Every rank's process_starts that say where it ran, in file order (not in a job summary).
  std::vector<RankStart> starts;
};

// The number after the last "rank" in a file's name (events.rank3.jsonl: 3), or -1.
int64_t rank_from_name(const std::string& path);

// Counts a Tally from the events of a job's files, one file after another, each in its own order.
// As in the ledger, the job's activity (saves, data waits, evals, probes, steps) is rank 0's: with
// GoodputCallback every rank logs its own saves, which counted over all files would count an
// N-rank job's N-fold. Faults count from every file. Keeps 8 bytes per step_end and fault.
class TallyCounter {
 public:
  // `order`: the file's place among the files as given; of files with as many saves, the first
  // given sets the save interval. `name_rank`: the rank its name says (events.rank3.jsonl), -1 when
  // none; the "rank" of its first event, when it has one, says instead. A file whose rank neither
  // says counts as rank 0 when it is the only file.
  void start_file(size_t order, int64_t name_rank, bool only_file);
  void add(const Event& e);
  void end_file();
  Tally finish();

 private:
  Tally tally_;
  std::vector<int64_t> faults_, step_ends_;
  std::vector<int64_t> other_faults_, restarts_;  // other ranks' faults; rank 0's starts (is_restart)
  // The file being counted: the begin time of each open activity (-1: none), and its saves.
  int64_t save_begin_ = -1, wait_begin_ = -1, eval_begin_ = -1, probe_begin_ = -1;
  int64_t saves_ = 0;
  // The attempt being counted: its saves and the end of its first and last; the file's attempts
  // before it: the time between their first and last saves, and the intervals in it.
  int64_t attempt_saves_ = 0, first_save_end_ = 0, last_save_end_ = 0;
  int64_t saved_span_ns_ = 0, save_gaps_ = 0;
  void end_attempt();
  size_t order_ = 0;
  int64_t rank_ = -1;  // the file's rank, -1 until known
  bool first_event_ = true, only_file_ = false;
  // The file with the most saves so far.
  int64_t most_saves_ = 0;
  size_t most_saves_order_ = 0;
};

}  // namespace sdc::goodput
