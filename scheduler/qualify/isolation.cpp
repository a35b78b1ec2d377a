#include "scheduler/qualify/isolation.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "host/error.hpp"
#include "kernels/common/random.hpp"

extern char** environ;

namespace sdc {
namespace {

using Clock = std::chrono::steady_clock;

Outcome outcome_from_name(const std::string& name) {
  for (Outcome o : {Outcome::kPass, Outcome::kFail, Outcome::kSkipped, Outcome::kDeviceError}) {
    if (name == outcome_name(o)) return o;
  }
  throw std::invalid_argument("worker sent an unknown outcome '" + name + "'");
}

// A child process in its own process group, with the write end of a pipe as its fd `pipe_fd` when
// that is not -1 (a worker: fd 3, its stdout joined to stderr; a shell command: its stdout), and
// `env` added to its environment. It dies with the parent (PR_SET_PDEATHSIG), so a SIGKILLed sweep
// leaves no probe running.
class Child {
 public:
  Child(const std::vector<std::string>& argv, int pipe_fd,
        const std::vector<std::pair<std::string, std::string>>& env = {}) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // The environment is built before fork: only async-signal-safe calls may follow it.
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string var = *e;
      const bool replaced = std::any_of(env.begin(), env.end(), [&](const auto& kv) {
        return var.compare(0, kv.first.size() + 1, kv.first + "=") == 0;
      });
      if (!replaced) vars.push_back(var);
    }
    for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    int fds[2] = {-1, -1};
    if (pipe_fd >= 0 && ::pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) {
      // Only async-signal-safe calls between fork and exec.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      if (pipe_fd >= 0) {
        if (pipe_fd != STDOUT_FILENO) ::dup2(STDERR_FILENO, STDOUT_FILENO);
        if (fds[1] == pipe_fd) {
          ::fcntl(pipe_fd, F_SETFD, 0);  // dup2 onto itself would leave close-on-exec set
        } else {
          ::dup2(fds[1], pipe_fd);
        }
      }
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // also here, so that kill(-pid) works whichever side runs first
    if (pipe_fd >= 0) {
      ::close(fds[1]);
      out_ = fds[0];
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill_now();
      wait();
    }
    if (out_ >= 0) ::close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int out() const { return out_; }
  void kill_now() { ::kill(-pid_, SIGKILL); }
  // The wait status; the child is reaped.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

int milliseconds_until(Clock::time_point t) {
  if (t == Clock::time_point::max()) return -1;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
}

enum class Wake { kReadable, kTimeout, kStop };

Wake wait_for(int fd, int stop_fd, Clock::time_point until) {
  for (;;) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, stop_fd >= 0 ? 2 : 1, milliseconds_until(until));
    if (n < 0 && errno == EINTR) {
      // A signal handler wrote to stop_fd; poll again to see it.
      continue;
    }
    if (n < 0) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (stop_fd >= 0 && (fds[1].revents & POLLIN)) return Wake::kStop;
    if (n == 0) return Wake::kTimeout;
    return Wake::kReadable;
  }
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

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

std::string worker_start_line(const std::string& probe_id, bool retry) {
  return nlohmann::json{{"start", probe_id}, {"retry", retry}}.dump() + "\n";
}

std::string worker_beat_line() { return "{\"beat\":true}\n"; }

std::vector<std::pair<std::string, std::string>> worker_environment(const DeviceIdentity& device) {
  if (device.backend == "cuda") return {{"CUDA_VISIBLE_DEVICES", device.uuid}};
  return {};
}

std::string worker_result_line(const ProbeResult& result, bool retry) {
  return nlohmann::json{{"result", to_json(result)}, {"retry", retry}}.dump() + "\n";
}

std::string worker_input_error_line(const std::string& message) {
  return nlohmann::json{{"input_error", message}}.dump() + "\n";
}

namespace {

// The worker protocol's fields, checked for type and range: a worker whose memory is corrupt may
// send anything, and a float cast to an integer out of range is undefined behaviour.
const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  if (!j.is_object() || !j.contains(name)) throw std::invalid_argument(std::string("no \"") + name + "\"");
  return j.at(name);
}

uint64_t unsigned_field(const nlohmann::json& j, const char* name, uint64_t hi = UINT64_MAX) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > hi) {
    throw std::invalid_argument(std::string("\"") + name + "\" is not an integer in [0, " + std::to_string(hi) + "]");
  }
  return v.get<uint64_t>();
}

