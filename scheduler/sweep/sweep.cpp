#include "scheduler/sweep/sweep.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include "host/atomic_file.hpp"
#include "host/error.hpp"
#include "host/parse_number.hpp"
#include "host/subprocess.hpp"
#include "scheduler/qualify/health_report.hpp"
#include "scheduler/sweep/prometheus.hpp"
#include "scheduler/version.hpp"

namespace sdc {
namespace {

using Clock = std::chrono::steady_clock;

int g_stop_write_fd = -1;
volatile sig_atomic_t g_stop_requested = 0;

void on_stop_signal(int) {
  g_stop_requested = 1;
  if (g_stop_write_fd >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_stop_write_fd, &byte, 1);
  }
}

// SIGTERM and SIGINT write to a self-pipe that every wait of the sweep polls, so a signal ends a
// probe, an idle check or the sleep between passes at once. Restores the previous handlers.
class StopSignals {
 public:
  StopSignals() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe: " + std::string(strerror(errno)));
    g_stop_requested = 0;
    g_stop_write_fd = fds_[1];
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocking call returns EINTR
    ::sigaction(SIGTERM, &sa, &old_term_);
    ::sigaction(SIGINT, &sa, &old_int_);
  }
  ~StopSignals() {
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGINT, &old_int_, nullptr);
    g_stop_write_fd = -1;
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  int fd() const { return fds_[0]; }
  bool requested() const { return g_stop_requested != 0; }

 private:
  int fds_[2] = {-1, -1};
  struct sigaction old_term_ {};
  struct sigaction old_int_ {};
};

// One sweep per state directory: a second one would race the first for the cursor and the metrics.
class StateLock {
 public:
  explicit StateLock(const std::string& dir) {
    const std::string path = dir + "/sweep.lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw InputError("--state-dir: cannot open " + path + ": " + strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw InputError("--state-dir: another sweep is running on " + dir + " (it holds " + path + ")");
    }
  }
  ~StateLock() { ::close(fd_); }
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  int fd_ = -1;
};

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// True when stopped before `until`.
bool sleep_until(int stop_fd, Clock::time_point until) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    pollfd fd{stop_fd, POLLIN, 0};
    const int n = ::poll(&fd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) throw std::runtime_error("poll: " + std::string(strerror(errno)));
  }
}

// A pass that ends in an error (a full disk, a worker that cannot start) must not stay `running`:
// unless released, marks the run `failed`. When even that write fails, the next sweep's start marks
// it `interrupted`.
class FailedRunGuard {
 public:
  FailedRunGuard(History& history, int64_t run_id) : history_(history), run_id_(run_id) {}
  ~FailedRunGuard() {
    if (released_) return;
    try {
      history_.finish_run(run_id_, "failed", unix_now());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sdcprobe sweep: cannot mark pass %lld failed: %s\n", static_cast<long long>(run_id_),
                   e.what());
    }
  }
  FailedRunGuard(const FailedRunGuard&) = delete;
  FailedRunGuard& operator=(const FailedRunGuard&) = delete;
  void release() { released_ = true; }

 private:
  History& history_;
  int64_t run_id_;
  bool released_ = false;
};

struct PassOutcome {
  bool stopped = false;
  bool fault = false;
};

class Sweep {
 public:
  Sweep(const SweepOptions& options, const std::vector<DeviceIdentity>& devices,
        const std::vector<const Probe*>& catalogue, const WorkerCommandFactory& worker, History& history,
        const StopSignals& stop)
      : options_(options), worker_(worker), history_(history), stop_(stop), identities_(devices) {
    for (const Probe* p : catalogue) ids_.push_back(p->id());
  }

  void write_metrics() const {
    if (options_.prom_dir.empty()) return;
    write_prometheus(options_.prom_dir,
                     render_prometheus(history_, identities_, ids_, host_, options_.policy, unix_now()) +
                         (health_ ? render_health_prometheus(*health_, host_) : ""));
  }

