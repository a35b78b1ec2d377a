// Process isolation's policy (isolation.hpp): what a worker's end means for its probes.
#include "scheduler/qualify/isolation.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "host/error.hpp"
#include "host/subprocess.hpp"
#include "kernels/common/random.hpp"

namespace sdc {
namespace {

using Clock = std::chrono::steady_clock;

ProbeResult unrun(const std::string& probe, const DeviceIdentity& device, Outcome outcome, std::string reason) {
  ProbeResult r;
  r.probe = probe;
  r.device_index = device.index;
  r.device_uuid = device.uuid;
  r.outcome = outcome;
  r.reason = std::move(reason);
  return r;
}

}  // namespace

uint64_t retry_seed(uint64_t run_seed) { return mix64(run_seed ^ 0x5e77ab1e0badf00dULL); }

std::vector<std::pair<std::string, std::string>> worker_environment(const DeviceIdentity& device) {
  if (device.backend == "cuda") return {{"CUDA_VISIBLE_DEVICES", device.uuid}};
  return {};
}

WorkerRun run_worker(const std::vector<std::string>& argv, const DeviceIdentity& device,
                     const std::vector<std::string>& probe_ids, const IsolationLimits& limits,
                     const std::function<void(const std::string&)>& on_start) {
  WorkerRun run;
  ChildProcess child(argv, kWorkerProtocolFd, worker_environment(device));
  std::string pending;
  std::string in_flight;
  std::string unreadable;  // what was wrong with the line that ended it
  Clock::time_point started = Clock::now();
  Clock::time_point last_line = started;
  const auto watchdog =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits.probe_timeout_s));
  // Silence is counted only while the worker could run: time its threads spent waiting for a CPU
  // (a loaded node) is not a device's lack of progress. A device that stops answering leaves its
  // worker blocked or spinning, and either way its silence grows.
  // Read again at a line at most every kWaitsReadEvery (a worker beats about ten times a second,
  // and a CPU worker has a thread per core): an older reading excuses at most that much more.
  constexpr auto kWaitsReadEvery = std::chrono::milliseconds(250);
  std::map<pid_t, uint64_t> waits_at_line = cpu_wait_by_thread(child.pid());
  Clock::time_point waits_read = Clock::now();
  double starved_s = 0;  // of the silence since the last line
  const auto excused = [&] {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(starved_s));
  };
  bool eof = false;
  while (!eof) {
    const Wake wake =
        wait_readable(child.out(), limits.stop_fd, std::min(last_line + watchdog + excused(), limits.deadline));
    if (wake == Wake::kStop) {
      run.end = WorkerEnd::kStopped;
      break;
    }
    if (wake == Wake::kTimeout) {
      starved_s = longest_cpu_wait_s(waits_at_line, cpu_wait_by_thread(child.pid()));
      const Clock::time_point now = Clock::now();
      const bool out_of_budget = now >= limits.deadline;
      if (!out_of_budget && now < last_line + watchdog + excused()) continue;  // it waited for a CPU
      run.end = out_of_budget ? WorkerEnd::kOutOfBudget : WorkerEnd::kHung;
      break;
    }
    char buf[65536];
    const ssize_t n = ::read(child.out(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    last_line = Clock::now();
    if (last_line - waits_read >= kWaitsReadEvery) {
      waits_at_line = cpu_wait_by_thread(child.pid());
      waits_read = last_line;
    }
    starved_s = 0;
    pending.append(buf, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      const std::string text = pending.substr(0, newline);
      pending.erase(0, newline + 1);
      WorkerLine line;
      try {
        line = parse_worker_line(text);
      } catch (const WorkerProtocolError& e) {
        run.end = WorkerEnd::kUnreadable;
        unreadable = describe_error(e);
        break;
      }
      switch (line.kind) {
        case WorkerLine::Kind::kInputError: child.wait(); throw InputError(line.text);
        case WorkerLine::Kind::kBeat: break;
        case WorkerLine::Kind::kStart:
          in_flight = line.text;
          started = last_line;
          if (on_start && !line.retry) on_start(in_flight);
          break;
        case WorkerLine::Kind::kResult:
          line.result.device_index = device.index;  // the worker's own numbering may differ (CUDA_VISIBLE_DEVICES)
          (line.retry ? run.retries : run.results).push_back(std::move(line.result));
          in_flight.clear();
          break;
      }
    }
    if (run.end == WorkerEnd::kUnreadable) break;
  }
  if (!eof) child.kill_now();
  const int status = child.wait();
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - started).count();
  const double silent = std::chrono::duration<double>(now - last_line).count();
  if (eof && status == 0 && in_flight.empty()) return run;

  if (eof) run.end = WorkerEnd::kCrashed;
  // Cut by the deadline: a hang only when the worker had gone silent while it could run, not while it
  // was progressing.
  const double silent_running = silent - starved_s;
  if (run.end == WorkerEnd::kOutOfBudget && !in_flight.empty() && silent_running >= kMinHangSilence_s &&
      silent_running >= elapsed / 2) {
    run.end = WorkerEnd::kHung;
  }
  std::string reason;
  Outcome outcome = Outcome::kSkipped;
  char seconds[32];
  switch (run.end) {
    case WorkerEnd::kCompleted: break;
    case WorkerEnd::kHung:
      outcome = Outcome::kDeviceError;
      std::snprintf(seconds, sizeof(seconds), "%.1f", silent);
      reason = std::string("hung: no progress for ") + seconds + " s";
      if (starved_s >= 0.05) {
        std::snprintf(seconds, sizeof(seconds), "%.1f", starved_s);
        reason += std::string(", ") + seconds + " s of it waiting for a CPU";
      }
      reason += " (watchdog " + std::to_string(static_cast<int>(limits.probe_timeout_s)) + " s" +
                (now >= limits.deadline ? ", then the " + limits.budget_name + " ended" : "") +
                "); its worker was killed";
      break;
    case WorkerEnd::kCrashed:
      outcome = in_flight.empty() ? Outcome::kSkipped : Outcome::kDeviceError;
      reason = (in_flight.empty() ? "worker " : "crashed: worker ") + describe_wait_status(status);
      break;
    case WorkerEnd::kOutOfBudget:
      reason = "could not test: still progressing when the " + limits.budget_name + " ran out";
      break;
    case WorkerEnd::kStopped: reason = "interrupted"; break;
    case WorkerEnd::kUnreadable:
      outcome = Outcome::kDeviceError;
      reason = "worker sent an unreadable result; it was killed (" + unreadable + ")";
      break;
  }
  if (!in_flight.empty()) {
    // A re-run in flight belongs with the retries; anything else is the probe's first attempt.
    const bool retry =
        !run.results.empty() && run.results.back().probe == in_flight && run.results.back().outcome == Outcome::kFail;
    ProbeResult r = unrun(in_flight, device, outcome, reason);
    r.duration_s = elapsed;
    (retry ? run.retries : run.results).push_back(std::move(r));
  } else if (run.end == WorkerEnd::kCrashed || run.end == WorkerEnd::kHung || run.end == WorkerEnd::kUnreadable) {
    // It died or hung between probes (or before the first): the next probe could not run.
    const size_t next = run.results.size();
    if (next < probe_ids.size()) run.results.push_back(unrun(probe_ids[next], device, outcome, reason));
  }
  return run;
}

