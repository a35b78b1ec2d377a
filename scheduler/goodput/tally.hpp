// What a job's event logs measured besides the ledger's labels: the count and time of its blocking
// saves, data waits, evals and probes, the spacing of its saves, and its incidents. The fleet's work
// list uses them to say what dominates blocking overhead and which checkpoint interval the planner
// would pick (docs/goodput.md, "Cluster").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// Reads the files again (the ledger's pass does not keep these). Throws InputError naming the file
// and line on bad input unless `lenient`.
Tally tally_files(const std::vector<std::string>& paths, bool lenient);

}  // namespace sdc::goodput
