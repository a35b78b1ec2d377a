// Reads one event log and runs it through the ledger, counting what it measured in the same pass:
// `sdcprobe goodput` on one log (several go through analyze_files, goodput/merge.hpp).
#pragma once

#include <istream>
#include <string>

#include "goodput/breakdown.hpp"
#include "goodput/event.hpp"
#include "goodput/ledger.hpp"
#include "goodput/tally.hpp"

namespace sdc::goodput {

struct Analysis {
  Breakdown breakdown;
  EventReader::Stats stats;
};

// Throws InputError naming the line of the first bad event, unless `lenient` (then bad lines are
// skipped and counted in stats.skipped). With `measured`, the same pass counts what analyze_files
// would.
Analysis analyze(std::istream& in, const LedgerOptions& options = {}, bool lenient = false, Tally* measured = nullptr);
// The file at `path` (host/input_file: a FIFO too, read once).
Analysis analyze_file(const std::string& path, const LedgerOptions& options, bool lenient, Tally* measured);

// A log with no process_start or alloc_granted whose whole time the ledger labels queue (only a
// replica check's events, say) cannot be told from queue: an InputError, `where` + kNoStart, or
// with `lenient` a skip counted in the stats (analyze, and analyze_files without Slurm's records).
inline constexpr const char* kNoStart =
    "no process_start (GoodputLog.attempt()) or alloc_granted: the job's time cannot be told from its queue; "
    "log the start of each attempt, or give --sacct";
void check_started(Analysis& analysis, bool started, bool lenient, const std::string& where);

// ledger.finish(). A restore that a fault leaves pending at the end of the log, to a checkpoint the
// ledger has forgotten, is an InputError naming `restore_asked_at` (where that fault is: "line 7");
// `lenient` counts it in stats as a skipped line instead and settles the incident without the restore.
Breakdown finish_ledger(Ledger& ledger, const std::string& restore_asked_at, bool lenient, EventReader::Stats& stats);

}  // namespace sdc::goodput
