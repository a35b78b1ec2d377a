// Reads an event log and runs it through the ledger: the one call behind `sdcprobe goodput`.
#pragma once

#include <istream>

#include "scheduler/goodput/breakdown.hpp"
#include "scheduler/goodput/event.hpp"
#include "scheduler/goodput/ledger.hpp"

namespace sdc::goodput {

struct Analysis {
  Breakdown breakdown;
  EventReader::Stats stats;
};

// Throws InputError naming the line of the first bad event, unless `lenient` (then bad lines are
// skipped and counted in stats.skipped).
Analysis analyze(std::istream& in, const LedgerOptions& options = {}, bool lenient = false);

}  // namespace sdc::goodput
