// What `run` and `qualify` share: options, seed, progress, table, verdict and JSON report.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "probes/probe.hpp"

namespace sdc::cli {

struct ProbeRunArgs {
  std::optional<uint64_t> seed;
  std::string json_path;
  std::string inject;
  std::optional<uint64_t> size_bytes;
  std::optional<uint32_t> iterations;
  std::string device = "all";
};

void add_probe_run_options(CLI::App* sub, ProbeRunArgs& args);

// Runs `probes` (or, when empty, every probe included at `level` on each device), prints the
// table and verdict, writes the JSON report, and returns the exit code.
int run_and_report(const GlobalOptions& global, const ProbeRunArgs& args, const std::vector<std::string>& globs,
                   Level level, const std::string& mode);

}  // namespace sdc::cli
