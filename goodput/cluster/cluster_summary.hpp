// One job's summary: the JSON of `sdcprobe goodput --json --job-id N`, as the Slurm epilog writes it
// (deploy/slurm/goodput-epilog.sh).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "goodput/breakdown.hpp"
#include "goodput/run_hangs.hpp"
#include "goodput/tally.hpp"

namespace sdc::goodput::cluster {

// A hang of the job (the summary's "hangs", goodput/run_hangs.hpp) and what it cost: its attempt's
// detection & teardown, and where each culprit ran.
struct JobHang {
  int64_t detection_teardown_ns = 0;
  std::vector<goodput::RankRecord> culprits;
};

struct JobSummary {
  int64_t job_id = 0;
  goodput::Breakdown breakdown;
  std::optional<goodput::Tally> measured;  // absent when the ledger read standard input
  std::vector<JobHang> hangs;              // those that hung the job (not "no_hang")
};

// The hangs of `sdcprobe goodput`'s reading, as a summary holds them.
std::vector<JobHang> job_hangs(const std::vector<goodput::RunHang>& hangs);

// Parses `text`; throws InputError naming `path` and the field. The labels must sum to wall_ns.
JobSummary parse_job_summary(const std::string& path, const std::string& text);
// The files `arguments` name: each file as given, and a directory's *.json, sorted.
std::vector<std::string> summary_files(const std::vector<std::string>& arguments);
JobSummary read_job_summary(const std::string& path);

}  // namespace sdc::goodput::cluster