  PassOutcome pass() {
    RunOptions run_options;
    run_options.seed =
        options_.seed ? *options_.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    std::string seed_origin = options_.seed ? "given" : "random";
    if (options_.fleet_period) {
      const FleetSeed fleet = fleet_seed(options_.fleet_secret, *options_.fleet_period, std::time(nullptr));
      run_options.seed = fleet.seed;
      seed_origin = fleet.origin;
    }
    run_options.level = options_.level;
    run_options.size_bytes = options_.size_bytes;
    run_options.iterations = options_.iterations;
    RunReport report = new_report(run_options, "sweep");
    report.seed_origin = seed_origin;
    host_ = report.host;
    const auto started = Clock::now();
    RunRecord run{0, "sweep", report.host, run_options.seed, level_name(options_.level), kVersion, unix_now(), 0, ""};
    run.size_bytes = options_.size_bytes;
    run.iterations = options_.iterations;

    if (!options_.idle_check.empty()) {
      const int rc = run_shell_command(options_.idle_check, options_.idle_check_timeout_s, stop_.fd());
      if (stop_.requested()) return {true, false};
      if (rc != 0) {
        run.status = "busy";
        history_.finish_run(history_.begin_run(run), "busy", unix_now());
        log("node busy (idle check exited " + (rc < 0 ? std::string("abnormally or timed out") : std::to_string(rc)) +
            "): pass skipped");
        return {};
      }
    }

    const std::string cursor_key = std::string("cursor.") + level_name(options_.level);
    const size_t cursor = ids_.empty() ? 0 : std::stoull(history_.state(cursor_key, "0")) % ids_.size();
    std::vector<double> estimates;
    for (const auto& id : ids_) {
      double total = 0;
      for (const auto& d : identities_) total += history_.probe_totals(d.uuid, id).last_duration_s;
      estimates.push_back(total);
    }
    const PassPlan plan = plan_pass(estimates, cursor, options_.budget_s);
    std::vector<std::string> ids;
    for (size_t i : plan.probes) ids.push_back(ids_[i]);

    const int64_t run_id = history_.begin_run(run);
    FailedRunGuard guard(history_, run_id);
    std::string list;
    for (const auto& id : ids) list += (list.empty() ? "" : ",") + id;
    char seed[24];
    std::snprintf(seed, sizeof(seed), "0x%016llx", static_cast<unsigned long long>(run_options.seed));
    log("pass " + std::to_string(run_id) + ": seed " + seed + " (" + seed_origin + "), level " +
        level_name(options_.level) + ", budget " + format_duration_s(options_.budget_s) + ", probes " + list);

    IsolationLimits limits;
    limits.probe_timeout_s = options_.probe_timeout_s;
    limits.deadline = started + seconds(options_.budget_s);
    limits.stop_fd = stop_.fd();
    const WorkerCommand command = worker_(run_options);
    PassOutcome outcome;
    size_t ran_everywhere = ids.size();  // probes that ran on every device: how far the cursor moves
    report.devices = identities_;
    // Every device at once: a hung device costs the pass its watchdog, not the others' turn.
    // Each device's results are recorded as its worker ends.
    const auto on_worker_end = [&](size_t d, WorkerRun& worker) {
      const DeviceIdentity& id = identities_[d];
      std::vector<ResultRecord> records;
      for (const auto& r : worker.results) {
        const ProbeResult* retry = nullptr;
        for (const auto& x : worker.retries) {
          if (x.probe == r.probe) retry = &x;
        }
        const std::string fault = classify_fault(r, retry);
        outcome.fault = outcome.fault || !fault.empty();
        records.push_back(to_record(r, 0, fault));
        if (retry != nullptr) records.push_back(to_record(*retry, 1, ""));
        if (!fault.empty()) {
          log("fault on " + id.label() + " [" + id.uuid + ", " + id.pci_bus_id + "]: " + r.probe + " " +
              outcome_name(r.outcome) + (fault == "device_error" ? "" : " (" + fault + ")") +
              (r.reason.empty() ? "" : ": " + r.reason));
        }
      }
      history_.record(run_id, {id}, records, unix_now());
      size_t done = worker.results.size();
      const bool cut = worker.end == WorkerEnd::kOutOfBudget || worker.end == WorkerEnd::kStopped;
      if (cut && done > 0 && worker.results.back().outcome == Outcome::kSkipped) --done;
      // A device in an error state gets nothing more this pass.
      if (!worker.results.empty() && worker.results.back().outcome == Outcome::kDeviceError) done = ids.size();
      ran_everywhere = std::min(ran_everywhere, done);
      for (auto& r : worker.results) report.results.push_back(std::move(r));
      if (worker.end == WorkerEnd::kStopped) outcome.stopped = true;
      if (worker.end == WorkerEnd::kOutOfBudget) {
        log("budget of " + format_duration_s(options_.budget_s) + " used up during " + id.label() +
            (done == 0 ? ": " + ids[0] + " alone does not fit the budget" : ""));
      }
    };
    // The GPUs' own health is read around the workers: a fault it shows is the pass's fault.
    health_ = level_health(identities_, [&] { run_workers(identities_, ids, command, limits, {}, on_worker_end); });
    report.health = health_;
    const int health = health_exit_code(*health_);
    if (health == 1) log("GPU health fault: " + health_faults(*health_));
    if (health == 2) {
      log("the GPUs' own health could not be read" + (health_->error.empty() ? "" : ": " + health_->error));
    }
    outcome.fault = outcome.fault || health == 1;
    outcome.stopped = outcome.stopped || stop_.requested();
    report.duration_s = std::chrono::duration<double>(Clock::now() - started).count();
    if (!options_.spool_dir.empty()) {
      write_file_atomically((std::filesystem::path(options_.spool_dir) /
                             ("sdcprobe-" + report.host + "-" + std::to_string(run_id) + ".json"))
                                .string(),
                            report_json(report).dump() + "\n");
    }
    if (options_.on_report) options_.on_report(report);
    history_.finish_run(run_id, outcome.stopped ? "interrupted" : "complete", unix_now());
    guard.release();
    if (!ids_.empty()) history_.set_state(cursor_key, std::to_string((cursor + ran_everywhere) % ids_.size()));
    // Faults found before an interruption are real: the policy sees them either way.
    for (const auto& st : apply_quarantine_policy(history_, options_.policy, run_id, unix_now())) {
      if (st.health != Health::kHealthy) log(st.device.uuid + " " + health_name(st.health) + ": " + st.why);
    }
    log("pass " + std::to_string(run_id) + " " + (outcome.stopped ? "interrupted" : "complete") + " after " +
        std::to_string(std::chrono::duration<double>(Clock::now() - started).count()) + " s: " +
        std::to_string(report.results.size()) + " results" + (outcome.fault ? ", faults found" : ", no fault"));
    return outcome;
  }

