// The gemm.* probes on the CPU backend: element logic pinned, clean over 1000 seeds with zero false
// positives, single-bit flips above the bound caught with row and column named, the lane model
// caught per column, and the bit positions below the bound of gemm.random.fp32 counted as such.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "host/backend.hpp"
#include "host/gemm.hpp"
#include "kernels/common/gemm_elements.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"
#include "tests/probes/gemm_flip.hpp"

namespace sdc {
namespace {

std::vector<std::string> gemm_ids(bool with_burn = true) {
  std::vector<std::string> ids;
  for (const auto& p : builtin_registry().probes()) {
    if (p->id().rfind("gemm.", 0) == 0 && (with_burn || p->id().rfind("gemm.burn.", 0) != 0)) ids.push_back(p->id());
  }
  return ids;
}

// --size for an n x n GEMM: the largest power of two whose A, B and C fit (see gemm_probe_n): 24
// bytes an element for fp64, at most 18 for the others (random fp8 with its reference).
RunOptions sized(uint64_t seed, uint32_t n, const std::string& id) {
  RunOptions o;
  o.seed = seed;
  const bool wide = id.find("fp64") != std::string::npos;
  o.compute_bytes = uint64_t{n} * n * (wide ? 24 : 18);
  o.iterations = 3;  // repeats of gemm.repeat.*
  return o;
}

TEST(GemmElements, FormatsDecodeAndRoundTripEveryCode) {
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e5m2_to_float(0x7b), 57344.0f);
  EXPECT_TRUE(std::isinf(e5m2_to_float(0x7c)));
  EXPECT_EQ(e5m2_to_float(0xc0), -2.0f);
  for (uint32_t b = 0; b < 256; ++b) {
    for (MiniFloat f : {kE4m3Format, kE5m2Format}) {
      const float v = minifloat_to_float(b, f);
      if (std::isfinite(v) && !(v == 0 && b != 0 && b != 0x80)) {
        EXPECT_EQ(float_to_minifloat_exact(v, f), b) << b;
      }
    }
  }
  for (uint32_t b = 0; b < 65536; ++b) {
    const float v = fp16_to_float(static_cast<uint16_t>(b));
    if (std::isfinite(v)) {
      ASSERT_EQ(float_to_minifloat_exact(v, kFp16Format), b) << b;
    }
  }
}

TEST(GemmElements, ExactnessBoundsArePinned) {
  EXPECT_EQ(gemm_exact_magnitude(GemmType::kBf16, 2048), 90u);  // 2048 * 90^2 <= 2^24
  EXPECT_EQ(gemm_exact_magnitude(GemmType::kBf16, 256), 256u);
  EXPECT_EQ(gemm_exact_magnitude(GemmType::kFp32, 8192), 45u);
  EXPECT_EQ(gemm_exact_magnitude(GemmType::kE4m3, 8192), 1u);  // fp8: partial sums <= 2^13
  EXPECT_EQ(gemm_exact_magnitude(GemmType::kE4m3, 32), 16u);
  EXPECT_EQ(gemm_exact_magnitude(GemmType::kInt8, 8192), 127u);
  EXPECT_LE(255.0 * 255.0 * kGemmDenseMaxK, 16777216.0);
  for (GemmType t : {GemmType::kFp32, GemmType::kBf16, GemmType::kFp16, GemmType::kE4m3, GemmType::kE5m2}) {
    for (uint32_t k : {64u, 256u, 2048u, 8192u}) {
      const uint64_t m = gemm_exact_magnitude(t, k);
      EXPECT_LE(k * m * m, gemm_exact_sum_limit(t));
    }
  }
  EXPECT_DOUBLE_EQ(gemm_gamma(1, 0x1p-24), 0x1p-24 / (1 - 0x1p-24));
  GemmAccumulation fp8;
  fp8.chunk = 32;
  fp8.u_inner = 0x1p-13;
  fp8.u_acc = 0x1p-23;
  EXPECT_GT(gemm_relative_bound(fp8, 8192), gemm_gamma(32, 0x1p-13));
  EXPECT_LT(gemm_relative_bound(fp8, 8192), 0.01);
  // The generators: values exactly representable in their type, pinned for seed 1.
  const uint32_t key = gemm_stream_key(1, kGemmStreamA);
  for (uint64_t i = 0; i < 1000; ++i) {
    const float v = gemm_random_value(GemmType::kBf16, key, i);
    EXPECT_EQ(bf16_to_float(static_cast<uint16_t>(bits_of_float(v) >> 16)), v);
    EXPECT_GE(std::fabs(v), 0.125f);
    EXPECT_LT(std::fabs(v), 2.0f);
    const float d = gemm_dense_bf16_value(key, i);
    EXPECT_EQ(static_cast<int>(std::fabs(d)) % 2, 1);
    EXPECT_GE(std::fabs(d), 129.0f);
    EXPECT_LE(std::fabs(d), 255.0f);
  }
  EXPECT_EQ(gemm_random32(0, 0), 0u);
}

TEST(GemmProbes, CleanOver1000SeedsWithZeroFalsePositives) {
  auto devices = make_cpu_devices(1);
  uint64_t runs = 0, false_positives = 0;
  for (const std::string& id : gemm_ids()) {
    const Probe& probe = *builtin_registry().find(id);
    double worst = 0;
    for (uint64_t seed = 0; seed < 1000; ++seed) {
      const ProbeResult r = run_probe(probe, *devices[0], sized(seed, 64, id));
      ++runs;
      if (r.outcome != Outcome::kPass) {
        ++false_positives;
        ADD_FAILURE() << id << " seed " << seed << ": " << outcome_name(r.outcome) << " " << r.reason << " "
                      << r.params.dump();
      }
      if (r.params.contains("max_ratio")) worst = std::max(worst, r.params["max_ratio"].get<double>());
    }
    if (id.rfind("gemm.random.", 0) == 0 || id.rfind("gemm.burn.", 0) == 0) {
      EXPECT_LT(worst, 1.0) << id;
      std::printf("%-20s largest |r|/tau over 1000 seeds: %.3g\n", id.c_str(), worst);
    }
  }
  EXPECT_EQ(false_positives, 0u);
  EXPECT_EQ(runs, 1000u * gemm_ids().size());
}

class EveryGemmProbe : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryGemmProbe, HighBitFlipIsCaughtNamingRowAndColumn) {
  const std::string id = GetParam();
  auto devices = make_cpu_devices(2);
  const uint32_t n = 128, row = 5, col = 77;
  const bool fp64 = id.find("fp64") != std::string::npos;
  const int bit = fp64 ? 62 : 30;  // the exponent's top bit (int8: bit 30 of the int32 output)
  Injector inj(parse_injection_specs("device=1,probe=" + id + ",model=bitflip,bit=" + std::to_string(bit) +
                                     ",index=" + std::to_string(row * n + col) + ",mode=permanent"),
               7);
  RunOptions o = sized(11, n, id);
  o.injector = &inj;
  for (auto& d : devices) {
    const ProbeResult r = run_probe(*builtin_registry().find(id), *d, o);
    ASSERT_EQ(r.params.value("n", 0u), n) << id;
    if (d->identity().index == 0) {
      EXPECT_EQ(r.outcome, Outcome::kPass) << id << " " << r.reason;
      continue;
    }
    ASSERT_EQ(r.outcome, Outcome::kFail) << id << " " << r.reason;
    EXPECT_EQ(r.report.mismatches, 1u) << id;
    ASSERT_EQ(r.report.records.size(), 1u) << id;
    const MismatchRecord& rec = r.report.records[0];
    const uint64_t ldc = r.params["ldc"].get<uint64_t>();
    EXPECT_EQ(rec.index / ldc, row) << id;
    EXPECT_EQ(rec.index % ldc, col) << id;
    EXPECT_EQ(rec.lane, static_cast<int>(col % 32)) << id;
    const std::vector<int> bits = rec.bit_positions();
    if (r.params["inputs"] == "random") {
      // The expected value is the FP64 product rounded once, not the device's bits: the flipped
      // bit is in the syndrome, next to low bits of ordinary rounding differences.
      EXPECT_NE(std::find(bits.begin(), bits.end(), bit), bits.end()) << id;
    } else {
      EXPECT_EQ(bits, std::vector<int>{bit}) << id;
    }
  }
}

