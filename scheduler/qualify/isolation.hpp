// Process isolation: each device's probes run in a child process (a `worker`) under a watchdog, so a
// probe that hangs, crashes or leaves its device unusable marks that device device_error while the
// parent goes on testing the others and writes the report. Workers for different devices run in
// parallel. A worker writes one JSON line to fd 3 (kWorkerProtocolFd) when a probe starts, a
// heartbeat line as the probe progresses (after each kernel or pass), and one line with each result;
// the parent re-creates the results from them. Its stdout goes to the parent's stderr, so library
// logging cannot corrupt the protocol. A CUDA worker sees only its own GPU (CUDA_VISIBLE_DEVICES).
//
// Hang or overrun: a worker silent (no line at all) for the watchdog is hung: device_error. Silence
// counts only while the worker could run: the time its threads waited for a CPU (the kernel's run
// delay, on a loaded node) is added to the watchdog, so a starved but healthy worker is never hung,
// while one that stops answering (blocked, or spinning on a device that never finishes) still is. At
// the deadline (the sweep's budget, or qualify's) the worker is killed; its probe in flight is a hang
// when the worker had been silent while it could run for at least half the time the probe had and at
// least kMinHangSilence_s, and otherwise "could not test" (skipped): it was still making progress.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "host/backend.hpp"
#include "scheduler/qualify/runner.hpp"
#include "scheduler/qualify/worker_protocol.hpp"

namespace sdc {

// At a deadline, a probe silent for less than this is never called hung.
inline constexpr double kMinHangSilence_s = 1.0;

struct IsolationLimits {
  // Watchdog: the longest a worker may stay silent (no start, heartbeat or result) before its device
  // is declared hung and the worker killed.
  double probe_timeout_s = 300;
  // The end of the time budget (a sweep pass's, or qualify's): the worker is killed there.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::string budget_name = "sweep budget";  // names the deadline in reasons
  // Readable when the parent has been asked to stop (a signal's self-pipe); -1 for none.
  int stop_fd = -1;
};

// kUnreadable: the worker sent a line that is not the protocol (corrupt memory can write anything);
// it is killed and the probe in flight, or the next, is a device_error.
enum class WorkerEnd { kCompleted, kHung, kCrashed, kOutOfBudget, kStopped, kUnreadable };

struct WorkerRun {
  // One per probe the worker started, in order; the probe in flight when it ended included (device_error
  // when it hung or crashed, skipped when it was still progressing at the deadline or the parent was
  // stopped).
  std::vector<ProbeResult> results;
  // Re-runs with a new seed after a failure (the worker's --retry-failures).
  std::vector<ProbeResult> retries;
  WorkerEnd end = WorkerEnd::kCompleted;
};

// The worker's command line for one device and its probes.
using WorkerCommand =
    std::function<std::vector<std::string>(const DeviceIdentity& device, const std::vector<std::string>& probe_ids)>;

// The environment a worker for `device` gets on top of the parent's: CUDA_VISIBLE_DEVICES=<its UUID>
// for a GPU, so the worker opens no context on any other GPU.
std::vector<std::pair<std::string, std::string>> worker_environment(const DeviceIdentity& device);

// Runs `argv` as a worker for `device`. `on_start(probe)` is called as each probe starts. Throws
// InputError when the worker reports bad input. Results carry the parent's index of `device`.
WorkerRun run_worker(const std::vector<std::string>& argv, const DeviceIdentity& device,
                     const std::vector<std::string>& probe_ids, const IsolationLimits& limits,
                     const std::function<void(const std::string&)>& on_start = {});

// Runs a worker per device, all at once; returns their runs in device order. A device with an
// open_error gets no worker: its first probe is a device_error with that reason. `on_start(device, probe)`
// and `on_done(device, run)` (as each worker ends) may be called from several threads, one at a
// time. Rethrows a worker's InputError.
std::vector<WorkerRun> run_workers(const std::vector<DeviceIdentity>& devices,
                                   const std::vector<std::string>& probe_ids, const WorkerCommand& command,
                                   const IsolationLimits& limits,
                                   const std::function<void(size_t, const std::string&)>& on_start = {},
                                   const std::function<void(size_t, WorkerRun&)>& on_done = {});

// run_probes with every device in its own worker; the report has one result per device and probe.
// `retries` (when not null) receives the workers' re-runs.
RunReport run_probes_isolated(const std::vector<std::string>& probe_ids, const std::vector<DeviceIdentity>& devices,
                              const RunOptions& options, const std::string& mode, const WorkerCommand& command,
                              const IsolationLimits& limits, std::vector<ProbeResult>* retries = nullptr);

// The seed of the re-run after a failure: new, and still a pure function of the run seed.
uint64_t retry_seed(uint64_t run_seed);

// The devices `executable --backend B ... devices --json --protocol-fd 3` lists (a GPU that CUDA does
// not show among them, with its open_error). Enumerating in a child process leaves this one without a
// CUDA context while its workers run (EXCLUSIVE_PROCESS compute mode would refuse them a context
// otherwise). The child answers on fd 3, so nothing printed on its stdout matters. Throws
// NoDeviceError with the child's reason when it lists none.
std::vector<DeviceIdentity> list_devices_in_child(const std::string& executable, const BackendOptions& backend);

}  // namespace sdc
