#include "cli/probe_run.hpp"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <iostream>

#include "cli/validators.hpp"
#include "fleet/store_writer.hpp"
#include "host/atomic_file.hpp"
#include "host/parse_number.hpp"
#include "host/time.hpp"
#include "scheduler/qualify/health_report.hpp"

namespace sdc::cli {

void add_probe_run_options(CLI::App* sub, ProbeRunArgs& args) {
  add_seed_option(sub, args, "Replay a run exactly with its seed (decimal or 0x-hex); printed by every run");
  sub->add_option("--json", args.json_path, "Write the JSON report to FILE (atomically)");
  sub->add_option(
         "--inject", args.inject,
         "Inject faults, e.g. 'device=2,probe=alu.fma32,model=bitflip,bit=7,mode=permanent' (docs/injection.md)")
      ->check(injection_spec());
  sub->add_option("--size", args.size_bytes, "Buffer bytes for memory probes (suffixes K, M, G are binary)")
      ->transform(buffer_size());
  sub->add_option("--iterations", args.iterations,
                  "Passes for memory probes, chain length for ALU probes, repeats of gemm.repeat, at most this many "
                  "GEMMs of gemm.burn")
      ->check(unsigned_in(1, kMaxIterations));
  sub->add_option("--burn", args.burn_s,
                  "Seconds of the gemm.burn.* probes (standard and long burn one type per device: 60 s and 300 s "
                  "by default; quick has no burn, and a burn named at quick runs 1 s)")
      ->type_name("SECONDS")
      ->check(finite_in(0.1, 86400.0));
  sub->add_flag("--allocated", args.allocated,
                "The GPUs were given to this run alone (Slurm, a pod requesting them): test them even where NVML "
                "cannot show other containers' processes. A GPU NVML shows in use is never tested "
                "(docs/operating.md#busy-gpus)");
}

void add_seed_option(CLI::App* sub, ProbeRunArgs& args, const std::string& help) {
  sub->add_option_function<std::string>(
         "--seed",
         [&args](const std::string& text) {
           args.fleet_period = parse_fleet_seed(text);
           if (!args.fleet_period) args.seed = parse_unsigned("--seed", text, 0, UINT64_MAX);
         },
         help + "; fleet[:day|:hour] derives it from the UTC day or hour and the site secret FLEET_SECRET= in " +
             kSiteDefaultsFile + ", the same on every node (docs/consensus.md#fleet)")
      ->type_name("N|fleet[:PERIOD]");
}

void add_watchdog_option(CLI::App* sub, double& probe_timeout_s) {
  sub->add_option("--probe-timeout", probe_timeout_s,
                  "Watchdog: seconds one probe may run before its device is declared hung (device_error); "
                  "default a third of the level's budget at quick, else 300; a probe that keeps making progress "
                  "is never declared hung")
      ->check(finite_in(0.1, 86400.0));
}

void add_store_option(CLI::App* sub, std::string& dir) {
  sub->add_option("--store", dir,
                  "Also write the results as rows into this fleet store (docs/fleet.md), for `sdcprobe fleet sdc "
                  "--store`; checked writable before any probe runs")
      ->type_name("DIR");
}

int run_and_report(const GlobalOptions& global, const ProbeRunArgs& args, const std::vector<std::string>& globs,
                   Level level, const std::string& mode) {
  if (!args.store_dir.empty()) prepare_store(args.store_dir);
  std::string seed_origin = !args.golden_path.empty() ? "golden" : args.seed ? "given" : "random";
  std::optional<uint64_t> chosen_seed = args.seed;
  if (args.fleet_period) {
    const FleetSeed fleet = fleet_seed(read_fleet_secret(site_defaults_path()), *args.fleet_period, std::time(nullptr));
    chosen_seed = fleet.seed;
    seed_origin = fleet.origin;
  }
  QualifyOptions options;
  options.mode = mode;
  options.backend = {global.backend, global.cpu_devices, global.expect_gpus};
  options.device = args.device;
  options.probe_globs = globs;
  options.level = level;
  options.seed = chosen_seed;
  options.size_bytes = args.size_bytes;
  options.iterations = args.iterations;
  options.burn_s = args.burn_s;
  options.inject = args.inject;
  options.isolate = args.isolate;
  if (args.isolate) options.worker_executable = this_executable();
  options.probe_timeout_s = args.probe_timeout_s;
  if (!args.budget.empty()) options.budget_s = parse_duration("--budget", args.budget);
  options.consensus = args.consensus;
  options.comm = args.comm;
  options.golden_path = args.golden_path;
  options.allocated = args.allocated;
  QualifySession session(options);

  const uint64_t seed = session.seed();
  const bool npd = args.format == "npd";
  // npd: node-problem-detector takes all of stdout as the condition message, so stdout holds the
  // verdict alone and the seed, table and verdict line go to stderr.
  FILE* info = npd ? stderr : stdout;
  std::fprintf(info, "sdcprobe %s: seed 0x%016llx (replay with --seed 0x%016llx)\n", mode.c_str(),
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(info);

  if (!session.placement().empty()) std::fprintf(stderr, "sdcprobe: %s\n", session.placement().c_str());

  const bool progress = ::isatty(STDERR_FILENO) == 1;
  ProgressFn on_start;
  if (progress) {
    on_start = [](size_t done, size_t total, const DeviceIdentity& d, const std::string& probe) {
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s %s", done + 1, total, d.label().c_str(), probe.c_str());
    };
  }
  RunReport report = session.run(on_start);
  report.seed_origin = seed_origin;
  if (progress) std::fprintf(stderr, "\r\033[K");
  if (report.consensus) {
    for (const auto& m : report.consensus->golden_missing) {
      std::fprintf(stderr, "sdcprobe: the golden file has no digest for %s\n", m.c_str());
    }
  }

  // The report first: a report that cannot be written is a could-not-test, and its UNKNOWN line must
  // be the only verdict on stdout.
  if (!args.json_path.empty()) write_file_atomically(args.json_path, report_json(report).dump(2) + "\n");
  if (!args.store_dir.empty()) publish_store_files(args.store_dir, store_files(report));
  if (npd) std::printf("%s\n", npd_verdict(report).c_str());
  std::ostream& text = npd ? std::cerr : std::cout;
  text << results_table(report);
  // The GPUs' own health, condition by condition, when it fails the run or could not be read.
  if (report.health && health_exit_code(*report.health) != 0) text << health_text(*report.health);
  text << verdict_line(report) << std::endl;
  return exit_code_of(report);
}

}  // namespace sdc::cli
