#include <cstdio>
#include <cstring>

#include "cli/probe_run.hpp"

namespace sdc::cli {

void print_npd_could_not_test(int argc, char** argv, const std::string& why) {
  bool npd = false;
  for (int i = 1; i < argc; ++i) {
    npd = npd || std::strcmp(argv[i], "--format=npd") == 0 ||
          (std::strcmp(argv[i], "--format") == 0 && i + 1 < argc && std::strcmp(argv[i + 1], "npd") == 0);
  }
  if (!npd) return;
  std::printf("%s\n", npd_could_not_test(why).c_str());
  std::fflush(stdout);
}

void add_qualify_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* sub = app.add_subcommand(
      "qualify",
      "Gate a node: run the level's catalogue on every device. Exit 0 pass, 1 fault found, 2 could not test");
  auto args = std::make_shared<ProbeRunArgs>();
  auto level = std::make_shared<std::string>("quick");
  sub->add_option("--level", *level, "quick (within 60 s), standard (about 5 min) or long")
      ->check(CLI::IsMember({"quick", "standard", "long"}))
      ->capture_default_str();
  add_probe_run_options(sub, *args);
  sub->add_option("--format", args->format,
                  "text, or npd for node-problem-detector: stdout holds only a verdict of at most 80 characters "
                  "(OK: / SDC: UUID probe / UNKNOWN:); the seed and table go to stderr")
      ->check(CLI::IsMember({"text", "npd"}))
      ->capture_default_str();
  add_watchdog_option(sub, args->probe_timeout_s);
  sub->add_option("--budget", args->budget,
                  "The most the probes may take, all devices together, e.g. 90s or 10m; a probe still running then "
                  "could not be tested (exit 2). Default 50s at quick (Slurm allows 60 s), else none");
  sub->add_flag("--consensus", args->consensus,
                "Compare the deterministic probes' output digests across the devices of each equivalence class "
                "(docs/consensus.md)");
  sub->add_option("--comm", args->comm,
                  "With --consensus: local (the devices of this process) or mpi (every rank of mpirun / srun)")
      ->check(CLI::IsMember({"local", "mpi"}))
      ->capture_default_str();
  sub->add_option("--golden", args->golden_path,
                  "Compare the digests with a golden file (sdcprobe golden record); runs with its seed, level and "
                  "sizes, and implies --consensus");
  add_store_option(sub, args->store_dir);
  args->isolate = true;
  sub->callback([&global, &exit_code, args, level] {
    exit_code = run_and_report(global, *args, {}, parse_level(*level), "qualify");
  });
}

}  // namespace sdc::cli
