#include "probes/chain_probe.hpp"

#include <functional>
#include <tuple>

#include "kernels/common/chains.hpp"

namespace sdc {
namespace {

// Scalar on purpose (this file is compiled without vectorization, probes/CMakeLists.txt): the
// device's vector units must agree with the host's scalar units. `beat` after every seed (the worker
// rate-limits its beats): at the long level, or on a slow or loaded core, 64 seeds take seconds.
std::vector<uint64_t> compute_goldens(const ChainJob& job, const std::function<void()>& beat) {
  std::vector<uint64_t> goldens(static_cast<size_t>(job.seeds) * kChainOutputsPerCopy);
  for (uint32_t k = 0; k < job.seeds; ++k) {
    if (beat) beat();
    uint64_t* g = goldens.data() + static_cast<size_t>(k) * kChainOutputsPerCopy;
    switch (job.kind) {
      case ChainKind::kFma32: {
        float out[2];
        rotation_chain_run(rotation_chain_seed<float>(job.seed, k), job.iterations, out);
        g[0] = bits_of(out[0]);
        g[1] = bits_of(out[1]);
        break;
      }
      case ChainKind::kFma64: {
        double out[2];
        rotation_chain_run(rotation_chain_seed<double>(job.seed, k), job.iterations, out);
        g[0] = bits_of(out[0]);
        g[1] = bits_of(out[1]);
        break;
      }
      case ChainKind::kInt64: int64_chain_run(int64_chain_seed(job.seed, k), job.iterations, g); break;
      case ChainKind::kDivSqrt32: divsqrt_chain_run(divsqrt_chain_seed<float>(job.seed, k), job.iterations, g); break;
      case ChainKind::kDivSqrt64: divsqrt_chain_run(divsqrt_chain_seed<double>(job.seed, k), job.iterations, g); break;
    }
  }
  return goldens;
}

const char* chain_name(ChainKind kind) {
  switch (kind) {
    case ChainKind::kFma32: return "fma32";
    case ChainKind::kFma64: return "fma64";
    case ChainKind::kInt64: return "int64";
    case ChainKind::kDivSqrt32: return "divsqrt32";
    case ChainKind::kDivSqrt64: return "divsqrt64";
  }
  return "";
}

// Floating-point operations per chain step (an FMA counts two).
double flops_per_step(ChainKind kind) {
  switch (kind) {
    case ChainKind::kFma32:
    case ChainKind::kFma64: return 4;
    case ChainKind::kDivSqrt32:
    case ChainKind::kDivSqrt64: return 4;
    case ChainKind::kInt64: return 0;
  }
  return 0;
}

ChainJob size_job(const ProbeContext& ctx, ChainKind kind) {
  const Device& d = ctx.device;
  const uint64_t units = static_cast<uint64_t>(std::max(1, d.identity().compute_units));
  const unsigned scale = ctx.level == Level::kQuick ? 0 : ctx.level == Level::kStandard ? 2 : 4;
  // Per-kind step cost relative to an FMA pair: integer and div/sqrt steps are slower.
  const uint32_t slow = kind == ChainKind::kInt64                                  ? 4
                        : (kind == ChainKind::kFma32 || kind == ChainKind::kFma64) ? 1
                                                                                   : 16;
  ChainJob job;
  job.kind = kind;
  job.seed = ctx.seed;
  job.seeds = 1024;
  if (d.identity().backend == "cpu") {
    job.copies = 16384 * units;
    job.iterations = (8192u << scale) / slow;
  } else {
    job.copies = 4096 * units;  // two copies per resident thread on every SM
    job.iterations = (16384u << scale) / slow;
  }
  if (ctx.iterations) job.iterations = *ctx.iterations;
  return job;
}

// Kept per process: every device of a run shares the seed, and an inline probe repeats its own.
// A few seeds of every kind (16 KiB of goldens each at 1,024 seeds); a sweep pass is a new process
// with a new seed, so nothing here outlives the pass.
constexpr size_t kChainCacheEntries = 32;
constexpr size_t kChainCacheBytes = 16u << 20;

struct GoldenSet {
  std::vector<uint64_t> values;
  size_t bytes() const { return values.size() * sizeof(uint64_t); }
};

using GoldenKey = std::tuple<ChainKind, uint64_t, uint32_t, uint32_t>;              // kind, seed, seeds, iterations
using ExpectedKey = std::tuple<ChainKind, uint64_t, uint32_t, uint32_t, uint64_t>;  // and copies

ReferenceCache<GoldenKey, GoldenSet>& golden_cache() {
  static ReferenceCache<GoldenKey, GoldenSet> cache(kChainCacheEntries, kChainCacheBytes);
  return cache;
}

ReferenceCache<ExpectedKey, ChainExpected>& expected_cache() {
  static ReferenceCache<ExpectedKey, ChainExpected> cache(kChainCacheEntries, kChainCacheBytes);
  return cache;
}

std::shared_ptr<const GoldenSet> golden_set(const ChainJob& job, const std::function<void()>& beat = {}) {
  return golden_cache().get(GoldenKey{job.kind, job.seed, job.seeds, job.iterations},
                            [&] { return GoldenSet{compute_goldens(job, beat)}; });
}

}  // namespace

std::vector<uint64_t> chain_goldens(const ChainJob& job) { return golden_set(job)->values; }

std::shared_ptr<const ChainExpected> chain_expected(const ChainJob& job, const std::function<void()>& beat) {
  return expected_cache().get(ExpectedKey{job.kind, job.seed, job.seeds, job.iterations, job.copies}, [&] {
    const std::shared_ptr<const GoldenSet> set = golden_set(job, beat);
    const std::shared_ptr<const std::vector<uint64_t>> goldens(set, &set->values);
    return ChainExpected{goldens, chain_output_digest(job, *goldens)};
  });
}

ReferenceCacheStats chain_golden_cache_stats() { return golden_cache().stats(); }
ReferenceCacheStats chain_digest_cache_stats() { return expected_cache().stats(); }

void run_chain_probe(ProbeContext& ctx, ProbeResult& result, ChainKind kind) {
  const ChainJob job = size_job(ctx, kind);
  const uint64_t offset = result.report.checked;  // a second chain kind's elements follow the first's
  const std::shared_ptr<const ChainExpected> expected = chain_expected(job, [&] { ctx.device.beat(); });
  Digest128 digest;
  MismatchReport report = ctx.device.run_chains(job, *expected->goldens, &digest);
  for (auto& r : report.records) r.index += offset;
  result.report.merge(report);
  // A second chain kind's digest adds to the first's: one digest per probe for consensus.
  Digest128 total = result.digest.value_or(Digest128{});
  Digest128 golden = result.golden_digest.value_or(Digest128{});
  digest_merge(total, digest);
  digest_merge(golden, expected->digest);
  result.digest = total;
  result.golden_digest = golden;
  result.flops += static_cast<double>(job.copies) * job.iterations * flops_per_step(kind);
  result.params[chain_name(kind)] = {{"copies", job.copies}, {"iterations", job.iterations}, {"seeds", job.seeds}};
}

}  // namespace sdc