 private:
  static void log(const std::string& line) {
    std::printf("sdcprobe sweep: %s\n", line.c_str());
    std::fflush(stdout);
  }

  const SweepOptions& options_;
  const WorkerCommandFactory& worker_;
  History& history_;
  const StopSignals& stop_;
  std::vector<DeviceIdentity> identities_;
  std::vector<std::string> ids_;
  std::string host_;
  std::optional<HealthReport> health_;  // the last pass's
};

}  // namespace

PassPlan plan_pass(const std::vector<double>& estimates_s, size_t cursor, double budget_s) {
  PassPlan plan;
  double used = 0;
  for (size_t k = 0; k < estimates_s.size(); ++k) {
    const size_t i = (cursor + k) % estimates_s.size();
    if (k > 0 && used + estimates_s[i] > budget_s) break;
    plan.probes.push_back(i);
    used += estimates_s[i];
  }
  return plan;
}

int run_sweep(const SweepOptions& options, const std::vector<DeviceIdentity>& devices,
              const std::vector<const Probe*>& catalogue, const WorkerCommandFactory& worker) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(options.state_dir, ec);
  if (ec || !fs::is_directory(options.state_dir)) {
    throw InputError("--state-dir: cannot create " + options.state_dir + (ec ? ": " + ec.message() : ""));
  }
  if (!options.spool_dir.empty() && !fs::is_directory(options.spool_dir)) {
    throw InputError("--spool-dir: " + options.spool_dir + " is not a directory");
  }
  if (!options.prom_dir.empty() && !fs::is_directory(options.prom_dir)) {
    throw InputError("--prom-dir: " + options.prom_dir + " is not a directory");
  }
  StateLock lock(options.state_dir);
  History history((fs::path(options.state_dir) / kHistoryFile).string());
  const int stale = history.interrupt_stale_runs(unix_now());
  if (stale > 0) std::printf("sdcprobe sweep: %d pass(es) left running by a process that died: interrupted\n", stale);
  history.set_state("policy", options.policy.to_json().dump());

  StopSignals stop;
  Sweep sweep(options, devices, catalogue, worker, history, stop);
  sweep.write_metrics();
  bool fault = false;
  for (;;) {
    const auto started = Clock::now();
    const PassOutcome outcome = sweep.pass();
    fault = fault || outcome.fault;
    sweep.write_metrics();
    if (outcome.stopped || options.once) break;
    if (sleep_until(stop.fd(), started + seconds(options.every_s))) break;
  }
  return options.once && fault ? 1 : 0;
}

}  // namespace sdc
