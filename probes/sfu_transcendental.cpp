// sfu.transcendental: the hardware approximations __sinf, __cosf, __expf, __log2f, rsqrtf and
// __fdividef over N seeded inputs each (kernels/common/sfu.hpp); on the CPU, its libm's sinf, cosf,
// expf, log2f and 1 / sqrtf and x / y. They are not correctly rounded, so there is no bit-exact
// golden: every result is checked against FP64 on the host within the error bound the CUDA
// documentation states, and the digest of all results goes to consensus, where devices of one class
// must agree bit for bit (a majority of three or more, or a golden file, decides). Elements
// f*N..(f+1)*N-1 are function f: sin, cos, exp, log2, rsqrt, divide.
// Targets: the special function units (MUFU sin, cos, ex2, lg2, rsq, rcp) and the operations around
// them; on the CPU, libm's table and polynomial paths on every core.
// Cannot see: on one device alone, errors within the bound (low significand bits: only the digest,
// against peers or a golden file, sees those); inputs outside the ranges; denormals.
#include "probes/sfu_transcendental.hpp"

#include <algorithm>
#include <array>
#include <tuple>

#include "kernels/common/sfu.hpp"
#include "probes/builtin.hpp"

namespace sdc {
namespace {

constexpr std::array<const char*, kSfuFunctions> kFunctionNames = {"sin", "cos", "exp", "log2", "rsqrt", "divide"};

// Elements per function: a multiple of 64, so the output is whole 64-bit words.
uint64_t elements_per_function(const ProbeContext& ctx) {
  if (ctx.compute_bytes) return std::max<uint64_t>(64, *ctx.compute_bytes / (kSfuFunctions * sizeof(float)) / 64 * 64);
  // The host's FP64 check costs about as much as a CPU device's libm, and far more than a GPU's SFU.
  const bool cpu = ctx.device.identity().backend == "cpu";
  switch (ctx.level) {
    case Level::kQuick: return cpu ? 1u << 16 : 1u << 20;
    case Level::kStandard: return cpu ? 1u << 20 : 1u << 22;
    case Level::kLong: return cpu ? 1u << 22 : 1u << 24;
  }
  return 1u << 16;
}

ReferenceCache<std::tuple<uint64_t, uint64_t>, SfuReferenceSet>& reference_cache() {
  static ReferenceCache<std::tuple<uint64_t, uint64_t>, SfuReferenceSet> cache(kSfuCacheSets, kSfuCacheBytes);
  return cache;
}

// A heartbeat after each kBeatElements of the host's FP64 work: at the long level it takes seconds.
constexpr uint64_t kBeatElements = 1u << 16;

SfuReferenceSet compute_reference_set(uint64_t seed, uint64_t per_function, const std::function<void()>& beat) {
  const uint64_t total = per_function * kSfuFunctions;
  SfuReferenceSet set;
  set.reference.resize(total);
  set.allowed.resize(total);
  for (uint64_t i = 0; i < total; ++i) {
    if (i % kBeatElements == kBeatElements - 1 && beat) beat();
    const SfuFunction f = sfu_function_of(i, per_function);
    const SfuArgs a = sfu_input(seed, f, i % per_function);
    set.reference[i] = sfu_reference(f, a);
    set.allowed[i] = sfu_allowed_error(f, a, set.reference[i]);
  }
  return set;
}

class SfuTranscendentalProbe : public Probe {
 public:
  std::string id() const override { return "sfu.transcendental"; }
  std::string targets() const override {
    return "hardware approximations of sin, cos, exp, log2, rsqrt and division (CPU: libm)";
  }
  std::string blind_spots() const override {
    return "alone, errors within the documented bound (consensus or a golden file sees them); denormals";
  }
  bool has_stated_bound() const override { return true; }
  bool included_at(Level, const DeviceIdentity&) const override { return true; }

  void run(ProbeContext& ctx, ProbeResult& result) const override {
    SfuJob job;
    job.seed = ctx.seed;
    job.per_function = elements_per_function(ctx);
    const uint64_t total = job.per_function * kSfuFunctions;
    DeviceBuffer& out = ctx.device.scratch(total * sizeof(float));
    ctx.device.run_sfu(job, out);
    // The output as 64-bit words: element 2w in the low half of word w, 2w + 1 in the high half.
    result.digest = ctx.device.digest(out, total / 2);
    std::vector<float> values(total);
    ctx.device.download(values.data(), out, total * sizeof(float));
    result.bytes += 3 * total * sizeof(float);   // written, digested, downloaded
    result.flops += static_cast<double>(total);  // one function evaluation per element

    // No golden_digest: without correct rounding the host cannot predict the device's bits.
    const bool cuda = ctx.device.identity().backend == "cuda";
    const std::function<void()> beat = [&] { ctx.device.beat(); };
    const std::shared_ptr<const SfuReferenceSet> set = sfu_reference_set(job.seed, job.per_function, beat);
    std::array<double, kSfuFunctions> max_ratio{};
    MismatchReport& report = result.report;
    report.checked += total;
    for (uint64_t i = 0; i < total; ++i) {
      if (i % kBeatElements == kBeatElements - 1) beat();
      const SfuFunction f = sfu_function_of(i, job.per_function);
      double reference, allowed;
      if (set) {
        reference = set->reference[i];
        allowed = set->allowed[i];
      } else {
        const SfuArgs a = sfu_input(job.seed, f, i % job.per_function);
        reference = sfu_reference(f, a);
        allowed = sfu_allowed_error(f, a, reference);
      }
      const double ratio = sfu_ratio_to_allowed(values[i], reference, allowed);
      if (ratio <= 1.0) {
        double& m = max_ratio[static_cast<size_t>(f)];
        m = std::max(m, ratio);
        continue;
      }
      ++report.mismatches;
      MismatchRecord r;
      r.index = i;
      r.expected = bits_of_float(static_cast<float>(reference));  // the correctly rounded result
      r.observed = bits_of_float(values[i]);
      r.width_bits = 32;
      if (cuda) r.lane = sfu_lane_of(i);
      report.keep(r);
    }

    result.params["elements_per_function"] = job.per_function;
    // launch_sfu's layout puts element i on lane i % 32 (sfu_lane_of): the records carry it.
    if (cuda) result.params["lane"] = "index % 32";
    // The largest error seen within the bound, as a fraction of it: the headroom the bound leaves.
    nlohmann::json ratios = nlohmann::json::object();
    for (size_t f = 0; f < kSfuFunctions; ++f) ratios[kFunctionNames[f]] = max_ratio[f];
    result.params["max_ratio"] = ratios;
    const std::string library = ctx.device.math_library();
    if (!library.empty()) result.params["library_version"] = library;  // part of the equivalence class
  }
};

}  // namespace

std::shared_ptr<const SfuReferenceSet> sfu_reference_set(uint64_t seed, uint64_t per_function,
                                                         const std::function<void()>& beat) {
  if (per_function > kSfuCacheBytes / (kSfuFunctions * 2 * sizeof(double))) return nullptr;
  return reference_cache().get({seed, per_function}, [&] { return compute_reference_set(seed, per_function, beat); });
}

ReferenceCacheStats sfu_reference_cache_stats() { return reference_cache().stats(); }

std::unique_ptr<Probe> make_sfu_transcendental_probe() { return std::make_unique<SfuTranscendentalProbe>(); }

}  // namespace sdc
