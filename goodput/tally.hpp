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

struct Tally {
  Activity saves, data_waits, evals, probes;
  // Mean time between the ends of consecutive saves in the file with the most saves; 0 with fewer
  // than two saves.
  int64_t save_interval_ns = 0;
  // Faults and SDC detections, one per incident: reports by several ranks with no step_end between
  // them are one incident.
  int64_t incidents = 0;
};

// Counts a Tally from the events of a job's files, one file after another, each in its own order.
// Keeps 8 bytes per step_end and fault of all files (incidents are counted over all of them).
class TallyCounter {
 public:
  // `order`: the file's place among the files as given; of files with as many saves, the first
  // given sets the save interval.
  void start_file(size_t order);
  void add(const Event& e);
  void end_file();
  Tally finish();

 private:
  Tally tally_;
  std::vector<int64_t> faults_, step_ends_;
  // The file being counted: the begin time of each open activity (-1: none), and its saves.
  int64_t save_begin_ = -1, wait_begin_ = -1, eval_begin_ = -1, probe_begin_ = -1;
  int64_t saves_ = 0, first_save_end_ = 0, last_save_end_ = 0;
  size_t order_ = 0;
  // The file with the most saves so far.
  int64_t most_saves_ = 0;
  size_t most_saves_order_ = 0;
};

}  // namespace sdc::goodput
