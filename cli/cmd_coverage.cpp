#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "host/atomic_file.hpp"
#include "host/backend.hpp"
#include "host/error.hpp"
#include "host/progress.hpp"
#include "scheduler/coverage/coverage.hpp"

namespace sdc::cli {
namespace {

struct CoverageArgs {
  std::string probes = "*";
  std::string models = "bitflip,multibit,random,stuck,lane";
  uint64_t trials = 1000;
  uint64_t clean = 0;
  uint64_t seed = 1;
  uint32_t gemm_n = 0;  // 0: from the campaign's buffer size
  std::string gemm_bounds = "engine";
  std::string json_path;
  std::string markdown_path;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    if (end > start) items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

FaultModel parse_model(const std::string& name) {
  if (name == "bitflip") return FaultModel::kBitflip;
  if (name == "multibit") return FaultModel::kMultibit;
  if (name == "random") return FaultModel::kRandom;
  if (name == "stuck") return FaultModel::kStuck;
  if (name == "lane") return FaultModel::kLane;
  throw InputError("--models: unknown model '" + name + "' (bitflip, multibit, random, stuck, lane)");
}

int run_coverage_command(const GlobalOptions& global, const CoverageArgs& args, const std::string& command) {
  CoverageOptions options;
  options.probes = split_list(args.probes);
  options.models.clear();
  for (const auto& m : split_list(args.models)) options.models.push_back(parse_model(m));
  options.trials = args.trials;
  options.clean_runs = args.clean;
  options.seed = args.seed;
  if (args.gemm_n != 0) options.gemm_n = args.gemm_n;
  options.gemm_cuda_model = args.gemm_bounds == "cuda";
  Progress progress("coverage");
  options.progress = &progress;
  // The CPU by default: a campaign is about the probes' detection, not the device under test.
  const std::string backend = global.backend == "auto" ? "cpu" : global.backend;
  auto devices = open_devices({backend, 1});
  const CoverageReport report = run_coverage(*devices.front(), options);

  const CoverageCounts exact = report.totals(false), bounded = report.totals(true);
  const CoverageCounts exact_flips = report.totals(false, "bitflip");
  std::printf("coverage: seed %llu, %llu trials, %llu clean runs, %.0f s\n", static_cast<unsigned long long>(args.seed),
              static_cast<unsigned long long>(args.trials), static_cast<unsigned long long>(report.clean_runs),
              report.seconds);
  for (const auto& [name, c] : {std::pair{"exact probes", exact}, std::pair{"  bit flips", exact_flips},
                                std::pair{"bounded probes", bounded}}) {
    std::printf("%-15s injected %llu, changed %llu, detected %llu, below tolerance %llu, missed %llu", name,
                static_cast<unsigned long long>(c.injected), static_cast<unsigned long long>(c.changed),
                static_cast<unsigned long long>(c.detected), static_cast<unsigned long long>(c.below_tolerance),
                static_cast<unsigned long long>(c.missed));
    if (c.changed > 0) {
      const auto [lo, hi] = clopper_pearson(c.detected, c.changed);
      std::printf(", coverage %.4f [%.4f, %.4f]", c.coverage(), lo, hi);
    }
    std::printf("\n");
  }
  std::printf("clean runs: %llu, false positives %llu", static_cast<unsigned long long>(report.clean_runs),
              static_cast<unsigned long long>(report.false_positives));
  if (report.clean_runs > 0 && report.false_positives == 0) {
    std::printf(" (rule of three: rate <= %.2g)", 3.0 / static_cast<double>(report.clean_runs));
  }
  std::printf("\n");
  if (!args.json_path.empty()) write_file_atomically(args.json_path, coverage_json(report).dump(2) + "\n");
  if (!args.markdown_path.empty()) write_file_atomically(args.markdown_path, coverage_markdown(report, command));
  return report.exit_code();
}

}  // namespace

void add_coverage_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* sub = app.add_subcommand(
      "coverage",
      "Measure detection: seeded injection trials per probe, fault model and bit; --clean N for false positives");
  auto args = std::make_shared<CoverageArgs>();
  sub->add_option("--probes", args->probes, "Comma-separated probe globs")->capture_default_str();
  sub->add_option("--models", args->models, "Comma-separated fault models")->capture_default_str();
  sub->add_option("--trials", args->trials, "Injection trials")
      ->check(unsigned_in(0, 1'000'000'000))
      ->capture_default_str();
  sub->add_option("--clean", args->clean, "Runs of every probe with fresh seeds and no injection")
      ->check(unsigned_in(0, 1'000'000'000))
      ->capture_default_str();
  sub->add_option("--seed", args->seed, "Campaign seed (replays it exactly)")
      ->check(unsigned_in(0, UINT64_MAX))
      ->capture_default_str();
  // unsigned_in and the multiple of 32 both run on every value (CLI11's &): the second must not throw.
  const CLI::Validator multiple_of_32(
      [](std::string& text) -> std::string {
        const bool ok = !text.empty() && text.size() < 9 && text.find_first_not_of("0123456789") == std::string::npos &&
                        std::stoul(text) % 32 == 0;
        return ok ? "" : "must be a multiple of 32";
      },
      "a multiple of 32");
  sub->add_option("--gemm-n", args->gemm_n, "GEMM probes at n x n x n (a multiple of 32), as a level runs them")
      ->check(unsigned_in(64, 32768) & multiple_of_32);
  sub->add_option("--gemm-bounds", args->gemm_bounds,
                  "Accumulation model random GEMMs are verified with: engine (this backend's) or cuda (the CUDA "
                  "engine's bounds and check tiles, looser than the CPU's)")
      ->check(CLI::IsMember({"engine", "cuda"}))
      ->capture_default_str();
  sub->add_option("--json", args->json_path, "Write the counts as JSON (atomically)");
  sub->add_option("--markdown", args->markdown_path, "Write the published tables as Markdown (atomically)");
  sub->callback([&global, &exit_code, args] {
    // The full command, so the published tables say exactly how to reproduce them.
    std::string command = "sdcprobe coverage --probes '" + args->probes + "' --models " + args->models + " --trials " +
                          std::to_string(args->trials) + " --clean " + std::to_string(args->clean) + " --seed " +
                          std::to_string(args->seed);
    if (args->gemm_n != 0) command += " --gemm-n " + std::to_string(args->gemm_n);
    if (args->gemm_bounds != "engine") command += " --gemm-bounds " + args->gemm_bounds;
    if (!args->markdown_path.empty()) command += " --markdown " + args->markdown_path;
    exit_code = run_coverage_command(global, *args, command);
  });
}

}  // namespace sdc::cli
