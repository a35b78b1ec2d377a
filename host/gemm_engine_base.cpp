// The shared loop of the engines whose C is verified on the host (gemm_engine_base.hpp).
#include "host/gemm_engine_base.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "host/gemm_checks.hpp"
#include "host/gemm_confirm.hpp"
#include "host/gemm_digest.hpp"
#include "kernels/common/gemm_check.hpp"

namespace sdc {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

GemmRun HostVerifiedGemmEngine::run(const GemmSpec& spec) {
  gemm_require_runnable(*this, spec);
  GemmRun run;
  constexpr double kSmallGemmFlops = 1 << 25;
  active_threads_ = 2.0 * spec.m * spec.n * spec.k < kSmallGemmFlops ? 1 : threads();
  const int nt = active_threads_;
  auto t0 = std::chrono::steady_clock::now();
  // The inputs and their checks' reference stay while the next run asks for the same inputs.
  run.inputs_reused = loaded_ && gemm_same_inputs(inputs_.spec, spec);
  if (!run.inputs_reused) {
    loaded_ = false;
    generate_gemm_inputs_into(spec, nt, inputs_);
    load(inputs_);
    loaded_ = true;
    run.generate_s = seconds_since(t0);
    device_.beat();  // the host's work between the device's, O(n^2) each, beats too
  }
  const GemmHostInputs& in = inputs_;
  const uint64_t elements = static_cast<uint64_t>(spec.m) * spec.n;
  const unsigned width = gemm_output_bytes(spec.type) * 8;
  const uint64_t c_bytes = elements * gemm_output_bytes(spec.type);
  DeviceBuffer* const c = &gemm_output_buffer(device_, c_, spec);
  const GemmAccumulation acc = spec.model ? *spec.model : accumulation(spec.type, spec.path);
  if (!reference_ || !gemm_reference_fits(*reference_, spec, acc)) {
    reference_.reset();
    reference_ = gemm_reference(in, acc, nt);
    run.reference_s = reference_->compute_s;
    run.verify_s += run.reference_s;
    run.inputs_reused = false;
    device_.beat();
  }
  std::vector<uint8_t> first;  // repeat 0's output, for locating a repeat that differs
  const bool compared = spec.repeats > 1 && spec.compare_repeats;
  std::vector<uint64_t> seen;  // indices already counted, so one wrong element counts once
  for (uint32_t rep = 0; rep < std::max(1u, spec.repeats); ++rep) {
    t0 = std::chrono::steady_clock::now();
    multiply(in, *c);
    run.gemm_s += seconds_since(t0);
    inject_(*c, elements, width, 1);
    t0 = std::chrono::steady_clock::now();
    const void* host_c = fetch(*c, c_bytes);
    GemmVerdict v = verify_gemm(in, host_c, *reference_, nt);
    // Digests only where repeats or devices are compared (gemm.repeat.*, gemm.exact.* for
    // consensus): a digest pass costs as much as the verification.
    if (compared || spec.digest) run.digests.push_back(gemm_digest(host_c, c_bytes, nt));
    if (compared && rep == 0)
      first.assign(static_cast<const uint8_t*>(host_c), static_cast<const uint8_t*>(host_c) + c_bytes);
    if (rep > 0 && compared && run.digests[rep] != run.digests[0] && v.report.mismatches == 0) {
      // Differs from repeat 0 while both pass their bounds: name the elements that differ.
      for (uint64_t e = 0; e < elements; ++e) {
        const uint64_t now = gemm_output_bits(spec.type, host_c, e),
                       then = gemm_output_bits(spec.type, first.data(), e);
        if (now == then) continue;
        ++v.report.mismatches;
        v.report.keep(gemm_mismatch_record(spec, e, then, now));
      }
    }
    run.verify_s += seconds_since(t0);
    device_.beat();
    gemm_merge_repeat(run, v, rep, seen);
  }
  run.algorithm = algorithm(spec);
  run.library_version = library_version();
  return run;
}

}  // namespace sdc
