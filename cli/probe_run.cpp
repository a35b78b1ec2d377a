#include "cli/probe_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>
#include <thread>

#include "host/atomic_file.hpp"
#include "host/backend.hpp"
#include "host/communicator.hpp"
#include "host/error.hpp"
#include "scheduler/catalogue.hpp"
#include "scheduler/golden.hpp"
#include "scheduler/runner.hpp"

namespace sdc::cli {

void add_probe_run_options(CLI::App* sub, ProbeRunArgs& args) {
  sub->add_option("--seed", args.seed, "Replay a run exactly with its seed (decimal or 0x-hex); printed by every run");
  sub->add_option("--json", args.json_path, "Write the JSON report to FILE (atomically)");
  sub->add_option(
      "--inject", args.inject,
      "Inject faults, e.g. 'device=2,probe=alu.fma32,model=bitflip,bit=7,mode=permanent' (docs/injection.md)");
  sub->add_option("--size", args.size_bytes, "Buffer bytes for memory probes (suffixes K, M, G are binary)")
      ->transform(CLI::AsSizeValue(false));
  sub->add_option("--iterations", args.iterations, "Passes for memory probes, chain length for ALU probes")
      ->check(CLI::Range(1u, 1u << 30));
}

void add_watchdog_option(CLI::App* sub, double& probe_timeout_s) {
  sub->add_option("--probe-timeout", probe_timeout_s,
                  "Watchdog: seconds one probe may run before its device is declared hung (device_error); "
                  "default 30 at level quick (Slurm allows 60 s in all), else 300")
      ->check(CLI::Range(0.1, 86400.0));
}

double watchdog_seconds(double probe_timeout_s, Level level) {
  if (probe_timeout_s > 0) return probe_timeout_s;
  return level == Level::kQuick ? 30 : 300;
}

std::vector<const Probe*> level_catalogue(Level level, const std::vector<std::unique_ptr<Device>>& devices) {
  // A probe that fits no device is left out, not skipped.
  std::vector<const Probe*> probes;
  for (const auto& p : builtin_registry().probes()) {
    for (const auto& d : devices) {
      if (p->included_at(level, *d)) {
        probes.push_back(p.get());
        break;
      }
    }
  }
  return probes;
}

WorkerCommand make_worker_command(const GlobalOptions& global, const RunOptions& options, const std::string& inject,
                                  bool retry_failures) {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) throw std::runtime_error("cannot find this executable (/proc/self/exe) to start workers");
  const std::string self(exe, static_cast<size_t>(n));
  std::vector<std::string> base = {self, "--backend", global.backend, "--cpu-devices",
                                   std::to_string(global.cpu_devices)};
  base.insert(base.end(), {"worker", "--seed", std::to_string(options.seed), "--level", level_name(options.level)});
  if (!inject.empty()) base.insert(base.end(), {"--inject", inject, "--rank", std::to_string(options.rank)});
  if (options.size_bytes) base.insert(base.end(), {"--size", std::to_string(*options.size_bytes)});
  if (options.iterations) base.insert(base.end(), {"--iterations", std::to_string(*options.iterations)});
  if (retry_failures) base.push_back("--retry-failures");
  return [base](const DeviceIdentity& device, const std::vector<std::string>& probe_ids) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), {"--device", device.uuid, "--"});
    argv.insert(argv.end(), probe_ids.begin(), probe_ids.end());
    return argv;
  };
}

namespace {

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
  const size_t n = std::max<size_t>(1, devices.size());
  std::vector<std::unique_ptr<Communicator>> ranks;
  if (nccl) {
    std::vector<DeviceIdentity> identities;
    for (const auto& d : devices) identities.push_back(d->identity());
    ranks = make_nccl_local_communicators(identities);
  } else {
    ranks = make_local_communicators(static_cast<int>(n));
  }
  std::vector<CollectiveResult> results(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r) {
    threads.emplace_back(
        [&, r] { results[r] = check_allreduce(*ranks[r], nccl ? devices[r].get() : nullptr, seed, options.injector); });
  }
  for (auto& t : threads) t.join();
  CollectiveResult result = results.front();
  result.local = true;
  result.transport = nccl ? "nccl" : "threads";
  for (const auto& r : results) result.mismatches = std::max(result.mismatches, r.mismatches);
  return result;
}

}  // namespace

