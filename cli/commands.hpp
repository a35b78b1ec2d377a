// Each `add_*` function registers one or more subcommands on the `sdcprobe` app. A subcommand's
// callback does its work and stores the process exit code in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace sdc::cli {

// Options every command accepts (the app falls through to them from any subcommand).
struct GlobalOptions {
  std::string backend = "auto";  // auto | cpu | cuda
  int cpu_devices = 1;
  int expect_gpus = -1;  // --expect-gpus; -1: every GPU on the PCI bus
};

void add_coverage_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
void add_devices_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
void add_list_command(CLI::App& app, int& exit_code);
void add_run_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
void add_qualify_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
void add_golden_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
// The hidden worker that qualify and sweep run each device in.
void add_worker_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
// With --format npd on the command line: "UNKNOWN: could not test: <why>" on stdout, for the exits 2
// that have no report (bad input, no device, no CUDA), so node-problem-detector always gets a verdict.
void print_npd_could_not_test(int argc, char** argv, const std::string& why);
// sweep.
void add_sweep_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
// history, status and release.
void add_history_commands(CLI::App& app, int& exit_code);
// idle: the sweep's GPU idle check (NVML's process lists).
void add_idle_command(CLI::App& app, int& exit_code);
// health: what the GPUs say about themselves (NVML).
void add_health_command(CLI::App& app, int& exit_code);
// fleet sdc: consensus, rates and lemons across many nodes' reports and histories.
void add_fleet_sdc_command(CLI::App& fleet, int& exit_code);
// fleet import: reports and histories into the fleet store.
void add_fleet_import_command(CLI::App& fleet, int& exit_code);
// goodput, plan and simulate.
void add_goodput_commands(CLI::App& app, int& exit_code);
// hang: the rank that hung a job, from its flight-recorder dumps.
void add_hang_command(CLI::App& app, int& exit_code);
// `fleet goodput`: the cluster ledger and its work list.
void add_fleet_goodput_command(CLI::App& fleet, int& exit_code);

}  // namespace sdc::cli
