// The hangs of a run for `sdcprobe goodput`: each folder of flight-recorder dumps that GoodputLog
// wrote beside the event logs (flight_recorder/<attempt>/, docs/goodput.md "Hangs"), attributed
// (goodput/hang_attribution.hpp), with each culprit's host from its event log's process_start.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "goodput/hang_attribution.hpp"

namespace sdc::goodput {

struct RunHang {
  std::string folder;
  HangReport report;
  std::vector<std::string> culprit_hosts;  // per report.culprits; "" where no log names it
  int64_t timeout_ms = 0;                  // the longest timeout of the ranks' newest collectives
};

// Looks beside each event log (not "-") for flight_recorder/*/. Throws InputError naming a dump
// that cannot be read.
std::vector<RunHang> find_run_hangs(const std::vector<std::string>& event_paths);

nlohmann::ordered_json run_hangs_json(const std::vector<RunHang>& hangs);
std::string run_hangs_text(const std::vector<RunHang>& hangs);

}  // namespace sdc::goodput
