// What `run` and `qualify` share: options, seed line, progress, table, verdict and JSON report. The
// work itself is a qualify session (scheduler/qualify/qualify_session.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "probes/probe.hpp"
#include "scheduler/consensus/fleet_seed.hpp"
#include "scheduler/qualify/qualify_session.hpp"

namespace sdc::cli {

struct ProbeRunArgs {
  std::optional<uint64_t> seed;
  std::optional<SeedPeriod> fleet_period;  // --seed fleet[:day|:hour]: seed from the period and the site secret
  std::string json_path;
  std::string inject;
  std::optional<uint64_t> size_bytes;
  std::optional<uint32_t> iterations;
  std::optional<double> burn_s;  // gemm.burn.*: seconds (else the level's)
  std::string device = "all";
  // qualify: each device in a watched worker process (run stays in-process, for debugging).
  bool isolate = false;
  double probe_timeout_s = 0;   // 0: by level (watchdog_seconds)
  std::string budget;           // qualify --budget; empty: by level (level_budget_seconds)
  std::string format = "text";  // text | npd
  // qualify --consensus: digests compared across devices over `comm` (local | mpi).
  bool consensus = false;
  std::string comm = "local";
  std::string golden_path;  // qualify --golden: compare with this file (implies consensus)
  bool allocated = false;   // --allocated: the GPUs are this run's alone (QualifyOptions::allocated)
  std::string store_dir;    // qualify --store: the fleet store the run's rows go to (docs/fleet.md)
};

void add_probe_run_options(CLI::App* sub, ProbeRunArgs& args);
// --seed N (decimal or 0x-hex) or fleet[:day|:hour] (scheduler/consensus/fleet_seed.hpp).
void add_seed_option(CLI::App* sub, ProbeRunArgs& args, const std::string& help);
// --probe-timeout, for the commands that isolate devices; watchdog_seconds applies its default.
void add_watchdog_option(CLI::App* sub, double& probe_timeout_s);
// --store DIR, for the commands that write the fleet store.
void add_store_option(CLI::App* sub, std::string& dir);

// Runs `probes` (or, when empty, every probe included at `level` on each device), prints the
// table and verdict (npd: the verdict first, on one short line), writes the JSON report and the
// store's rows, and returns the exit code. A store that cannot be written fails before any probe.
int run_and_report(const GlobalOptions& global, const ProbeRunArgs& args, const std::vector<std::string>& globs,
                   Level level, const std::string& mode);

}  // namespace sdc::cli
