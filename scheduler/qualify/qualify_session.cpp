#include "scheduler/qualify/qualify_session.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "host/error.hpp"
#include "scheduler/qualify/busy_gpus.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/health_report.hpp"
#include "scheduler/sweep/gpu_idle.hpp"

namespace sdc {
namespace {

uint64_t random_seed() { return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}(); }

// local: one thread per device, each a rank that contributes its device's records, as devices of
// separate processes would over MPI. mpi: this process's records, one rank among the world's.
ConsensusOutcome run_consensus(const RunReport& report, Communicator* mpi, const GoldenFile* golden) {
  std::vector<ConsensusRecord> records = consensus_records(report.devices, report.results, report.host, report.rank);
  std::vector<std::string> missing;
  if (golden != nullptr) missing = apply_golden(*golden, records);
  ConsensusOutcome outcome;
  if (mpi != nullptr) {
    outcome = gather_and_vote(*mpi, records);
  } else {
    const size_t n = std::max<size_t>(1, report.devices.size());
    auto ranks = make_local_communicators(static_cast<int>(n));
    std::vector<ConsensusOutcome> outcomes(n);
    std::vector<std::thread> threads;
    for (size_t r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        std::vector<ConsensusRecord> mine;
        for (const auto& c : records) {
          if (r < report.devices.size() && c.uuid == report.devices[r].uuid) mine.push_back(c);
        }
        outcomes[r] = gather_and_vote(*ranks[r], mine);
      });
    }
    for (auto& t : threads) t.join();
    outcome = std::move(outcomes.front());
  }
  outcome.golden_missing = std::move(missing);
  return outcome;
}

// coll.allreduce_exact over the same ranks as the consensus: the world under MPI, else one thread
// per device. GPUs reduce their own memory over NCCL; under MPI each rank uses its first GPU (launch
// one rank per GPU).
CollectiveResult run_collective(const std::vector<std::unique_ptr<Device>>& devices, Communicator* mpi,
                                const RunOptions& options) {
  const uint64_t seed = probe_seed(options.seed, kAllreduceProbe);
  const bool gpus = !devices.empty() && std::all_of(devices.begin(), devices.end(),
                                                    [](const auto& d) { return d->identity().backend == "cuda"; });
  if (gpus && !nccl_compiled()) {
    std::fprintf(stderr,
                 "sdcprobe: %s reduces host memory: this build has no NCCL, so GPU links go untested (install "
                 "libnccl-dev and rebuild)\n",
                 kAllreduceProbe);
  }
  const bool nccl = gpus && nccl_compiled();
  if (mpi != nullptr) {
    CollectiveResult result;
    if (nccl) {
      auto world = make_nccl_world_communicator(*mpi, devices.front()->identity());
      result = check_allreduce(*world, devices.front().get(), seed, options.injector);
    } else {
      result = check_allreduce(*mpi, nullptr, seed, options.injector);
    }
    result.transport = nccl ? "nccl" : "mpi";
    return result;
  }
  // A device that failed to open already reports device_error on every probe: the links between
  // the others are still tested.
  std::vector<Device*> working;
  for (const auto& d : devices) {
    if (d->open_error().empty()) working.push_back(d.get());
  }
  const size_t n = std::max<size_t>(1, working.size());
  const bool on_gpus = nccl && !working.empty();
  std::vector<std::unique_ptr<Communicator>> ranks;
  if (on_gpus) {
    std::vector<DeviceIdentity> identities;
    for (const Device* d : working) identities.push_back(d->identity());
    ranks = make_nccl_local_communicators(identities);
  } else {
    ranks = make_local_communicators(static_cast<int>(n));
  }
  std::vector<CollectiveResult> results(n);
  // Staging before the rank threads start, freed after they are joined (cudaMalloc and cudaFree
  // synchronise a GPU, which can deadlock a peer's NCCL kernels); a rank that fails aborts the
  // group, so the others return and the collective is a device_error naming that rank.
  std::vector<AllreduceStaging> staging(n);
  std::string error;
  for (size_t r = 0; r < n && error.empty(); ++r) {
    try {
      staging[r] = make_allreduce_staging(*ranks[r], on_gpus ? working[r] : nullptr);
    } catch (const std::exception& e) {
      error = "rank " + std::to_string(r) + ": " + e.what();
    }
  }
  if (error.empty()) {
    const std::vector<std::string> errors = run_ranks(ranks, [&](int r, Communicator& comm) {
      const size_t k = static_cast<size_t>(r);
      results[k] = check_allreduce(comm, on_gpus ? working[k] : nullptr, seed, options.injector, &staging[k]);
    });
    // The cause, not the other ranks' echoes of it.
    for (const std::string& e : errors) {
      if (error.empty() && !e.empty() && e.rfind("communicator aborted: ", 0) != 0) error = e;
    }
    for (const std::string& e : errors) {
      if (error.empty()) error = e;
    }
  }
  CollectiveResult result = results.front();
  result.local = true;
  result.transport = on_gpus ? "nccl" : "threads";
  if (!error.empty()) {
    result.error = error;
    result.any_failed = true;
  }
  for (const auto& r : results) result.mismatches = std::max(result.mismatches, r.mismatches);
  return result;
}

}  // namespace

