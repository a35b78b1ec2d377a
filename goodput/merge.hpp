// Merges the per-rank event logs of one job into the timeline the ledger reads (docs/goodput.md,
// "Several ranks"): rank 0's events, plus the faults and SDC detections of the other ranks.
#pragma once

#include <string>
#include <vector>

#include "goodput/analyze.hpp"
#include "goodput/sacct.hpp"
#include "goodput/tally.hpp"

namespace sdc::goodput {

// Each argument is a file, or a glob pattern (when no file has that exact name) expanded in sorted
// order; a pattern that matches nothing is an error. The same file named twice is read once.
std::vector<std::string> expand_event_paths(const std::vector<std::string>& arguments);

// The rank of a file: the "rank" field of its first event, else the number after "rank" in the
// file name (events.rank3.jsonl), else 0 when it is the only file. Throws InputError naming the
// file otherwise.
// Reads each file once, checks that each is in time order, merges them by time (ties: rank 0's
// files first, then by rank, then in the order given, then by line) and runs the result through the
// ledger as it goes. Rank 0's file is streamed; of the others only the faults are held (all of a
// second file of rank 0), so memory grows with the faults, not the logs. Errors name the file and
// line. With `allocations` (Slurm's records of the job, read from `sacct_path`), the scheduler's
// eligible, start and end times are merged in as job_eligible, alloc_granted and alloc_released
// (job_end for the last), and the loop's own job_end is dropped. With `measured`, the same pass
// counts what the job's logs measured (goodput/tally.hpp).
Analysis analyze_files(const std::vector<std::string>& paths, const LedgerOptions& options = {}, bool lenient = false,
                       const std::vector<SlurmRecord>* allocations = nullptr, const std::string& sacct_path = "",
                       Tally* measured = nullptr);

}  // namespace sdc::goodput