TEST_P(EveryGemmProbe, LaneFaultCorruptsEveryElementOfOneLane) {
  const std::string id = GetParam();
  auto devices = make_cpu_devices(1);
  const uint32_t n = 128;
  const bool fp64 = id.find("fp64") != std::string::npos;
  Injector inj(parse_injection_specs("model=lane,lane=3,bit=" + std::to_string(fp64 ? 62 : 30)), 1);
  RunOptions o = sized(5, n, id);
  o.injector = &inj;
  const ProbeResult r = run_probe(*builtin_registry().find(id), *devices[0], o);
  ASSERT_EQ(r.outcome, Outcome::kFail) << id;
  EXPECT_EQ(r.report.mismatches, uint64_t{n} * n / 32) << id;  // every row, columns 3, 35, 67, 99
  ASSERT_FALSE(r.report.records.empty());
  for (const auto& rec : r.report.records) {
    EXPECT_EQ(rec.index % n % 32, 3u) << id;
    EXPECT_EQ(rec.lane, 3) << id;
  }
}

// gemm.burn.* has its own flip and location tests (gemm_burn_test.cpp): its seed puts elements of
// this lane below the bound, where a flip of bit 30 (|C| >= 2 loses its value) passes by design.
INSTANTIATE_TEST_SUITE_P(Cpu, EveryGemmProbe, ::testing::ValuesIn(gemm_ids(false)), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
});

