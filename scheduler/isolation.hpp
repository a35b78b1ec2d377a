// Process isolation: each device's probes run in a child process (a `worker`) under a watchdog, so a
// probe that hangs, crashes or leaves its device unusable marks that device device_error while the
// parent goes on testing the others and writes the report. The worker prints one JSON line when a
// probe starts and one with each result; the parent re-creates the results from them.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "scheduler/runner.hpp"

namespace sdc {

struct IsolationLimits {
  // Watchdog: the longest one probe may run before its device is declared hung and its worker killed.
  double probe_timeout_s = 300;
  // The end of a sweep's budget: the worker is killed there and its probe in flight recorded as skipped.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Readable when the parent has been asked to stop (a signal's self-pipe); -1 for none.
  int stop_fd = -1;
};

enum class WorkerEnd { kCompleted, kHung, kCrashed, kOutOfBudget, kStopped };

struct WorkerRun {
  // One per probe the worker started, in order; the probe in flight when it ended included (device_error
  // when it hung or crashed, skipped when the budget ran out or the parent was stopped).
  std::vector<ProbeResult> results;
  // Re-runs with a new seed after a failure (the worker's --retry-failures).
  std::vector<ProbeResult> retries;
  WorkerEnd end = WorkerEnd::kCompleted;
};

// The worker's command line for one device and its probes.
using WorkerCommand =
    std::function<std::vector<std::string>(const DeviceIdentity& device, const std::vector<std::string>& probe_ids)>;

// Runs `argv` as a worker for `device`. `on_start(probe)` is called as each probe starts. Throws
// InputError when the worker reports bad input.
WorkerRun run_worker(const std::vector<std::string>& argv, const DeviceIdentity& device,
                     const std::vector<std::string>& probe_ids, const IsolationLimits& limits,
                     const std::function<void(const std::string&)>& on_start = {});

// run_probes with every device in its own worker; the report has one result per device and probe.
// `retries` (when not null) receives the workers' re-runs.
RunReport run_probes_isolated(const std::vector<const Probe*>& probes,
                              const std::vector<std::unique_ptr<Device>>& devices, const RunOptions& options,
                              const std::string& mode, const WorkerCommand& command, const IsolationLimits& limits,
                              std::vector<ProbeResult>* retries = nullptr);

// The seed of the re-run after a failure: new, and still a pure function of the run seed.
uint64_t retry_seed(uint64_t run_seed);

// The worker's side of the protocol.
std::string worker_start_line(const std::string& probe_id, bool retry = false);
std::string worker_result_line(const ProbeResult& result, bool retry);
// Bad input found by the worker (e.g. a size a probe rejects): run_worker rethrows it as InputError.
std::string worker_input_error_line(const std::string& message);
ProbeResult result_from_json(const nlohmann::json& j);  // the inverse of to_json(ProbeResult)

// Runs `shell_command` with /bin/sh -c (the sweep's idle check). Returns its exit code, or -1 when it
// ran past `timeout_s` or `stop_fd` became readable (it is killed then).
int run_shell_command(const std::string& shell_command, double timeout_s, int stop_fd);

}  // namespace sdc
