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
#include "scheduler/consensus/golden.hpp"
#include "scheduler/qualify/isolation.hpp"
#include "scheduler/qualify/runner.hpp"

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
  std::optional<double> burn_s;  // gemm.burn.*: seconds; none: the level's
  std::string inject;            // injection clauses (docs/injection.md)
  // Each device in a watched worker process, run from `worker_executable` (an sdcprobe binary).
  bool isolate = false;
  std::string worker_executable;
  double probe_timeout_s = 0;  // the watchdog; 0: by level (watchdog_seconds)
  double budget_s = 0;         // isolated: the most the probes may take; 0: by level (level_budget_seconds)
  bool consensus = false;      // compare digests across devices over `comm` (local | mpi)
  std::string comm = "local";
  std::string golden_path;  // compare with this golden file (implies consensus)
  // The GPUs were given to this run alone (a scheduler's allocation): test them even where NVML
  // cannot show other containers' processes (busy_gpu_refusal).
  bool allocated = false;
};

// Called as each probe starts: (done, total, device, probe id).
using ProgressFn = std::function<void(size_t, size_t, const DeviceIdentity&, const std::string&)>;

class QualifySession {
 public:
  // Parses and checks the options, loads the golden file, joins MPI when asked, fixes the seed and
  // opens the devices. Throws InputError for bad input, and a runtime_error (could not test) when a
  // GPU it would test is busy, unseen or in MIG mode (busy_gpu_refusal).
  explicit QualifySession(QualifyOptions options);
  ~QualifySession();
  QualifySession(const QualifySession&) = delete;
  QualifySession& operator=(const QualifySession&) = delete;

  uint64_t seed() const { return run_options_.seed; }
  int rank() const { return run_options_.rank; }
  // Under MPI: which device this rank tests, and why ("rank 3 (node-local 3 of 8 on node7): cuda3
  // [GPU-…]"); empty otherwise.
  const std::string& placement() const { return placement_; }

  // Runs the probes, with the tested GPUs' own health read before and after them (level_health),
  // then (with consensus or a golden file) the vote and the collective.
  RunReport run(const ProgressFn& on_start = {});

 private:
  void place_rank();
  // The probes alone, in workers when isolated.
  RunReport run_level(const RunOptions& options);
  void refuse_busy_gpus() const;

  QualifyOptions options_;
  RunOptions run_options_;
  std::vector<InjectionSpec> specs_;
  std::unique_ptr<Injector> injector_;
  std::optional<GoldenFile> golden_;
  std::unique_ptr<Communicator> mpi_;
  std::vector<DeviceIdentity> identities_;        // the devices tested
  std::vector<std::unique_ptr<Device>> devices_;  // opened in this process: not isolated, or the collective's
  std::vector<const Probe*> probes_;
  std::string placement_;
};

// Where an MPI rank sits on its node: its rank among the ranks of the same host, and their number.
// `hosts` holds every rank's host name, in rank order (an all_gather).
struct NodePlacement {
  int local_rank = 0;
  int local_size = 1;
};
NodePlacement node_placement(const std::vector<std::string>& hosts, int rank);
// The device (an index into the node's `device_count`) that a rank tests with `--device all`: its
// node-local rank's, so the ranks of a node test distinct devices. InputError when the node has more
// ranks than devices.
size_t device_for_rank(const NodePlacement& placement, size_t device_count);

// A mem.* buffer size `field` gave: at least 8 bytes and within every device's memory; InputError
// naming the field otherwise.
void check_size_bytes(uint64_t bytes, const std::string& field, const std::vector<DeviceIdentity>& devices);

// The time budget of an isolated qualify at `level`: quick must give a verdict within Slurm's 60 s
// HealthCheckProgram limit, all devices together; 0 (none) at standard and long.
inline constexpr double kQuickBudget_s = 50;
double level_budget_seconds(Level level);
// The watchdog: `probe_timeout_s` when set, else from the level's budget (a third of it at quick,
// so a hang is caught with time left), else 300 s.
double watchdog_seconds(double probe_timeout_s, Level level);

// The probes the level includes on at least one of `devices`, in catalogue order.
std::vector<const Probe*> level_catalogue(Level level, const std::vector<DeviceIdentity>& devices);

// Before any device runs: throws InputError when an --inject clause matches no probe or device of
// the run (`collective`: coll.allreduce_exact runs too).
void check_injections(const std::vector<InjectionSpec>& specs, const std::vector<const Probe*>& probes,
                      const std::vector<DeviceIdentity>& devices, bool collective);

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
