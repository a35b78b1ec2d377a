// sfu.transcendental on a CUDA device (label `gpu`; skipped without one): the SFU intrinsics pass the
// FP64 check within the documented bounds, repeat bit for bit, an exponent flip is caught at its
// element and lane, and a flip within the bound changes only the digest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "host/backend.hpp"
#include "kernels/common/sfu.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {
namespace {

const Probe& sfu_probe() { return *builtin_registry().find("sfu.transcendental"); }

TEST(CudaSfu, IntrinsicsStayWithinTheDocumentedBoundsAndRepeatBitwise) {
  auto devices = make_cuda_devices();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Device& gpu = *devices[0];
  for (uint64_t seed : {1ULL, 2ULL}) {
    RunOptions o;
    o.seed = seed;
    const ProbeResult a = run_probe(sfu_probe(), gpu, o);
    ASSERT_EQ(a.outcome, Outcome::kPass) << a.reason << " " << a.report.mismatches << " mismatches";
    EXPECT_EQ(a.report.checked, 6u << 20);               // quick on a GPU: 2^20 inputs per function
    EXPECT_FALSE(a.params.contains("library_version"));  // the SFU is keyed by driver, runtime and SM
    for (const auto& [name, ratio] : a.params["max_ratio"].items()) {
      EXPECT_LE(ratio.get<double>(), 1.0) << name;
      std::printf("seed %llu  %-6s max error / bound %.3f\n", static_cast<unsigned long long>(seed), name.c_str(),
                  ratio.get<double>());
    }
    const ProbeResult b = run_probe(sfu_probe(), gpu, o);
    ASSERT_TRUE(a.digest && b.digest);
    EXPECT_EQ(*a.digest, *b.digest) << "the SFU must be deterministic for consensus to compare it";
    EXPECT_FALSE(a.golden_digest.has_value());
  }
}

TEST(CudaSfu, AnExponentFlipIsCaughtAndAFlipWithinTheBoundOnlyChangesTheDigest) {
  auto devices = make_cuda_devices();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Device& gpu = *devices[0];
  RunOptions o;
  o.seed = 5;
  const ProbeResult clean = run_probe(sfu_probe(), gpu, o);
  ASSERT_EQ(clean.outcome, Outcome::kPass) << clean.reason;

  Injector high(parse_injection_specs("model=bitflip,bit=30,index=2500001"), 1);  // exp, input 402849
  o.injector = &high;
  const ProbeResult bad = run_probe(sfu_probe(), gpu, o);
  ASSERT_EQ(bad.outcome, Outcome::kFail) << bad.reason;
  EXPECT_EQ(bad.report.mismatches, 1u);
  ASSERT_EQ(bad.report.records.size(), 1u);
  EXPECT_EQ(bad.report.records[0].index, 2500001u);
  EXPECT_EQ(bad.report.records[0].lane, 2500001 % 32);
  const std::vector<int> bits = bad.report.records[0].bit_positions();
  EXPECT_NE(std::find(bits.begin(), bits.end(), 30), bits.end());

  // The SFU's own error may already be near its bound: flip an exp element whose flipped value
  // still lies within it.
  const uint64_t n = 1u << 20;
  SfuJob job;
  job.seed = probe_seed(o.seed, sfu_probe().id());
  job.per_function = n;
  auto out = gpu.allocate(kSfuFunctions * n * sizeof(float));
  gpu.run_sfu(job, *out);
  std::vector<float> values(kSfuFunctions * n);
  gpu.download(values.data(), *out, values.size() * sizeof(float));
  uint64_t index = 2 * n;
  for (; index < 3 * n; ++index) {
    const SfuArgs a = sfu_input(job.seed, SfuFunction::kExp, index - 2 * n);
    const float flipped = float_of_bits(bits_of_float(values[index]) ^ 1u);
    if (sfu_within_bound(SfuFunction::kExp, a, flipped, sfu_reference(SfuFunction::kExp, a))) break;
  }
  ASSERT_LT(index, 3 * n);
  Injector low(parse_injection_specs("model=bitflip,bit=0,index=" + std::to_string(index)), 1);
  o.injector = &low;
  const ProbeResult quiet = run_probe(sfu_probe(), gpu, o);
  EXPECT_EQ(quiet.outcome, Outcome::kPass) << quiet.reason;
  ASSERT_TRUE(quiet.digest && clean.digest);
  EXPECT_NE(*quiet.digest, *clean.digest);
}

}  // namespace
}  // namespace sdc
