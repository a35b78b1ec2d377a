// Detection coverage, measured: seeded injection trials across the catalogue, counted per (probe,
// dtype, fault model, bit position), and clean runs that measure false positives.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "host/device.hpp"
#include "host/injection.hpp"
#include "host/progress.hpp"
#include "probes/probe.hpp"

namespace sdc {

struct CoverageOptions {
  std::vector<std::string> probes = {"*"};
  std::vector<FaultModel> models = {FaultModel::kBitflip, FaultModel::kMultibit, FaultModel::kRandom,
                                    FaultModel::kStuck, FaultModel::kLane};
  uint64_t trials = 1000;
  uint64_t clean_runs = 0;  // runs of every probe with fresh seeds and no injection
  uint64_t seed = 1;
  uint64_t buffer_bytes = 256u << 10;  // small, so that thousands of trials take minutes
  uint32_t chain_iterations = 64;
  // GEMM probes: the size (none: from buffer_bytes), and whether random inputs are verified with
  // the CUDA engine's bounds and tiles (the GPU's sensitivity, measured on the CPU).
  std::optional<uint32_t> gemm_n;
  bool gemm_cuda_model = false;
  Progress* progress = nullptr;  // trials and clean runs done, of all
};

struct CoverageCounts {
  uint64_t injected = 0;         // trials that injected at least once
  uint64_t changed = 0;          // ... and changed an output element (not masked)
  uint64_t detected = 0;         // ... and the probe failed
  uint64_t below_tolerance = 0;  // changed, not detected, by a probe with a stated bound
  uint64_t missed = 0;           // changed, not detected, by an exact probe

  void add(const CoverageCounts& o);
  // Detected / changed, with its Clopper-Pearson 95% interval.
  double coverage() const;
};

// What a GEMM probe with random inputs reported over the clean runs: its shape and check tile, the
// largest |r| / tau (how close rounding came to a false alarm) and the largest change of one
// element that some check was not sure to catch, per rms of C (the guaranteed detection threshold).
struct GemmBoundStats {
  uint32_t n = 0, k = 0, tile = 0;
  uint64_t runs = 0;
  double max_ratio = 0, detectable_multiple = 0;
};

// (probe, dtype, model, bit); bit is -1 for models without one bit (random).
using CoverageKey = std::tuple<std::string, std::string, std::string, int>;

struct CoverageReport {
  CoverageOptions options;
  std::map<CoverageKey, CoverageCounts> cells;
  std::map<std::string, bool> bounded;     // probe id -> has a stated bound (gemm.random, gemm.repeat)
  std::map<std::string, unsigned> widths;  // probe id -> output element width seen
  uint64_t clean_runs = 0;
  uint64_t false_positives = 0;
  uint64_t clean_skipped = 0;
  std::vector<std::string> false_positive_probes;
  std::map<std::string, GemmBoundStats> gemm_bounds;  // probe id -> clean runs' figures
  double seconds = 0;

  // Totals over cells whose probe is exact (no stated bound), or bounded; `model` restricts them
  // to one fault model ("" for all).
  CoverageCounts totals(bool bounded_probes, const std::string& model = "") const;
  // 0: every changed output of an exact probe was detected and no clean run alarmed; 1 otherwise.
  int exit_code() const;
};

// Two-sided Clopper-Pearson interval for k successes in n trials (n > 0).
std::pair<double, double> clopper_pearson(uint64_t k, uint64_t n, double confidence = 0.95);

CoverageReport run_coverage(Device& device, const CoverageOptions& options);

nlohmann::json coverage_json(const CoverageReport& report);
// The published tables: summary, per probe and model, per bit for bounded probes, clean runs.
std::string coverage_markdown(const CoverageReport& report, const std::string& command);

}  // namespace sdc
