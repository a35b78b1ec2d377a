// gemm.burn.<dtype>: back-to-back GEMMs on one set of random full-significand inputs for a set
// time, keeping the device at its power limit the way a training job does, every result checked
// by FP64 Freivalds/ABFT against the bound tau (as gemm.random.*). The check's reference, A (B w)
// and the bound, depends on the inputs alone: the engine computes it once and each later GEMM
// costs one pass over C, so the GEMMs, not the check, fill the time. The first two thirds of the
// time run at full load; the last third pulses (load, then idle, each half a period), since load
// steps move a GPU's minimum safe voltage. Once a second the device's temperature, SM clock, power
// against its limit and clock-event reasons are sampled (NVML; a backend without them says so);
// a wrong result names the second, the phase, the temperature and the clock it happened at. A burn
// that reached neither the power limit nor the GPU's maximum SM clock under load says so: a
// throttled or capped GPU, not the same test (host/burn_load.hpp judges it).
// Targets: faults that appear under sustained heat and power or at load steps (SDC rates grow with
// temperature above a device's own threshold), intermittently.
// Cannot see: errors below tau; faults that need a hotter or longer run than the level gives.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "host/burn_load.hpp"
#include "host/gemm_confirm.hpp"
#include "probes/builtin.hpp"
#include "probes/gemm_probe.hpp"

namespace sdc {
namespace {

constexpr double kQuickBurn_s = 1;  // only when named (run 'gemm.*'): quick's catalogue has no burn
constexpr double kStandardBurn_s = 60;
constexpr double kLongBurn_s = 300;
constexpr double kPulsedShare = 1.0 / 3;  // of the time, at the end
constexpr double kPulsePeriod_s = 1.0;    // load for the first half, idle for the second
constexpr size_t kMaxWrongResults = 16;
// GEMMs per engine run: about kBatch_s of them, so that a device engine reads the checks' verdicts
// back once per batch instead of waiting for each (at most kMaxBatch; the first run, which makes the
// inputs and their reference, is one GEMM).
constexpr double kBatch_s = 0.05;
constexpr uint32_t kMaxBatch = 64;

uint32_t next_batch(double gemm_s) {
  if (!(gemm_s > 0)) return 1;
  const double fit = kBatch_s / gemm_s;
  return fit >= kMaxBatch ? kMaxBatch : fit < 1 ? 1 : static_cast<uint32_t>(fit);
}

double burn_seconds(const ProbeContext& ctx) {
  if (ctx.burn_s) return *ctx.burn_s;
  return ctx.level == Level::kQuick ? kQuickBurn_s : ctx.level == Level::kStandard ? kStandardBurn_s : kLongBurn_s;
}

// The type a level's catalogue burns on a device: bf16, what training runs, where the GPU has it.
GemmType level_burn_type(const DeviceIdentity& device) {
  GemmProbeConfig bf16;
  bf16.type = GemmType::kBf16;
  return device.backend == "cuda" && gemm_device_has(bf16, device) ? GemmType::kBf16 : GemmType::kFp32;
}

nlohmann::json conditions_json(const BurnConditions& c) {
  nlohmann::json j = {{"temperature_c", c.temperature_c},
                      {"sm_clock_mhz", c.sm_clock_mhz},
                      {"power_w", c.power_w},
                      {"power_limit_w", c.power_limit_w}};
  if (c.clock_event_reasons) {
    j["clock_event_reasons"] = clock_event_reason_names(*c.clock_event_reasons);
  } else {
    j["clock_event_reasons"] = nullptr;
  }
  return j;
}

// What one phase (sustained or pulsed) did.
struct Phase {
  uint64_t gemms = 0;
  double busy_s = 0;  // GEMMs and their checks, wall time (without the inputs and their reference)
  double gemm_s = 0;
  nlohmann::json json(double flops_per_gemm) const {
    return {{"gemms", gemms},
            {"busy_s", busy_s},
            {"checked_tflops", busy_s > 0 ? flops_per_gemm * gemms / busy_s / 1e12 : 0.0},
            {"bare_tflops", gemm_s > 0 ? flops_per_gemm * gemms / gemm_s / 1e12 : 0.0}};
  }
};

class GemmBurnProbe : public Probe {
 public:
  explicit GemmBurnProbe(GemmType t) {
    cfg_.type = t;
    cfg_.inputs = GemmInputs::kRandom;
  }
  std::string id() const override { return std::string("gemm.burn.") + gemm_type_name(cfg_.type); }
  std::string targets() const override {
    return "GEMM faults under sustained power and heat and at load steps: every result of a timed burn checked";
  }
  std::string blind_spots() const override {
    return "errors below the rounding bound tau; faults that need more heat or time than the burn gives";
  }
  bool has_stated_bound() const override { return true; }
  // standard and long burn one type per device (bf16 on a GPU that has it, else fp32); the others
  // run when named.
  bool included_at(Level level, const DeviceIdentity& device) const override {
    return level != Level::kQuick && gemm_device_has(cfg_, device) && cfg_.type == level_burn_type(device);
  }
  void run(ProbeContext& ctx, ProbeResult& result) const override;