NodePlacement node_placement(const std::vector<std::string>& hosts, int rank) {
  NodePlacement p;
  p.local_rank = static_cast<int>(std::count(hosts.begin(), hosts.begin() + rank, hosts.at(static_cast<size_t>(rank))));
  p.local_size = static_cast<int>(std::count(hosts.begin(), hosts.end(), hosts[static_cast<size_t>(rank)]));
  return p;
}

size_t device_for_rank(const NodePlacement& placement, size_t device_count) {
  if (static_cast<size_t>(placement.local_size) > device_count) {
    throw InputError(std::to_string(placement.local_size) + " MPI ranks on this node but " +
                     std::to_string(device_count) +
                     " devices: launch at most one rank per device, or choose each rank's device with --device");
  }
  return static_cast<size_t>(placement.local_rank);
}

void check_size_bytes(uint64_t bytes, const std::string& field, const std::vector<DeviceIdentity>& devices) {
  if (bytes < 8) throw InputError(field + " must be at least 8 bytes");
  for (const auto& d : devices) {
    if (d.memory_bytes > 0 && bytes > d.memory_bytes) {
      throw InputError(field + " (" + std::to_string(bytes) + " bytes) is more than " + d.label() + "'s memory (" +
                       std::to_string(d.memory_bytes) + " bytes)");
    }
  }
}

double level_budget_seconds(Level level) { return level == Level::kQuick ? kQuickBudget_s : 0; }

double watchdog_seconds(double probe_timeout_s, Level level) {
  if (probe_timeout_s > 0) return probe_timeout_s;
  const double budget = level_budget_seconds(level);
  return budget > 0 ? budget / 3 : 300;
}

std::vector<const Probe*> level_catalogue(Level level, const std::vector<DeviceIdentity>& devices) {
  // A probe that fits no device is left out, not skipped.
  std::vector<const Probe*> probes;
  for (const auto& p : builtin_registry().probes()) {
    for (const auto& d : devices) {
      if (p->included_at(level, d)) {
        probes.push_back(p.get());
        break;
      }
    }
  }
  return probes;
}

void check_injections(const std::vector<InjectionSpec>& specs, const std::vector<const Probe*>& probes,
                      const std::vector<DeviceIdentity>& devices, bool collective) {
  std::vector<std::string> ids;
  for (const Probe* p : probes) ids.push_back(p->id());
  if (collective) ids.push_back(kAllreduceProbe);
  std::vector<std::pair<int, std::string>> targets;
  for (const auto& d : devices) targets.emplace_back(d.index, d.uuid);
  check_injection_targets(specs, ids, targets);
}

