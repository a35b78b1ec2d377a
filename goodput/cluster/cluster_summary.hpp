// One job's summary: the JSON of `sdcprobe goodput --json --job-id N`, as the Slurm epilog writes it
// (deploy/slurm/goodput-epilog.sh).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "goodput/breakdown.hpp"
#include "goodput/tally.hpp"

namespace sdc::goodput::cluster {

struct JobSummary {
  int64_t job_id = 0;
  goodput::Breakdown breakdown;
  std::optional<goodput::Tally> measured;  // absent when the ledger read standard input
};

// Parses `text`; throws InputError naming `path` and the field. The labels must sum to wall_ns.
JobSummary parse_job_summary(const std::string& path, const std::string& text);
JobSummary read_job_summary(const std::string& path);

}  // namespace sdc::goodput::cluster
