#include "scheduler/coverage/coverage.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "host/error.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {
namespace {

const char* model_name(FaultModel m) {
  switch (m) {
    case FaultModel::kBitflip: return "bitflip";
    case FaultModel::kMultibit: return "multibit";
    case FaultModel::kRandom: return "random";
    case FaultModel::kStuck: return "stuck";
    case FaultModel::kLane: return "lane";
    default: return "other";
  }
}

const char* mode_name(FaultMode m) {
  switch (m) {
    case FaultMode::kTransient: return "transient";
    case FaultMode::kIntermittent: return "intermittent";
    case FaultMode::kPermanent: return "permanent";
  }
  return "permanent";
}

// The element type a probe's output is checked in: the dtype a GEMM probe names, else the
// element width.
std::string dtype_of(const std::string& probe, unsigned width_bits) {
  const std::string last = probe.substr(probe.rfind('.') + 1);
  for (const char* t : {"fp64", "fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "int8"}) {
    if (last == t) return last;
  }
  if (probe == "alu.fma32") return "fp32";
  if (probe == "alu.fma64") return "fp64";
  if (probe == "sfu.transcendental") return "fp32";
  return "u" + std::to_string(width_bits);
}

// log of the binomial probability of k successes in n trials with success probability p.
double log_binomial_pmf(uint64_t k, uint64_t n, double p) {
  const double kk = static_cast<double>(k), nn = static_cast<double>(n);
  return std::lgamma(nn + 1) - std::lgamma(kk + 1) - std::lgamma(nn - kk + 1) + kk * std::log(p) +
         (nn - kk) * std::log1p(-p);
}

// P(X <= k) for X ~ Binomial(n, p).
double binomial_cdf(uint64_t k, uint64_t n, double p) {
  if (p <= 0) return 1;
  if (p >= 1) return k >= n ? 1 : 0;
  double sum = 0;
  for (uint64_t i = 0; i <= k; ++i) sum += std::exp(log_binomial_pmf(i, n, p));
  return std::min(1.0, sum);
}

// The p in [0, 1] where the decreasing function f crosses `target`, by bisection.
template <typename F>
double solve_decreasing(F&& f, double target) {
  double lo = 0, hi = 1;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (f(mid) > target ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Which field of an IEEE binary64, binary32 or binary16 word a bit belongs to.
const char* float_field(unsigned width_bits, int bit) {
  const int mantissa = width_bits == 64 ? 52 : width_bits == 32 ? 23 : 10;
  if (bit == static_cast<int>(width_bits) - 1) return "sign";
  return bit >= mantissa ? "exponent" : "mantissa";
}

std::string percent(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f%%", 100 * x);
  return text;
}

std::string interval_text(const CoverageCounts& c) {
  if (c.changed == 0) return "n/a";
  const auto [lo, hi] = clopper_pearson(c.detected, c.changed);
  return percent(c.coverage()) + " [" + percent(lo) + ", " + percent(hi) + "]";
}

}  // namespace

void CoverageCounts::add(const CoverageCounts& o) {
  injected += o.injected;
  changed += o.changed;
  detected += o.detected;
  below_tolerance += o.below_tolerance;
  missed += o.missed;
}

double CoverageCounts::coverage() const {
  return changed == 0 ? 0.0 : static_cast<double>(detected) / static_cast<double>(changed);
}

std::pair<double, double> clopper_pearson(uint64_t k, uint64_t n, double confidence) {
  if (n == 0 || k > n) throw std::invalid_argument("clopper_pearson: need 0 <= k <= n, n > 0");
  const double alpha = 1 - confidence;
  // lower: P(X >= k | p) = alpha/2; upper: P(X <= k | p) = alpha/2.
  const double lower =
      k == 0 ? 0.0 : solve_decreasing([&](double p) { return binomial_cdf(k - 1, n, p); }, 1 - alpha / 2);
  const double upper = k == n ? 1.0 : solve_decreasing([&](double p) { return binomial_cdf(k, n, p); }, alpha / 2);
  return {lower, upper};
}

CoverageCounts CoverageReport::totals(bool bounded_probes, const std::string& model) const {
  CoverageCounts t;
  for (const auto& [key, counts] : cells) {
    if (bounded.at(std::get<0>(key)) == bounded_probes && (model.empty() || std::get<2>(key) == model)) t.add(counts);
  }
  return t;
}

int CoverageReport::exit_code() const { return totals(false).missed == 0 && false_positives == 0 ? 0 : 1; }

CoverageReport run_coverage(Device& device, const CoverageOptions& options) {
  if (options.models.empty()) throw InputError("--models: empty");
  std::vector<const Probe*> probes;
  try {
    probes = builtin_registry().select(options.probes);
  } catch (const InputError& e) {
    throw InputError(std::string("--probes: ") + e.what());
  }
  CoverageReport report;
  report.options = options;
  for (const Probe* p : probes) report.bounded[p->id()] = p->has_stated_bound();
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(options.seed);
  if (options.progress) options.progress->start("trials", options.trials + options.clean_runs * probes.size());

  RunOptions run;
  run.size_bytes = options.buffer_bytes;
  run.compute_bytes = options.buffer_bytes;
  run.iterations = options.chain_iterations;
  run.gemm_n = options.gemm_n;
  run.gemm_cuda_model = options.gemm_cuda_model;
  const FaultMode modes[] = {FaultMode::kPermanent, FaultMode::kTransient, FaultMode::kIntermittent};
  for (uint64_t t = 0; t < options.trials; ++t) {
    // Every probe sees every model and mode in turn; bits and positions are drawn.
    const Probe& probe = *probes[t % probes.size()];
    const uint64_t round = t / probes.size();
    const FaultModel model = options.models[round % options.models.size()];
    const FaultMode mode = modes[round % 3];  // 3 and 5 models are coprime: every pair recurs
    const int bit = static_cast<int>(rng() % 64);
    std::string spec =
        std::string("model=") + model_name(model) + ",mode=" + mode_name(mode) + ",bit=" + std::to_string(bit);
    if (mode == FaultMode::kIntermittent) spec += ",p=0.5";
    if (model == FaultModel::kStuck) spec += ",value=" + std::to_string(rng() % 2);
    if (model == FaultModel::kLane) spec += ",lane=" + std::to_string(rng() % 32);
    Injector injector(parse_injection_specs(spec), rng());
    run.seed = rng();
    // "run" is reused: only options that probes mean to be per-run are changed here.
    run.injector = &injector;
    device.reset_injection_tally();
    const ProbeResult r = run_probe(probe, device, run);
    const InjectionTally& tally = device.injection_tally();
    if (tally.points > 0) {
      const unsigned width = tally.width_bits;
      const int cell_bit = model == FaultModel::kRandom ? -1 : bit % static_cast<int>(width);
      CoverageCounts& c = report.cells[{probe.id(), dtype_of(probe.id(), width), model_name(model), cell_bit}];
      report.widths[probe.id()] = width;
      ++c.injected;
      const bool detected = r.outcome == Outcome::kFail || r.outcome == Outcome::kDeviceError;
      if (tally.changed > 0) {
        ++c.changed;
        if (detected) {
          ++c.detected;
        } else if (probe.has_stated_bound()) {
          ++c.below_tolerance;
        } else {
          ++c.missed;
        }
      } else if (detected) {
        // Nothing changed, yet the probe failed: that is a false positive.
        ++report.false_positives;
        report.false_positive_probes.push_back(probe.id());
      }
    }
    if (options.progress) options.progress->add(1);
  }

  run.injector = nullptr;
  for (uint64_t k = 0; k < options.clean_runs; ++k) {
    for (const Probe* p : probes) {
      run.seed = rng();
      const ProbeResult r = run_probe(*p, device, run);
      ++report.clean_runs;
      if (r.outcome == Outcome::kSkipped) ++report.clean_skipped;
      if (r.params.contains("detectable_multiple")) {
        GemmBoundStats& g = report.gemm_bounds[p->id()];
        g.n = r.params["n"].get<uint32_t>();
        g.k = r.params["k"].get<uint32_t>();
        g.tile = r.params["check_tile"].get<uint32_t>();
        ++g.runs;
        g.max_ratio = std::max(g.max_ratio, r.params["max_ratio"].get<double>());
        g.detectable_multiple = std::max(g.detectable_multiple, r.params["detectable_multiple"].get<double>());
      }
      if (r.outcome == Outcome::kFail || r.outcome == Outcome::kDeviceError) {
        ++report.false_positives;
        report.false_positive_probes.push_back(p->id());
      }
      if (options.progress) options.progress->add(1);
    }
  }
  if (options.progress) options.progress->finish();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

nlohmann::json coverage_json(const CoverageReport& report) {
  auto counts_json = [](const CoverageCounts& c) {
    nlohmann::json j = {{"injected", c.injected},
                        {"changed", c.changed},
                        {"detected", c.detected},
                        {"below_tolerance", c.below_tolerance},
                        {"missed", c.missed}};
    if (c.changed > 0) {
      const auto [lo, hi] = clopper_pearson(c.detected, c.changed);
      j["coverage"] = c.coverage();
      j["coverage_ci95"] = {lo, hi};
    }
    return j;
  };
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& [key, c] : report.cells) {
    nlohmann::json j = counts_json(c);
    j["probe"] = std::get<0>(key);
    j["dtype"] = std::get<1>(key);
    j["model"] = std::get<2>(key);
    j["bit"] = std::get<3>(key);
    cells.push_back(std::move(j));
  }
  nlohmann::json clean = {
      {"runs", report.clean_runs}, {"false_positives", report.false_positives}, {"skipped", report.clean_skipped}};
  if (report.clean_runs > 0 && report.false_positives == 0) {
    clean["rule_of_three_upper_bound"] = 3.0 / static_cast<double>(report.clean_runs);
  }
  nlohmann::json gemm = nlohmann::json::object();
  for (const auto& [probe, g] : report.gemm_bounds) {
    gemm[probe] = {{"n", g.n},
                   {"k", g.k},
                   {"tile", g.tile},
                   {"clean_runs", g.runs},
                   {"max_ratio", g.max_ratio},
                   {"detectable_multiple", g.detectable_multiple}};
  }
  return {{"seed", report.options.seed},
          {"trials", report.options.trials},
          {"gemm_n", report.options.gemm_n ? nlohmann::json(*report.options.gemm_n) : nlohmann::json(nullptr)},
          {"gemm_bounds", report.options.gemm_cuda_model ? "cuda" : "engine"},
          {"gemm_clean", gemm},
          {"seconds", report.seconds},
          {"exact", counts_json(report.totals(false))},
          {"exact_bitflip", counts_json(report.totals(false, "bitflip"))},
          {"bounded", counts_json(report.totals(true))},
          {"clean", clean},
          {"false_positive_probes", report.false_positive_probes},
          {"cells", cells},
          {"exit_code", report.exit_code()}};
}

std::string coverage_markdown(const CoverageReport& report, const std::string& command) {
  std::ostringstream md;
  md << "# Detection coverage\n\n"
     << "Generated by `" << command << "` (seed " << report.options.seed << ", " << report.options.trials
     << " injection trials, " << report.clean_runs << " clean runs, " << static_cast<int>(report.seconds) << " s).\n\n"
     << "A trial injects one fault model into one probe's output, between computation and verification, "
        "in permanent, transient or intermittent (p = 0.5) mode. *Changed*: the fault changed an output "
        "element (a stuck bit already at its value changes nothing and is masked). *Coverage*: detected / "
        "changed, with the Clopper-Pearson 95% interval. *Below tolerance*: changed but under a probe's "
        "stated bound (Freivalds' tau; the documented error bounds of sfu.transcendental, whose digest "
        "only consensus compares), counted, never dropped.\n\n";

  md << "## Summary\n\n| probes | injected | changed | detected | below tolerance | missed | coverage [95% CI] |\n"
     << "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
  const std::pair<const char*, CoverageCounts> rows[] = {
      {"exact, every model", report.totals(false)},
      {"exact, single-bit flips", report.totals(false, "bitflip")},
      {"with a stated bound, every model", report.totals(true)},
      {"with a stated bound, single-bit flips", report.totals(true, "bitflip")},
  };
  for (const auto& [name, t] : rows) {
    md << "| " << name << " | " << t.injected << " | " << t.changed << " | " << t.detected << " | " << t.below_tolerance
       << " | " << t.missed << " | " << interval_text(t) << " |\n";
  }

  md << "\n## Per probe and fault model\n\n| probe | dtype | model | injected | changed | detected | below tolerance "
        "| missed | coverage [95% CI] |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
  std::map<std::tuple<std::string, std::string, std::string>, CoverageCounts> by_model;
  for (const auto& [key, c] : report.cells) by_model[{std::get<0>(key), std::get<1>(key), std::get<2>(key)}].add(c);
  for (const auto& [key, c] : by_model) {
    md << "| " << std::get<0>(key) << " | " << std::get<1>(key) << " | " << std::get<2>(key) << " | " << c.injected
       << " | " << c.changed << " | " << c.detected << " | " << c.below_tolerance << " | " << c.missed << " | "
       << interval_text(c) << " |\n";
  }

  // Per bit, for probes with a stated bound: where tau leaves single-bit flips undetected.
  std::map<std::pair<std::string, std::string>, std::map<int, CoverageCounts>> bits;
  for (const auto& [key, c] : report.cells) {
    const auto& [probe, dtype, model, bit] = key;
    if (report.bounded.at(probe) && model == "bitflip") bits[{probe, dtype}][bit].add(c);
  }
  if (!bits.empty()) {
    md << "\n## Single-bit flips per bit position, probes with a stated bound\n\n"
          "Bits are numbered from the least significant; the sign is the top bit, the exponent below it.\n";
    for (const auto& [probe_dtype, per_bit] : bits) {
      const unsigned width = report.widths.at(probe_dtype.first);
      md << "\n### " << probe_dtype.first << " (" << width << "-bit output)\n\n"
         << "| bit | field | changed | detected | below tolerance | missed |\n"
         << "| ---: | --- | ---: | ---: | ---: | ---: |\n";
      for (const auto& [bit, c] : per_bit) {
        md << "| " << bit << " | " << float_field(width, bit) << " | " << c.changed << " | " << c.detected << " | "
           << c.below_tolerance << " | " << c.missed << " |\n";
      }
    }
  }

  md << "\n## Clean runs\n\n"
     << report.clean_runs << " probe runs with fresh seeds and no injection: " << report.false_positives
     << " false positives";
  if (report.clean_runs > 0 && report.false_positives == 0) {
    md << " (95% upper bound on the false-positive rate by the rule of three: 3 / " << report.clean_runs << " = "
       << percent(3.0 / static_cast<double>(report.clean_runs)) << ")";
  }
  md << ".\n";
  if (!report.gemm_bounds.empty()) {
    md << "\n## GEMM bounds on clean runs (random inputs, " << (report.options.gemm_cuda_model ? "CUDA" : "this")
       << " engine's accumulation model)\n\n"
          "*Detectable*: the largest over the row checks of (tau + |r|) / min w, per rms of C: a change of one "
          "element by more is caught wherever it falls. *max |r|/tau*: the closest rounding came to a false "
          "alarm (at 1).\n\n| probe | n | k | tile | clean runs | max abs(r)/tau | detectable (x rms C) |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (const auto& [probe, g] : report.gemm_bounds) {
      char row[256];
      std::snprintf(row, sizeof row, "| %s | %u | %u | %u | %llu | %.3g | %.3g |\n", probe.c_str(), g.n, g.k, g.tile,
                    static_cast<unsigned long long>(g.runs), g.max_ratio, g.detectable_multiple);
      md << row;
    }
  }
  return md.str();
}

}  // namespace sdc
