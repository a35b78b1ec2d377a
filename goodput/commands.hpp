// The work behind `sdcprobe goodput`, `plan` and `simulate`, callable without the CLI (the tests
// call these). Each returns the process exit code; bad input throws InputError.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "goodput/ledger.hpp"
#include "goodput/planner.hpp"
#include "goodput/simulator.hpp"

namespace sdc::goodput {

struct GoodputOptions {
  // Event logs or glob patterns; "-" reads standard input. Several files are merged by rank
  // (goodput/merge.hpp).
  std::vector<std::string> events_paths;
  std::string sacct_path;  // `sacct -j JOBID --duplicates --json` output; empty: none
  bool json = false;
  std::string svg_path;  // empty: no SVG
  bool lenient = false;
  // Slurm's job id, written into the JSON so that `fleet goodput` can match it to the accounting;
  // -1: none.
  int64_t job_id = -1;
  LedgerOptions ledger;
};
int goodput_command(const GoodputOptions& options, std::ostream& out);

int plan_command(const PlanParams& params, bool json, std::ostream& out);

struct SimulateOptions {
  std::string out_path;
  std::string truth_path;  // empty: print the ground truth only
  bool json = false;
  // Rates and costs, in the planner's units; turned into SimParams by simulate_params().
  PlanParams plan;
  double step_s = 10;
  double rfc3339_fraction = 0;
};
SimParams simulate_params(const SimulateOptions& options);
int simulate_command(const SimulateOptions& options, std::ostream& out);

}  // namespace sdc::goodput