// Which single-bit flips of one FP32 output element of gemm.random.fp32 exceed the bound tau:
// the low significand bits sit below it and are counted "below tolerance", never as detected.
TEST(GemmRandom, BitPositionsBelowTheBoundAreCountedBelowTolerance) {
  auto devices = make_cpu_devices(1);
  const uint32_t n = 256;
  const uint64_t index = 17 * n + 200;
  int below = 0, detected = 0, threshold = -1;
  std::string table;
  for (int bit = 0; bit < 32; ++bit) {
    Injector inj(parse_injection_specs("probe=gemm.random.fp32,model=bitflip,mode=permanent,bit=" +
                                       std::to_string(bit) + ",index=" + std::to_string(index)),
                 3);
    RunOptions o = sized(21, n, "gemm.random.fp32");
    o.injector = &inj;
    const ProbeResult r = run_probe(*builtin_registry().find("gemm.random.fp32"), *devices[0], o);
    const bool caught = r.outcome == Outcome::kFail;
    table += caught ? 'D' : 'b';
    if (caught) {
      ++detected;
      if (threshold < 0) threshold = bit;
      ASSERT_FALSE(r.report.records.empty());
      EXPECT_EQ(r.report.records[0].index, index);
    } else {
      ++below;
      EXPECT_EQ(r.outcome, Outcome::kPass);
      EXPECT_LE(r.params["max_ratio"].get<double>(), 1.0);
      EXPECT_EQ(threshold, -1) << "bit " << bit << " below the bound after a detected lower bit";
    }
  }
  std::printf("gemm.random.fp32 n=%u, bits 0..31 (b = below tolerance, D = detected): %s\n", n, table.c_str());
  // The bound tau sits above the lowest significand bits and below the exponent and sign.
  EXPECT_GE(threshold, 4);
  EXPECT_LE(threshold, 23);
  EXPECT_EQ(below + detected, 32);
}

// The GPU tests' faults, at the GPU's size (n = 1024) with the CUDA engine's bounds and tiles: the
// exponent's top bit flipped in an element with |C| >= 2 only clears that element, a change of |C|,
// which may lie below the bound (tf32 at (300, 517), seed 4: |C| = 5.8 passes, as the first GPU run
// saw; fp32 catches it in the row check alone, and names it at its column all the same); flipped in
// an element with |C| in [1/4, 2) (gemm_flip.hpp) it is caught at its row and column by every
// random family.
TEST(GemmRandom, AtTheGpusSizeATopExponentFlipAboveTheBoundIsCaughtWhereItIs) {
  auto devices = make_cpu_devices(1);
  const uint32_t n = 1024, row = 300;
  for (const char* id : {"gemm.random.fp64", "gemm.random.fp32", "gemm.random.tf32", "gemm.random.fp16",
                         "gemm.random.bf16", "gemm.random.e4m3", "gemm.random.e5m2"}) {
    const Probe& probe = *builtin_registry().find(id);
    RunOptions o;
    o.seed = 4;
    o.gemm_n = n;
    o.gemm_cuda_model = true;
    const ProbeResult clean = run_probe(probe, *devices[0], o);
    ASSERT_EQ(clean.outcome, Outcome::kPass) << id << " " << clean.reason;
    GemmSpec s;
    for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                       GemmType::kE4m3, GemmType::kE5m2}) {
      if (clean.params["type"] == gemm_type_name(t)) s.type = t;
    }
    s.m = s.n = n;
    s.k = clean.params["k"].get<uint32_t>();
    s.seed = clean.seed;
    const bool fp64 = s.type == GemmType::kFp64;
    const uint32_t col = column_to_flip(s, row, 517);
    Injector inj(parse_injection_specs("model=bitflip,bit=" + std::to_string(fp64 ? 62 : 30) +
                                       ",index=" + std::to_string(uint64_t{row} * n + col)),
                 1);
    o.injector = &inj;
    const ProbeResult bad = run_probe(probe, *devices[0], o);
    ASSERT_EQ(bad.outcome, Outcome::kFail) << id << ": " << kFlipAboveTheBound;
    ASSERT_FALSE(bad.report.records.empty()) << id;
    EXPECT_EQ(bad.report.records[0].index, uint64_t{row} * n + col) << id;
    if (s.type == GemmType::kFp32) {
      // The first GPU run's fault: (300, 517) has |C| = 5.8, the flip clears it, and only the row
      // check catches that; each element of the row's tile is then a candidate, so it is still
      // named at its column, not at its tile's first (512).
      ASSERT_NE(col, 517u);
      Injector near(parse_injection_specs("model=bitflip,bit=30,index=" + std::to_string(uint64_t{row} * n + 517)), 1);
      o.injector = &near;
      const ProbeResult located = run_probe(probe, *devices[0], o);
      ASSERT_EQ(located.outcome, Outcome::kFail) << id;
      ASSERT_EQ(located.report.records.size(), 1u) << id;
      EXPECT_EQ(located.report.records[0].index, uint64_t{row} * n + 517) << id;
    }
    if (s.type == GemmType::kTf32) {
      ASSERT_NE(col, 517u);
      const double c = std::fabs(expected_c(s, row, 517));
      Injector low(parse_injection_specs("model=bitflip,bit=30,index=" + std::to_string(uint64_t{row} * n + 517)), 1);
      o.injector = &low;
      const ProbeResult below = run_probe(probe, *devices[0], o);
      EXPECT_EQ(below.outcome, Outcome::kPass)
          << "|C| = " << c << " cleared, below the bound of " << clean.params["detectable_multiple"] << " x rms(C)";
    }
  }
}