// An int in [lo, INT_MAX], or `absent` when the field is missing.
int int_field(const nlohmann::json& j, const char* name, int lo, std::optional<int> absent = std::nullopt) {
  if (absent && !j.contains(name)) return *absent;
  const nlohmann::json& v = field(j, name);
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > INT_MAX) {
    throw std::invalid_argument(std::string("\"") + name + "\" is not an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(INT_MAX) + "]");
  }
  return static_cast<int>(v.get<int64_t>());
}

double seconds_or_count(const nlohmann::json& j, const char* name, std::optional<double> absent = std::nullopt) {
  if (absent && !j.contains(name)) return *absent;
  const nlohmann::json& v = field(j, name);
  if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>())) {
    throw std::invalid_argument(std::string("\"") + name + "\" is not a finite number >= 0");
  }
  return v.get<double>();
}

std::string string_field(const nlohmann::json& j, const char* name) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_string()) throw std::invalid_argument(std::string("\"") + name + "\" is not a string");
  return v.get<std::string>();
}

}  // namespace

ProbeResult result_from_json(const nlohmann::json& j) {
  ProbeResult r;
  r.probe = string_field(j, "probe");
  r.device_index = int_field(j, "device_index", 0);
  r.device_uuid = string_field(j, "device_uuid");
  r.outcome = outcome_from_name(string_field(j, "outcome"));
  r.report.checked = unsigned_field(j, "checked");
  r.report.mismatches = unsigned_field(j, "mismatches");
  const nlohmann::json& records = field(j, "records");
  if (!records.is_array()) throw std::invalid_argument("\"records\" is not an array");
  for (const auto& rec : records) {
    MismatchRecord m;
    m.index = unsigned_field(rec, "index");
    m.expected = unsigned_field(rec, "expected");
    m.observed = unsigned_field(rec, "observed");
    m.width_bits = static_cast<unsigned>(unsigned_field(rec, "width_bits", 64));
    m.unit = int_field(rec, "unit", -1, -1);
    m.lane = int_field(rec, "lane", -1, -1);
    if (rec.contains("preempted")) {
      if (!rec.at("preempted").is_boolean()) throw std::invalid_argument("\"preempted\" is not a boolean");
      m.preempted = rec.at("preempted").get<bool>();
    }
    r.report.records.push_back(m);
  }
  r.duration_s = seconds_or_count(j, "duration_s");
  r.setup_s = seconds_or_count(j, "setup_s", 0.0);
  r.bytes = unsigned_field(j, "bytes");
  r.host_device_bytes = j.contains("host_device_bytes") ? unsigned_field(j, "host_device_bytes") : 0;
  r.flops = seconds_or_count(j, "flops");
  r.seed = unsigned_field(j, "seed");
  r.params = field(j, "params");
  r.reason = j.contains("reason") ? string_field(j, "reason") : "";
  if (j.contains("digest")) r.digest = parse_digest(string_field(j, "digest"));
  if (j.contains("golden_digest")) r.golden_digest = parse_digest(string_field(j, "golden_digest"));
  return r;
}

