// The work behind `sdcprobe hang DIR`: read a job's flight-recorder dumps and name the rank that
// hung it (goodput/hang_attribution.hpp). Bad input throws InputError naming the file.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "goodput/event.hpp"
#include "goodput/hang_attribution.hpp"

namespace sdc::goodput {

struct HangOptions {
  std::string dir;                  // the folder of the dumps
  std::string json_path;            // also write the report as JSON; empty: none
  int world_size = 0;               // 0: from the dumps
  std::vector<std::string> events;  // event logs or glob patterns naming where each rank ran; empty: none
};

// `places`: where each culprit ran, per report.culprits (empty: not known).
nlohmann::json hang_report_json(const HangReport& report, const std::vector<RankRecord>& places = {});

// Prints the report; returns the exit code (0: read and attributed, whatever the verdict).
int hang_command(const HangOptions& options, std::ostream& out);

}  // namespace sdc::goodput
