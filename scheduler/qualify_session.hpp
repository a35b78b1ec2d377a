// A qualify session: the whole flow of `qualify` (and `run`) behind one call that the CLI, the sweep
// and the C ABI share. It checks everything the operator wrote before any device is touched, fixes
// the seed (rank 0's under MPI), runs the probes (each device in a watched worker when isolated),
// then the cross-device consensus, the golden-file comparison and coll.allreduce_exact.
// The caller only parses options and prints.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/backend.hpp"
#include "host/communicator.hpp"
#include "host/injection.hpp"
#include "scheduler/golden.hpp"
#include "scheduler/isolation.hpp"
#include "scheduler/runner.hpp"

namespace sdc {

struct QualifyOptions {
  std::string mode = "qualify";  // qualify | run: the report's mode
  BackendOptions backend;
  std::string device = "all";            // select_devices' selector
  std::vector<std::string> probe_globs;  // empty: the level's catalogue
  Level level = Level::kQuick;
  std::optional<uint64_t> seed;        // none: a random one
  std::optional<uint64_t> size_bytes;  // mem.* buffer bytes
  std::optional<uint32_t> iterations;
  std::string inject;  // injection clauses (docs/injection.md)
  // Each device in a watched worker process, run from `worker_executable` (an sdcprobe binary).
  bool isolate = false;
  std::string worker_executable;
  double probe_timeout_s = 0;  // the watchdog; 0: by level (watchdog_seconds)
  bool consensus = false;      // compare digests across devices over `comm` (local | mpi)
  std::string comm = "local";
  std::string golden_path;  // compare with this golden file (implies consensus)
};

// Called as each probe starts: (done, total, device, probe id).
using ProgressFn = std::function<void(size_t, size_t, const DeviceIdentity&, const std::string&)>;

class QualifySession {
 public:
  // Parses and checks the options, loads the golden file, joins MPI when asked, fixes the seed and
  // opens the devices. Throws InputError for bad input.
  explicit QualifySession(QualifyOptions options);
  ~QualifySession();
  QualifySession(const QualifySession&) = delete;
  QualifySession& operator=(const QualifySession&) = delete;

  uint64_t seed() const { return run_options_.seed; }
  int rank() const { return run_options_.rank; }

  // Runs the probes, then (with consensus or a golden file) the vote and the collective.
  RunReport run(const ProgressFn& on_start = {});

 private:
  QualifyOptions options_;
  RunOptions run_options_;
  std::vector<InjectionSpec> specs_;
  std::unique_ptr<Injector> injector_;
  std::optional<GoldenFile> golden_;
  std::unique_ptr<Communicator> mpi_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<const Probe*> probes_;
};

// The watchdog: `probe_timeout_s` when set, else the level's default.
double watchdog_seconds(double probe_timeout_s, Level level);

// The probes the level includes on at least one of `devices`, in catalogue order.
std::vector<const Probe*> level_catalogue(Level level, const std::vector<std::unique_ptr<Device>>& devices);

// Before any device runs: throws InputError when an --inject clause matches no probe or device of
// the run (`collective`: coll.allreduce_exact runs too).
void check_injections(const std::vector<InjectionSpec>& specs, const std::vector<const Probe*>& probes,
                      const std::vector<std::unique_ptr<Device>>& devices, bool collective);

// This process's executable (/proc/self/exe), to start workers from.
std::string this_executable();

// What a worker needs besides the run options: the binary, the backend, the injection clauses.
struct WorkerSetup {
  std::string executable;
  BackendOptions backend;
  std::string inject;
  bool retry_failures = false;  // re-run a failing probe at once with a new seed (the sweep)
};

// The command line of the hidden `worker` subcommand for one device: the same backend, seed, level,
// sizes and injections as the parent's run.
WorkerCommand make_worker_command(const WorkerSetup& setup, const RunOptions& options);

}  // namespace sdc