WorkerRun run_worker(const std::vector<std::string>& argv, const DeviceIdentity& device,
                     const std::vector<std::string>& probe_ids, const IsolationLimits& limits,
                     const std::function<void(const std::string&)>& on_start) {
  WorkerRun run;
  Child child(argv, kWorkerProtocolFd, worker_environment(device));
  std::string pending;
  std::string in_flight;
  Clock::time_point started = Clock::now();
  Clock::time_point last_line = started;
  const auto watchdog =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits.probe_timeout_s));
  bool eof = false;
  while (!eof) {
    const Wake wake = wait_for(child.out(), limits.stop_fd, std::min(last_line + watchdog, limits.deadline));
    if (wake == Wake::kStop) {
      run.end = WorkerEnd::kStopped;
      break;
    }
    if (wake == Wake::kTimeout) {
      run.end = Clock::now() >= limits.deadline ? WorkerEnd::kOutOfBudget : WorkerEnd::kHung;
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
    pending.append(buf, static_cast<size_t>(n));
    size_t newline;
    while (run.end != WorkerEnd::kUnreadable && (newline = pending.find('\n')) != std::string::npos) {
      const std::string text = pending.substr(0, newline);
      pending.erase(0, newline + 1);
      try {
        const nlohmann::json line = nlohmann::json::parse(text);
        if (!line.is_object()) throw std::invalid_argument("not a JSON object");
        if (line.contains("input_error") && line["input_error"].is_string()) {
          child.wait();
          throw InputError(line["input_error"].get<std::string>());
        }
        const bool retry = line.contains("retry") && line["retry"].is_boolean() && line["retry"].get<bool>();
        if (line.contains("beat")) continue;
        if (line.contains("start")) {
          if (!line["start"].is_string()) throw std::invalid_argument("\"start\" is not a string");
          in_flight = line["start"].get<std::string>();
          started = last_line;
          if (on_start && !retry) on_start(in_flight);
        } else {
          ProbeResult r = result_from_json(field(line, "result"));
          r.device_index = device.index;  // the worker's own numbering may differ (CUDA_VISIBLE_DEVICES)
          (retry ? run.retries : run.results).push_back(std::move(r));
          in_flight.clear();
        }
      } catch (const nlohmann::json::exception&) {
        run.end = WorkerEnd::kUnreadable;
      } catch (const std::invalid_argument&) {
        run.end = WorkerEnd::kUnreadable;
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
  // Cut by the deadline: a hang only when the worker had gone silent, not while it was progressing.
  if (run.end == WorkerEnd::kOutOfBudget && !in_flight.empty() && silent >= kMinHangSilence_s &&
      silent >= elapsed / 2) {
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
      reason = std::string("hung: no progress for ") + seconds + " s (watchdog " +
               std::to_string(static_cast<int>(limits.probe_timeout_s)) + " s" +
               (now >= limits.deadline ? ", then the " + limits.budget_name + " ended" : "") +
               "); its worker was killed";
      break;
    case WorkerEnd::kCrashed:
      outcome = in_flight.empty() ? Outcome::kSkipped : Outcome::kDeviceError;
      reason = (in_flight.empty() ? "worker " : "crashed: worker ") + describe_status(status);
      break;
    case WorkerEnd::kOutOfBudget:
      reason = "could not test: still progressing when the " + limits.budget_name + " ran out";
      break;
    case WorkerEnd::kStopped: reason = "interrupted"; break;
    case WorkerEnd::kUnreadable:
      outcome = Outcome::kDeviceError;
      reason = "worker sent an unreadable result; it was killed";
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
  Child child(
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
  const nlohmann::json answer = nlohmann::json::parse(out, nullptr, false);
  if (answer.is_object() && answer.contains("error") && answer["error"].is_string())
    throw NoDeviceError(answer["error"].get<std::string>());
  if (!answer.is_object() || !answer.contains("devices") || !answer["devices"].is_array())
    throw NoDeviceError("cannot list the devices: `devices` " + describe_status(status) + " without a device list");
  std::vector<DeviceIdentity> devices;
  for (const auto& d : answer["devices"]) devices.push_back(identity_from_json(d));
  if (devices.empty()) throw NoDeviceError("no device to test");
  return devices;
}

int run_shell_command(const std::string& shell_command, double timeout_s, int stop_fd) {
  Child child({"/bin/sh", "-c", shell_command}, STDOUT_FILENO);
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    const Wake wake = wait_for(child.out(), stop_fd, until);
    if (wake != Wake::kReadable) {
      child.kill_now();
      child.wait();
      return -1;
    }
    char buf[4096];
    const ssize_t n = ::read(child.out(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // its output is not ours to show: the command's exit code is the answer
  }
  const int status = child.wait();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace sdc
