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
  sub->add_option("--inject", args.inject,
                  "Inject faults, e.g. 'device=2,probe=alu.fma32,model=bitflip,bit=7,mode=permanent' (docs/injection.md)");
  sub->add_option("--size", args.size_bytes, "Buffer bytes for memory probes (suffixes K, M, G are binary)")
      ->transform(CLI::AsSizeValue(false));
  sub->add_option("--iterations", args.iterations, "Passes for memory probes, chain length for ALU probes")
      ->check(CLI::Range(1u, 1u << 30));
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
  options.seed = args.seed ? *args.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  options.level = level;
  options.size_bytes = args.size_bytes;
  options.iterations = args.iterations;
  Injector injector(specs, options.seed);
  if (!specs.empty()) options.injector = &injector;

  auto devices = select_devices(open_devices({global.backend, global.cpu_devices}), args.device);
  if (globs.empty()) {
    // The level's catalogue; a probe that fits no device is left out, not skipped.
    for (const auto& p : registry.probes()) {
      for (const auto& d : devices) {
        if (p->included_at(level, *d)) {
          probes.push_back(p.get());
          break;
        }
      }
    }
  }
  std::printf("sdcprobe %s: seed 0x%016llx (replay with --seed 0x%016llx)\n", mode.c_str(),
              static_cast<unsigned long long>(options.seed), static_cast<unsigned long long>(options.seed));
  std::fflush(stdout);

  const bool progress = ::isatty(STDERR_FILENO) == 1;
  if (progress) {
    options.on_start = [](size_t done, size_t total, const Device& d, const std::string& probe) {
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s %s", done + 1, total, d.identity().label().c_str(), probe.c_str());
    };
  }
  const RunReport report = run_probes(probes, devices, options, mode);
  if (progress) std::fprintf(stderr, "\r\033[K");

  std::cout << results_table(report) << verdict_line(report) << std::endl;
  if (!args.json_path.empty()) write_file_atomically(args.json_path, report_json(report).dump(2) + "\n");
  return exit_code_of(report);
}

}  // namespace sdc::cli