 private:
  GemmProbeConfig cfg_;
};

void GemmBurnProbe::run(ProbeContext& ctx, ProbeResult& result) const {
  if (!gemm_device_has(cfg_, ctx.device.identity())) throw std::runtime_error("this device has no such GEMM data type");
  GemmEngine* engine = ctx.device.gemm();
  if (engine == nullptr) throw std::runtime_error("this backend offers no GEMM");
  const GemmSpec spec = gemm_probe_spec(cfg_, ctx);
  const double duration = burn_seconds(ctx);
  const double sustained_s = duration * (1 - kPulsedShare);
  const ConditionsSource source = ctx.burn_conditions ? *ctx.burn_conditions : ctx.device.burn_conditions();
  const double flops = 2.0 * spec.m * spec.n * spec.k;

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto elapsed = [&start] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  nlohmann::json samples = nlohmann::json::array();
  std::optional<BurnConditions> last;  // the latest sample
  int64_t sampled_second = -1;
  BurnLoad load;
  // under_load: right after a GEMM; the sample before the first and those in a pulse's idle half are not.
  auto take_sample = [&](const char* phase, bool under_load) {
    if (!source.sample) return;
    const int64_t second = static_cast<int64_t>(elapsed());
    last = source.sample();
    sampled_second = second;
    nlohmann::json s = conditions_json(*last);
    s["second"] = second;
    s["phase"] = phase;
    s["under_load"] = under_load;
    samples.push_back(std::move(s));
    add_burn_sample(load, *last, under_load);
  };
  auto sample_if_due = [&](const char* phase, bool under_load) {
    if (static_cast<int64_t>(elapsed()) > sampled_second) take_sample(phase, under_load);
  };

  take_sample("start", false);
  GemmRun total;
  std::vector<uint64_t> seen;
  Phase sustained, pulsed;
  nlohmann::json wrong = nlohmann::json::array();
  double generate_s = 0, reference_s = 0;
  uint64_t gemms = 0;
  GemmSpec batch = spec;
  batch.compare_repeats = false;
  for (;;) {
    const double t = elapsed();
    if (t >= duration || (ctx.iterations && gemms >= *ctx.iterations)) break;
    if (ctx.iterations) batch.repeats = static_cast<uint32_t>(std::min<uint64_t>(batch.repeats, *ctx.iterations - gemms));
    const bool in_pulse = t >= sustained_s;
    if (in_pulse && std::fmod(t - sustained_s, kPulsePeriod_s) >= kPulsePeriod_s / 2) {
      // Idle to the period's end (or the burn's), waking for each second's sample.
      const double period_end = t - std::fmod(t - sustained_s, kPulsePeriod_s) + kPulsePeriod_s;
      const double wake = std::min({period_end, duration, std::floor(t) + 1});
      std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, wake - t)));
      sample_if_due("pulsed", false);
      continue;
    }
    const char* phase = in_pulse ? "pulsed" : "sustained";
    const auto t0 = Clock::now();
    const GemmRun run = engine->run(batch);
    // The inputs and their check's reference, made once per input set, are not the GEMMs' load.
    const double busy = std::chrono::duration<double>(Clock::now() - t0).count() - run.generate_s - run.reference_s;
    Phase& p = in_pulse ? pulsed : sustained;
    p.gemms += batch.repeats;
    p.busy_s += busy;
    p.gemm_s += run.gemm_s;
    generate_s += run.generate_s;
    reference_s += run.reference_s;
    total.gemm_s += run.gemm_s;
    total.algorithm = run.algorithm;
    total.library_version = run.library_version;
    std::vector<uint32_t> failed = run.failed_repeats;  // of this batch
    if (failed.empty() && run.report.mismatches > 0) failed.push_back(0);
    const uint64_t first_failed = gemms + (failed.empty() ? 0 : failed.front());
    gemm_merge_repeat(total, gemm_verdict_of(run), static_cast<uint32_t>(std::min<uint64_t>(first_failed, UINT32_MAX)),
                      seen);
    if (run.report.mismatches > 0) take_sample(phase, true);  // the conditions it happened at: sampled now
    for (uint32_t rep : failed) {
      if (wrong.size() < kMaxWrongResults) {
        nlohmann::json w = {{"gemm", gemms + rep},
                            {"second", sampled_second < 0 ? static_cast<int64_t>(elapsed()) : sampled_second},
                            {"phase", phase},
                            {"mismatches", run.report.mismatches}};
        if (!run.report.records.empty()) w["first_index"] = run.report.records.front().index;
        if (last) w["conditions"] = conditions_json(*last);
        wrong.push_back(std::move(w));
      }
    }
    gemms += batch.repeats;
    batch.repeats = next_batch(run.gemm_s / batch.repeats);
    sample_if_due(phase, true);
  }

  result.report = total.report;
  result.flops = flops * static_cast<double>(gemms);
  result.bytes = (static_cast<uint64_t>(spec.m + spec.n) * spec.k * gemm_input_bytes(spec.type) +
                  static_cast<uint64_t>(spec.m) * spec.n * gemm_output_bytes(spec.type)) *
                 gemms;
  const double busy_s = sustained.busy_s + pulsed.busy_s;
  const GemmAccumulation acc = spec.model ? *spec.model : engine->accumulation(spec.type, spec.path);
  nlohmann::json p = gemm_shape_params(spec);
  p.update({{"burn_s", duration},
            {"elapsed_s", elapsed()},
            {"gemms", gemms},
            {"checked_tflops", busy_s > 0 ? result.flops / busy_s / 1e12 : 0.0},
            {"bare_tflops", total.gemm_s > 0 ? result.flops / total.gemm_s / 1e12 : 0.0},
            {"generate_s", generate_s},
            {"reference_s", reference_s},
            {"gemm_s", total.gemm_s},
            {"check_s", total.check_s},
            {"sustained", sustained.json(flops)},
            {"pulsed", pulsed.json(flops)},
            {"pulse_period_s", kPulsePeriod_s},
            {"pulse_load_fraction", 0.5},
            {"check_tile", total.check_tile},
            {"flagged_checks", total.flagged_checks},
            {"max_ratio", total.max_ratio},
            {"detectable_multiple", total.c_rms > 0 ? total.detectable / total.c_rms : 0.0},
            {"u_acc", acc.u_acc},
            {"u_out", acc.u_out},
            {"bounds", ctx.gemm_cuda_model ? "cuda" : "engine"},
            {"algorithm", total.algorithm},
            {"library_version", total.library_version},
            {"wrong_results", wrong}});
  if (!source.sample) {
    p["conditions"] = "unavailable: " + source.unavailable;
  } else {
    p["conditions"] = "sampled";
    p["samples"] = samples;
    p["samples_under_load"] = load.samples_under_load;
    p["max_temperature_c"] = load.max_temperature_c;
    p["max_power_fraction"] = load.max_power_fraction;
    p["max_sm_clock_fraction"] = load.max_clock_fraction;
    p["clock_event_reasons_seen"] = clock_event_reason_names(load.reasons_seen);
    const std::optional<bool> reached = reached_load(load);
    p["reached_load"] = reached ? nlohmann::json(*reached) : nlohmann::json(nullptr);
    const std::string note = load_note(load);
    if (!note.empty()) p["load_note"] = note;
  }
  result.params = std::move(p);
}

}  // namespace

std::vector<std::unique_ptr<Probe>> make_gemm_burn_probes() {
  std::vector<std::unique_ptr<Probe>> v;
  for (GemmType t :
       {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16, GemmType::kE4m3}) {
    v.push_back(std::make_unique<GemmBurnProbe>(t));
  }
  return v;
}

}  // namespace sdc