std::string this_executable() {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) throw std::runtime_error("cannot find this executable (/proc/self/exe) to start workers");
  return std::string(exe, static_cast<size_t>(n));
}

WorkerCommand make_worker_command(const WorkerSetup& setup, const RunOptions& options) {
  // The backend comes with each device: a worker tests the device its parent listed, whichever
  // backend `auto` chose.
  std::vector<std::string> base = {"--cpu-devices", std::to_string(setup.backend.cpu_devices)};
  base.insert(base.end(), {"worker", "--seed", std::to_string(options.seed), "--level", level_name(options.level)});
  if (!setup.inject.empty())
    base.insert(base.end(), {"--inject", setup.inject, "--rank", std::to_string(options.rank)});
  if (options.size_bytes) base.insert(base.end(), {"--size", std::to_string(*options.size_bytes)});
  if (options.iterations) base.insert(base.end(), {"--iterations", std::to_string(*options.iterations)});
  if (options.burn_s) base.insert(base.end(), {"--burn", std::to_string(*options.burn_s)});
  if (setup.retry_failures) base.push_back("--retry-failures");
  const std::string executable = setup.executable;
  return [base, executable](const DeviceIdentity& device, const std::vector<std::string>& probe_ids) {
    std::vector<std::string> argv = {executable, "--backend", device.backend};
    argv.insert(argv.end(), base.begin(), base.end());
    argv.insert(argv.end(), {"--device", device.uuid, "--index", std::to_string(device.index), "--"});
    argv.insert(argv.end(), probe_ids.begin(), probe_ids.end());
    return argv;
  };
}

QualifySession::QualifySession(QualifyOptions options) : options_(std::move(options)) {
  const ProbeRegistry& registry = builtin_registry();
  // Parse everything the operator wrote before touching a device.
  if (!options_.inject.empty()) specs_ = parse_injection_specs(options_.inject);
  if (!options_.probe_globs.empty()) probes_ = registry.select(options_.probe_globs);
  if (!options_.golden_path.empty()) {
    golden_ = load_golden(options_.golden_path);
    if (options_.seed && *options_.seed != golden_->seed)
      throw InputError("--seed differs from the golden file's seed");
    if (options_.size_bytes && options_.size_bytes != golden_->size_bytes)
      throw InputError("--size differs from the golden file's size_bytes");
    if (options_.iterations && options_.iterations != golden_->iterations)
      throw InputError("--iterations differs from the golden file's iterations");
    options_.level = golden_->level;
    options_.seed = golden_->seed;
    options_.size_bytes = golden_->size_bytes;
    options_.iterations = golden_->iterations;
    options_.consensus = true;
  }
  if (options_.comm == "mpi" && !options_.consensus) throw InputError("--comm mpi: only with --consensus or --golden");

  run_options_.seed = options_.seed ? *options_.seed : random_seed();
  if (options_.consensus && options_.comm == "mpi") {
    mpi_ = make_mpi_communicator();
    run_options_.rank = mpi_->rank();
    // Every rank must run the same seed, or no digest could agree: rank 0's wins.
    run_options_.seed = std::stoull(mpi_->all_gather(std::to_string(run_options_.seed)).front());
  }
  run_options_.level = options_.level;
  run_options_.size_bytes = options_.size_bytes;
  run_options_.iterations = options_.iterations;
  run_options_.burn_s = options_.burn_s;
  injector_ = std::make_unique<Injector>(specs_, run_options_.seed, run_options_.rank);
  if (!specs_.empty()) run_options_.injector = injector_.get();

  if (options_.isolate) {
    identities_ =
        select_identities(list_devices_in_child(options_.worker_executable, options_.backend), options_.device);
  } else {
    devices_ = select_devices(open_devices(options_.backend), options_.device);
    for (const auto& d : devices_) identities_.push_back(d->identity());
  }
  if (options_.probe_globs.empty()) probes_ = level_catalogue(options_.level, identities_);
  // Checked here, before any worker starts: a size a worker could not handle must never look like
  // a device fault. Injections are checked against the node's devices, before a rank takes its own.
  if (options_.size_bytes)
    check_size_bytes(*options_.size_bytes, golden_ ? "the golden file's size_bytes" : "--size", identities_);
  check_injections(specs_, probes_, identities_, options_.consensus);
  if (mpi_ && options_.device == "all") place_rank();
  refuse_busy_gpus();
}