std::vector<WorkerRun> run_workers(const std::vector<DeviceIdentity>& devices,
                                   const std::vector<std::string>& probe_ids, const WorkerCommand& command,
                                   const IsolationLimits& limits,
                                   const std::function<void(size_t, const std::string&)>& on_start,
                                   const std::function<void(size_t, WorkerRun&)>& on_done) {
  std::vector<WorkerRun> runs(devices.size());
  std::vector<std::exception_ptr> errors(devices.size());
  std::mutex progress;
  std::vector<std::thread> threads;
  for (size_t d = 0; d < devices.size(); ++d) {
    if (!devices[d].open_error.empty()) {
      // Nothing to start a worker on: its first probe is the device_error, as in-process.
      if (!probe_ids.empty())
        runs[d].results.push_back(unrun(probe_ids.front(), devices[d], Outcome::kDeviceError, devices[d].open_error));
      if (on_done) {
        const std::lock_guard<std::mutex> lock(progress);
        on_done(d, runs[d]);
      }
      continue;
    }
    threads.emplace_back([&, d] {
      try {
        runs[d] = run_worker(command(devices[d], probe_ids), devices[d], probe_ids, limits, [&](const std::string& p) {
          if (!on_start) return;
          const std::lock_guard<std::mutex> lock(progress);
          on_start(d, p);
        });
        if (on_done) {
          const std::lock_guard<std::mutex> lock(progress);
          on_done(d, runs[d]);
        }
      } catch (...) {
        errors[d] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return runs;
}

RunReport run_probes_isolated(const std::vector<std::string>& ids, const std::vector<DeviceIdentity>& devices,
                              const RunOptions& options, const std::string& mode, const WorkerCommand& command,
                              const IsolationLimits& limits, std::vector<ProbeResult>* retries) {
  RunReport report = new_report(options, mode);
  const auto start = Clock::now();
  report.devices = devices;
  if (!ids.empty()) {
    const size_t total = ids.size() * devices.size();
    size_t done = 0;
    std::vector<WorkerRun> runs = run_workers(devices, ids, command, limits, [&](size_t d, const std::string& probe) {
      if (options.on_start) options.on_start(done, total, devices[d], probe);
      ++done;
    });
    for (size_t d = 0; d < devices.size(); ++d) {
      WorkerRun& run = runs[d];
      const bool broken = !run.results.empty() && run.results.back().outcome == Outcome::kDeviceError;
      for (size_t i = run.results.size(); i < ids.size(); ++i) {
        run.results.push_back(unrun(
            ids[i], devices[d], Outcome::kSkipped,
            broken ? "device in an error state after an earlier probe" : "not run: the device's worker ended early"));
      }
      for (auto& r : run.results) report.results.push_back(std::move(r));
      if (retries != nullptr) {
        for (auto& r : run.retries) retries->push_back(std::move(r));
      }
    }
  }
  report.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

std::vector<DeviceIdentity> list_devices_in_child(const std::string& executable, const BackendOptions& backend) {
  // Its answer comes on fd 3, as a worker's does; its stdout joins stderr, so a library printing
  // there changes nothing.
  ChildProcess child(
      {executable, "--backend", backend.backend, "--cpu-devices", std::to_string(backend.cpu_devices), "--expect-gpus",
       std::to_string(backend.expect_gpus), "devices", "--json", "--protocol-fd", std::to_string(kWorkerProtocolFd)},
      kWorkerProtocolFd);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(child.out(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  const int status = child.wait();
  return devices_from_answer(out, describe_wait_status(status));
}

}  // namespace sdc
