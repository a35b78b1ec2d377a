#include "probes/gemm_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "host/gemm_cuda_support.hpp"
#include "kernels/common/gemm_check.hpp"

namespace sdc {

bool gemm_device_has(const GemmProbeConfig& cfg, const DeviceIdentity& id) {
  if (id.backend != "cuda") return true;
  // What CudaGemmEngine::supports says, so qualify never schedules a probe it would skip.
  int major = 0, minor = 0;
  if (std::sscanf(id.compute_capability.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return gemm_cuda_operands(cfg.type, cfg.path, major * 10 + minor).has_value();
}

uint32_t gemm_probe_k(const GemmProbeConfig& cfg, uint32_t n) {
  if (cfg.inputs == GemmInputs::kDense) return std::min(n, kGemmDenseMaxK);
  const bool fp8 = cfg.type == GemmType::kE4m3 || cfg.type == GemmType::kE5m2;
  if (fp8 && gemm_inputs_exact(cfg.inputs)) return std::min(n, kGemmFp8ExactK);
  return n;
}

uint32_t gemm_probe_n(const GemmProbeConfig& cfg, const ProbeContext& ctx) {
  const bool cpu = ctx.device.identity().backend == "cpu";
  // GPUs reach their full tensor-core rate from about n = 8192 (2048 leaves them mostly idle), and
  // a pass there takes milliseconds: every level runs it. The CPU's quick budget holds n = 256.
  uint32_t n = cpu ? (ctx.level == Level::kQuick ? 256 : 2048) : 8192;
  if (ctx.gemm_n) return *ctx.gemm_n;
  if (ctx.compute_bytes) {
    uint64_t per = 2ULL * gemm_input_bytes(cfg.type) + gemm_output_bytes(cfg.type);
    // Random fp8 adds its reference on the GPU: A and B as int8 with their magnitudes, and the two
    // INT32 results (gemm_reference_check).
    if (gemm_reference_check(cfg.type, cfg.inputs)) per += 2 * 2 + 2 * sizeof(int32_t);
    uint32_t fit = 64;
    while (uint64_t{fit} * 2 * fit * 2 * per <= *ctx.compute_bytes && fit < (1u << 15)) fit *= 2;
    n = fit;
  }
  return n;
}

GemmSpec gemm_probe_spec(const GemmProbeConfig& cfg, const ProbeContext& ctx) {
  GemmSpec spec;
  spec.type = cfg.type;
  spec.inputs = cfg.inputs;
  spec.path = cfg.path;
  spec.m = spec.n = gemm_probe_n(cfg, ctx);
  spec.k = gemm_probe_k(cfg, spec.n);
  spec.seed = ctx.seed;
  if (ctx.gemm_cuda_model) spec.model = gemm_cuda_accumulation(spec.type, spec.path);
  spec.digest = cfg.inputs == GemmInputs::kExact || cfg.repeat;
  if (cfg.repeat) {
    const uint32_t preset = ctx.level == Level::kQuick ? 3 : ctx.level == Level::kStandard ? 5 : 10;
    spec.repeats = std::clamp(ctx.iterations.value_or(preset), 2u, 64u);
  }
  return spec;
}

nlohmann::json gemm_shape_params(const GemmSpec& spec) {
  return {{"type", gemm_type_name(spec.type)},
          {"inputs", gemm_inputs_name(spec.inputs)},
          {"path", spec.path == GemmPath::kSimt ? "simt" : "library"},
          {"m", spec.m},
          {"n", spec.n},
          {"k", spec.k},
          {"ldc", spec.n},
          {"record_index", "row * ldc + column"},
          {"lane", "column % 32"}};
}

void run_gemm_probe(const GemmProbeConfig& cfg, ProbeContext& ctx, ProbeResult& result) {
  if (!gemm_device_has(cfg, ctx.device.identity())) throw std::runtime_error("this device has no such GEMM data type");
  GemmEngine* engine = ctx.device.gemm();
  if (engine == nullptr) throw std::runtime_error("this backend offers no GEMM");
  const GemmSpec spec = gemm_probe_spec(cfg, ctx);
  const GemmRun run = engine->run(spec);
  result.report = run.report;
  const double flops = 2.0 * spec.m * spec.n * spec.k * spec.repeats;
  result.flops = flops;
  result.bytes = (static_cast<uint64_t>(spec.m + spec.n) * spec.k * gemm_input_bytes(spec.type) +
                  static_cast<uint64_t>(spec.m) * spec.n * gemm_output_bytes(spec.type)) *
                 spec.repeats;
  const GemmAccumulation acc = spec.model ? *spec.model : engine->accumulation(spec.type, spec.path);
  nlohmann::json p = gemm_shape_params(spec);
  p.update({{"repeats", spec.repeats},
            {"gflops", run.gemm_s > 0 ? flops / run.gemm_s / 1e9 : 0.0},
            {"gemm_s", run.gemm_s},
            {"verify_s", run.verify_s},
            {"generate_s", run.generate_s},
            {"verify_fraction", run.gemm_s > 0 ? run.verify_s / run.gemm_s : 0.0},
            {"check_s", run.check_s},
            // The check's reference (0 when the engine kept it from the previous run), and
            // the whole check's time for these inputs, reference included, per GEMM time.
            {"reference_s", run.reference_s},
            {"check_fraction", run.gemm_s > 0 ? (run.check_s + run.reference_s) / run.gemm_s : 0.0},
            {"check_tile", run.check_tile},
            {"flagged_checks", run.flagged_checks},
            {"algorithm", run.algorithm},
            {"library_version", run.library_version}});
  if (spec.inputs == GemmInputs::kRandom) {
    p["max_ratio"] = run.max_ratio;  // largest |r| / tau: the headroom the bound leaves
    // The smallest change of one element every row check was sure to catch, per rms of C.
    p["detectable_multiple"] = run.c_rms > 0 ? run.detectable / run.c_rms : 0.0;
    p["bounds"] = ctx.gemm_cuda_model ? "cuda" : "engine";
    p["u_acc"] = acc.u_acc;
    p["u_out"] = acc.u_out;
    if (acc.chunk > 1) p["accumulation_chunk"] = {{"k", acc.chunk}, {"u", acc.u_inner}};
  }
  if (cfg.repeat) {
    nlohmann::json digests = nlohmann::json::array();
    for (const auto& d : run.digests) digests.push_back(digest_hex(d));
    p["digests"] = digests;
  }
  if (!run.digests.empty()) result.digest = run.digests.front();
  result.params = std::move(p);
}

}  // namespace sdc
