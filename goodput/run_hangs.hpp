// The hangs of a run for `sdcprobe goodput`: each folder of flight-recorder dumps that GoodputLog
// wrote beside the event logs (flight_recorder/<attempt>/, docs/goodput.md "Hangs"), attributed
// (goodput/hang_attribution.hpp), with each culprit's host and GPU from its process_start in that
// attempt, and the attempt's detection & teardown from the ledger.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "goodput/breakdown.hpp"
#include "goodput/hang_attribution.hpp"
#include "goodput/tally.hpp"

namespace sdc::goodput {

struct RunHang {
  std::string folder;
  int64_t slurm_restart = -1, attempt = -1;  // from the folder's name, as GoodputLog names it
  HangReport report;
  std::vector<RankRecord> culprit_places;  // per report.culprits; empty where no log says
  int64_t timeout_ms = 0;                  // the longest timeout of the ranks' newest collectives
  AttemptLoss loss;                        // the attempt's detection & teardown; zero where it has none
};

// The attempt a dump folder's name gives ("attempt3", "requeue1.attempt3"); false for another name.
bool attempt_of_folder(const std::string& name, int64_t& slurm_restart, int64_t& attempt);

// Where `rank` ran in the attempt (slurm_restart, attempt): its process_start's record there; with
// attempt -1 (a folder not named by attempt), its last. Empty when no log says.
RankRecord place_of(const std::vector<RankStart>& starts, int rank, int64_t slurm_restart, int64_t attempt);
// "node7, GPU-8f2c..., 00000000:19:00.0": the record's fields that are known.
std::string place_text(const RankRecord& where);

// The process_starts of the event logs at `paths` (`sdcprobe hang --events`); throws InputError
// naming the file and line of a bad event.
std::vector<RankStart> read_rank_starts(const std::vector<std::string>& paths);

// Looks beside each event log (not "-") for flight_recorder/*/, and names each culprit's place from
// `starts` (Tally::starts) and each attempt's loss from `attempts` (Breakdown::attempts). Throws
// InputError naming a dump that cannot be read.
std::vector<RunHang> find_run_hangs(const std::vector<std::string>& event_paths, const std::vector<RankStart>& starts,
                                    const std::vector<AttemptLoss>& attempts);

nlohmann::ordered_json run_hangs_json(const std::vector<RunHang>& hangs);
std::string run_hangs_text(const std::vector<RunHang>& hangs);

}  // namespace sdc::goodput