void QualifySession::refuse_busy_gpus() const {
  // After the devices are listed (and, under MPI, after every rank listed them), before any worker
  // allocates: CPU devices never need NVML.
  if (std::none_of(identities_.begin(), identities_.end(), [](const auto& d) { return d.backend == "cuda"; })) return;
  GpuSight sight{process_and_ancestors(), in_host_pid_namespace(), options_.allocated};
  const std::string why = busy_gpu_refusal(identities_, nvml_gpu_processes(nvml_library_name()), sight);
  if (!why.empty()) throw std::runtime_error(why);
}

QualifySession::~QualifySession() = default;

void QualifySession::place_rank() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const NodePlacement p = node_placement(mpi_->all_gather(host), mpi_->rank());
  // The CPU's virtual devices are shares of one CPU: with fewer of them than ranks, each rank tests
  // them all, as before. GPUs are never shared.
  const bool shared_cpu = !identities_.empty() && identities_.front().backend == "cpu" &&
                          static_cast<size_t>(p.local_size) > identities_.size();
  if (!shared_cpu) {
    const DeviceIdentity chosen = identities_.at(device_for_rank(p, identities_.size()));
    identities_ = {chosen};
    if (!devices_.empty()) devices_ = select_devices(std::move(devices_), chosen.uuid);
  }
  std::string tested;
  for (const auto& d : identities_) tested += (tested.empty() ? "" : ", ") + d.label() + " [" + d.uuid + "]";
  placement_ = "rank " + std::to_string(mpi_->rank()) + " (node-local " + std::to_string(p.local_rank) + " of " +
               std::to_string(p.local_size) + " on " + host + "): " + tested;
}

RunReport QualifySession::run_level(const RunOptions& options) {
  if (!options_.isolate) return run_probes(probes_, devices_, options, options_.mode);
  IsolationLimits limits;
  limits.probe_timeout_s = watchdog_seconds(options_.probe_timeout_s, options_.level);
  const double budget = options_.budget_s > 0 ? options_.budget_s : level_budget_seconds(options_.level);
  if (budget > 0) {
    limits.deadline =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(budget));
    limits.budget_name = std::to_string(static_cast<int>(budget)) + " s budget of level " + level_name(options_.level);
  }
  std::vector<std::string> ids;
  for (const Probe* p : probes_) ids.push_back(p->id());
  const WorkerSetup setup{options_.worker_executable, options_.backend, options_.inject, false};
  RunReport report =
      run_probes_isolated(ids, identities_, options, options_.mode, make_worker_command(setup, options), limits);
  report.budget_s = budget;
  return report;
}

RunReport QualifySession::run(const ProgressFn& on_start) {
  RunOptions options = run_options_;
  options.on_start = on_start;
  RunReport report;
  // The GPUs' own counters are read around the probes alone: a fault they show fails the level.
  const HealthReport health = level_health(identities_, [&] { report = run_level(options); });
  report.health = health;
  if (options_.consensus) {
    report.consensus = run_consensus(report, mpi_.get(), golden_ ? &*golden_ : nullptr);
    // The workers are done: this process may now open the devices for the collective.
    if (devices_.empty()) {
      std::string uuids;
      for (const auto& d : identities_) uuids += (uuids.empty() ? "" : ",") + d.uuid;
      devices_ = select_devices(open_devices(options_.backend), uuids);
    }
    report.collective = run_collective(devices_, mpi_.get(), options);
  }
  return report;
}

}  // namespace sdc