int run_and_report(const GlobalOptions& global, const ProbeRunArgs& args, const std::vector<std::string>& globs,
                   Level level, const std::string& mode) {
  const ProbeRegistry& registry = builtin_registry();
  // Parse everything the operator wrote before touching a device.
  std::vector<InjectionSpec> specs;
  if (!args.inject.empty()) specs = parse_injection_specs(args.inject);
  std::vector<const Probe*> probes;
  if (!globs.empty()) probes = registry.select(globs);
  std::optional<GoldenFile> golden;
  if (!args.golden_path.empty()) {
    golden = load_golden(args.golden_path);
    if (args.seed && *args.seed != golden->seed) throw InputError("--seed differs from the golden file's seed");
    if (args.size_bytes && args.size_bytes != golden->size_bytes)
      throw InputError("--size differs from the golden file's size_bytes");
    if (args.iterations && args.iterations != golden->iterations)
      throw InputError("--iterations differs from the golden file's iterations");
    level = golden->level;
  }

  RunOptions options;
  options.seed =
      args.seed ? *args.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  if (golden) options.seed = golden->seed;
  std::unique_ptr<Communicator> mpi;
  if (args.comm == "mpi" && !args.consensus && !golden)
    throw InputError("--comm mpi: only with --consensus or --golden");
  if ((args.consensus || golden) && args.comm == "mpi") {
    mpi = make_mpi_communicator();
    options.rank = mpi->rank();
    // Every rank must run the same seed, or no digest could agree: rank 0's wins.
    options.seed = std::stoull(mpi->all_gather(std::to_string(options.seed)).front());
  }
  options.level = level;
  options.size_bytes = golden ? golden->size_bytes : args.size_bytes;
  options.iterations = golden ? golden->iterations : args.iterations;
  Injector injector(specs, options.seed, options.rank);
  if (!specs.empty()) options.injector = &injector;

  auto devices = select_devices(open_devices({global.backend, global.cpu_devices}), args.device);
  if (globs.empty()) probes = level_catalogue(level, devices);
  const bool npd = args.format == "npd";
  // npd: the first line of stdout must be the verdict, so the seed line follows it.
  if (!npd) {
    std::printf("sdcprobe %s: seed 0x%016llx (replay with --seed 0x%016llx)\n", mode.c_str(),
                static_cast<unsigned long long>(options.seed), static_cast<unsigned long long>(options.seed));
    std::fflush(stdout);
  }

  const bool progress = ::isatty(STDERR_FILENO) == 1;
  if (progress) {
    options.on_start = [](size_t done, size_t total, const Device& d, const std::string& probe) {
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s %s", done + 1, total, d.identity().label().c_str(), probe.c_str());
    };
  }
  RunReport report;
  if (args.isolate) {
    IsolationLimits limits;
    limits.probe_timeout_s = watchdog_seconds(args.probe_timeout_s, level);
    report = run_probes_isolated(probes, devices, options, mode,
                                 make_worker_command(global, options, args.inject, false), limits);
  } else {
    report = run_probes(probes, devices, options, mode);
  }
  if (progress) std::fprintf(stderr, "\r\033[K");
  if (args.consensus || golden) {
    report.consensus = run_consensus(report, mpi.get(), golden ? &*golden : nullptr);
    report.collective = run_collective(devices, mpi.get(), options);
  }
  if (report.consensus) {
    for (const auto& m : report.consensus->golden_missing) {
      std::fprintf(stderr, "sdcprobe: the golden file has no digest for %s\n", m.c_str());
    }
  }

  if (npd) {
    std::printf("%s\nsdcprobe %s: seed 0x%016llx (replay with --seed 0x%016llx)\n", npd_verdict(report).c_str(),
                mode.c_str(), static_cast<unsigned long long>(options.seed),
                static_cast<unsigned long long>(options.seed));
  }
  std::cout << results_table(report) << verdict_line(report) << std::endl;
  if (!args.json_path.empty()) write_file_atomically(args.json_path, report_json(report).dump(2) + "\n");
  return exit_code_of(report);
}

}  // namespace sdc::cli
