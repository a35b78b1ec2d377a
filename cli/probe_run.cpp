#include "cli/probe_run.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <random>

#include "host/atomic_file.hpp"
#include "host/backend.hpp"
#include "host/error.hpp"
#include "scheduler/catalogue.hpp"
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
  if (!inject.empty()) base.insert(base.end(), {"--inject", inject});
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

int run_and_report(const GlobalOptions& global, const ProbeRunArgs& args, const std::vector<std::string>& globs,
                   Level level, const std::string& mode) {
  const ProbeRegistry& registry = builtin_registry();
  // Parse everything the operator wrote before touching a device.
  std::vector<InjectionSpec> specs;
  if (!args.inject.empty()) specs = parse_injection_specs(args.inject);
  std::vector<const Probe*> probes;
  if (!globs.empty()) probes = registry.select(globs);

  RunOptions options;
  options.seed =
      args.seed ? *args.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  options.level = level;
  options.size_bytes = args.size_bytes;
  options.iterations = args.iterations;
  Injector injector(specs, options.seed);
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
