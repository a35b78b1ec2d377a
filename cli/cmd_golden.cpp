// `sdcprobe golden record`: the deterministic probes' digests per equivalence class, from a
// known-good machine, for `qualify --golden` (docs/consensus.md).
#include <cstdio>
#include <iostream>
#include <random>

#include "cli/probe_run.hpp"
#include "cli/validators.hpp"
#include "host/atomic_file.hpp"
#include "host/backend.hpp"
#include "scheduler/consensus/golden.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/qualify_session.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc::cli {

void add_golden_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* golden = app.add_subcommand("golden", "Golden digest files recorded on known-good hardware");
  golden->require_subcommand(1);
  auto* sub = golden->add_subcommand(
      "record", "Run the deterministic probes on every device and write their digests per equivalence class");
  struct Args {
    std::string out;
    std::string level = "quick";
    std::optional<uint64_t> seed;
    std::optional<uint64_t> size_bytes;
    std::optional<uint32_t> iterations;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--out", args->out, "The golden file to write (atomically)")->required();
  sub->add_option("--level", args->level, "quick, standard or long")
      ->check(CLI::IsMember({"quick", "standard", "long"}))
      ->capture_default_str();
  sub->add_option("--seed", args->seed, "The seed (default: random); qualify --golden runs with it")
      ->check(unsigned_in(0, UINT64_MAX));
  sub->add_option("--size", args->size_bytes, "Buffer bytes (suffixes K, M, G are binary)")->transform(buffer_size());
  sub->add_option("--iterations", args->iterations, "Chain length for ALU probes, repeats for gemm.repeat")
      ->check(unsigned_in(1, kMaxIterations));
  sub->callback([&global, &exit_code, args] {
    RunOptions options;
    options.seed =
        args->seed ? *args->seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    options.level = parse_level(args->level);
    options.size_bytes = args->size_bytes;
    options.iterations = args->iterations;
    const auto devices = open_devices({global.backend, global.cpu_devices, global.expect_gpus});
    if (options.size_bytes) {
      std::vector<DeviceIdentity> ids;
      for (const auto& d : devices) ids.push_back(d->identity());
      check_size_bytes(*options.size_bytes, "--size", ids);
    }
    std::vector<const Probe*> probes;
    for (const Probe* p : builtin_registry().select(golden_probe_globs())) {
      for (const auto& d : devices) {
        if (p->included_at(options.level, d->identity())) {
          probes.push_back(p);
          break;
        }
      }
    }
    const RunReport report = run_probes(probes, devices, options, "golden");
    std::cout << results_table(report) << verdict_line(report) << std::endl;
    if (exit_code_of(report) == 1) {
      std::cerr << "sdcprobe: a probe failed: not a known-good machine, no golden file written\n";
      exit_code = 1;
      return;
    }
    GoldenFile g;
    try {
      g = golden_from_outcome(vote(consensus_records(report.devices, report.results, report.host, 0)), options.seed,
                              options.level, options.size_bytes, options.iterations);
    } catch (const std::runtime_error& e) {
      std::cerr << "sdcprobe: " << e.what() << "\n";
      exit_code = 1;
      return;
    }
    write_file_atomically(args->out, golden_to_json(g));
    std::printf("wrote %zu digests to %s (seed 0x%016llx)\n", g.digests.size(), args->out.c_str(),
                static_cast<unsigned long long>(options.seed));
    exit_code = 0;
  });
}

}  // namespace sdc::cli