TEST(GemmRepeat, CleanRepeatsHaveEqualDigestsAndATransientIsCaughtOnce) {
  auto devices = make_cpu_devices(1);
  RunOptions o = sized(3, 128, "gemm.repeat.fp32");
  o.iterations = 4;
  const ProbeResult clean = run_probe(*builtin_registry().find("gemm.repeat.fp32"), *devices[0], o);
  ASSERT_EQ(clean.outcome, Outcome::kPass);
  const auto& d = clean.params["digests"];
  ASSERT_EQ(d.size(), 4u);
  for (const auto& x : d) EXPECT_EQ(x, d[0]);
  Injector inj(parse_injection_specs("model=bitflip,bit=29,mode=transient"), 5);
  o.injector = &inj;
  const ProbeResult r = run_probe(*builtin_registry().find("gemm.repeat.fp32"), *devices[0], o);
  EXPECT_EQ(r.outcome, Outcome::kFail);
  EXPECT_EQ(r.report.mismatches, 1u);
  EXPECT_NE(r.params["digests"][0], r.params["digests"][1]);
  EXPECT_FALSE(r.params["algorithm"].get<std::string>().empty());
  EXPECT_FALSE(r.params["library_version"].get<std::string>().empty());
}

// A fault below tau in one repeat only: Freivalds passes, the digests disagree, and the element is
// named.
TEST(GemmRepeat, IntermittentFaultBelowTheBoundIsCaughtByTheDigests) {
  auto devices = make_cpu_devices(1);
  RunOptions o = sized(3, 128, "gemm.repeat.fp32");
  o.iterations = 3;
  Injector inj(parse_injection_specs("model=bitflip,bit=0,index=300,mode=transient"), 5);
  o.injector = &inj;
  const ProbeResult r = run_probe(*builtin_registry().find("gemm.repeat.fp32"), *devices[0], o);
  EXPECT_EQ(r.outcome, Outcome::kFail);
  ASSERT_FALSE(r.report.records.empty());
  EXPECT_EQ(r.report.records[0].index, 300u);
}

TEST(GemmProbes, ListedAndSizedPerLevel) {
  auto devices = make_cpu_devices(1);
  EXPECT_GE(gemm_ids().size(), 30u);
  for (const char* id : {"gemm.exact.bf16", "gemm.random.fp32", "gemm.dense.bf16", "gemm.scaled.e4m3",
                         "gemm.repeat.bf16", "gemm.simt.fp32", "gemm.exact.int8", "gemm.random.e5m2"}) {
    const Probe* p = builtin_registry().find(id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_TRUE(p->included_at(Level::kQuick, devices[0]->identity())) << id;
    EXPECT_TRUE(p->included_at(Level::kStandard, devices[0]->identity())) << id;
  }
  RunOptions o;
  o.seed = 1;
  o.level = Level::kQuick;
  const ProbeResult r = run_probe(*builtin_registry().find("gemm.random.fp32"), *devices[0], o);
  EXPECT_EQ(r.outcome, Outcome::kPass);
  EXPECT_EQ(r.params["n"].get<uint32_t>(), 256u);
  EXPECT_GT(r.params["gflops"].get<double>(), 0.0);
  EXPECT_GE(r.params["verify_fraction"].get<double>(), 0.0);
}

}  // namespace
}  // namespace sdc
