// The gemm.* engine and probes on a CUDA device (label `gpu`; skipped without one): every family
// passes clean, a flip above the bound is caught with its row and column, the pinned cuBLASLt
// algorithm repeats bit for bit, and exact outputs equal the CPU's bit for bit. Inputs generated on
// the device equal the host's bit for bit, the bytes a probe moves between host and device are
// O(n), and the device's checks locate faults (and a repeat's change below the bound) exactly.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>

#include "host/backend.hpp"
#include "host/cuda/cuda_gemm.hpp"
#include "host/gemm_cuda_support.hpp"
#include "host/gemm_inputs.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"
#include "tests/probes/gemm_flip.hpp"

namespace sdc {
namespace {

std::vector<std::unique_ptr<Device>> gpus() { return make_cuda_devices(); }

struct Fault {
  uint64_t index;
  uint64_t mask;  // XORed into the element's bits; 0 writes `value` instead
  uint64_t value;
  int repeat = -1;  // only in this repeat (-1: every repeat)
  double add = 0;   // nonzero: the element's value plus this (fp32 or fp64 outputs), in place of mask / value
};

// An injector for an engine under test: changes C's elements through a one-element round trip
// (test code: not counted, not part of the engine's traffic).
GemmInjectFn faults_at(std::vector<Fault> faults) {
  auto repeat = std::make_shared<int>(0);
  return [faults, repeat](DeviceBuffer& c, uint64_t, unsigned width, uint64_t) {
    const unsigned bytes = width / 8;
    for (const Fault& f : faults) {
      if (f.repeat >= 0 && f.repeat != *repeat) continue;
      uint64_t word = 0;
      char* at = static_cast<char*>(c.data()) + f.index * bytes;
      ASSERT_EQ(cudaMemcpy(&word, at, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      if (f.add != 0 && bytes == 8) {
        double v;
        std::memcpy(&v, &word, 8);
        v += f.add;
        std::memcpy(&word, &v, 8);
      } else if (f.add != 0) {
        float v;
        std::memcpy(&v, &word, 4);
        v = static_cast<float>(v + f.add);
        std::memcpy(&word, &v, 4);
      } else {
        word = f.mask != 0 ? word ^ f.mask : f.value;
      }
      ASSERT_EQ(cudaMemcpy(at, &word, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    }
    ++*repeat;
  };
}

GemmSpec square(GemmType t, GemmInputs in, uint32_t n) {
  GemmSpec s;
  s.type = t;
  s.inputs = in;
  s.m = s.n = n;
  s.k = in == GemmInputs::kDense ? 256 : n;
  s.seed = 11;
  return s;
}

struct Case {
  GemmType type;
  GemmInputs inputs;
  GemmPath path;
};

TEST(CudaGemmEngine, EveryTypeAndFamilyPassesCleanAndMatchesTheCpu) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  // The device's index is its CUDA ordinal in make_cuda_devices().
  CudaGemmEngine engine(*devices[0], devices[0]->identity().index, nullptr, faults_at({}));
  auto cpus = make_cpu_devices(1);
  GemmEngine* cpu = cpus[0]->gemm();
  ASSERT_NE(cpu, nullptr);
  std::vector<Case> cases;
  for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                     GemmType::kE4m3, GemmType::kE5m2, GemmType::kInt8}) {
    cases.push_back({t, GemmInputs::kExact, GemmPath::kLibrary});
    if (t != GemmType::kInt8) {
      cases.push_back({t, GemmInputs::kRandom, GemmPath::kLibrary});
      cases.push_back({t, GemmInputs::kScaled, GemmPath::kLibrary});
    }
  }
  cases.push_back({GemmType::kBf16, GemmInputs::kDense, GemmPath::kLibrary});
  cases.push_back({GemmType::kFp32, GemmInputs::kExact, GemmPath::kSimt});
  for (const Case& c : cases) {
    if (!engine.supports(c.type, c.path)) continue;
    GemmSpec s;
    s.type = c.type;
    s.inputs = c.inputs;
    s.path = c.path;
    s.m = s.n = 1024;
    s.k = c.inputs == GemmInputs::kDense ? 256 : 1024;
    s.seed = 99;
    s.repeats = 2;
    const GemmRun run = engine.run(s);
    const std::string what = std::string(gemm_type_name(c.type)) + "/" + gemm_inputs_name(c.inputs);
    EXPECT_EQ(run.report.mismatches, 0u) << what;
    EXPECT_EQ(run.report.checked, 2u * 1024 * 1024) << what;
    ASSERT_EQ(run.digests.size(), 2u) << what;
    EXPECT_EQ(run.digests[0], run.digests[1]) << what << " (pinned algorithm must repeat bitwise)";
    EXPECT_FALSE(run.algorithm.empty()) << what;
    if (c.inputs != GemmInputs::kRandom) {
      const GemmRun host = cpu->run(s);  // exact: the same bits on every backend
      EXPECT_EQ(host.digests[0], run.digests[0]) << what;
    } else {
      EXPECT_LT(run.max_ratio, 1.0) << what;
      std::printf("%-12s max |r|/tau %.3g  %s\n", what.c_str(), run.max_ratio, run.algorithm.c_str());
    }
  }
}

TEST(CudaGemmProbes, PassCleanAndNameTheRowAndColumnOfAFlip) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  if (devices[0]->gemm() == nullptr) GTEST_SKIP() << "CudaDevice::gemm() not wired";
  const uint32_t n = 1024, row = 300;
  for (const auto& p : builtin_registry().probes()) {
    if (p->id().rfind("gemm.", 0) != 0 || !p->included_at(Level::kQuick, devices[0]->identity())) continue;
    RunOptions o;
    o.seed = 4;
    o.iterations = 2;
    o.gemm_n = n;  // every type at one n (a byte budget gives random fp8, with its reference, half of it)
    const ProbeResult clean = run_probe(*p, *devices[0], o);
    ASSERT_EQ(clean.outcome, Outcome::kPass) << p->id() << " " << clean.reason;
    ASSERT_EQ(clean.params["n"].get<uint32_t>(), n) << p->id();
    // Generated and verified on the device: summaries and digests only, no matrix.
    EXPECT_LT(clean.host_device_bytes, 64u * n) << p->id();
    GemmSpec s;  // the probe's, to find an element whose flip the bound must catch
    for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                       GemmType::kE4m3, GemmType::kE5m2, GemmType::kInt8}) {
      if (clean.params["type"] == gemm_type_name(t)) s.type = t;
    }
    s.inputs = clean.params["inputs"] == "random" ? GemmInputs::kRandom : GemmInputs::kExact;
    s.m = s.n = n;
    s.k = clean.params["k"].get<uint32_t>();
    s.seed = clean.seed;
    const uint32_t col = column_to_flip(s, row, 517);
    const int bit = p->id().find("fp64") != std::string::npos ? 62 : 30;
    Injector inj(parse_injection_specs("model=bitflip,bit=" + std::to_string(bit) +
                                       ",index=" + std::to_string(uint64_t{row} * n + col)),
                 1);
    o.injector = &inj;
    const ProbeResult bad = run_probe(*p, *devices[0], o);
    ASSERT_EQ(bad.outcome, Outcome::kFail)
        << p->id() << " " << bad.reason << ": " << kFlipAboveTheBound << "; detectable_multiple "
        << clean.params.value("detectable_multiple", 0.0) << " x rms(C)";
    ASSERT_FALSE(bad.report.records.empty()) << p->id();
    EXPECT_EQ(bad.report.records[0].index / n, row) << p->id();
    EXPECT_EQ(bad.report.records[0].index % n, col) << p->id();
    EXPECT_LT(bad.host_device_bytes, 64u * n) << p->id();
  }
}

TEST(CudaGemmEngine, DeviceGeneratedInputsEqualTheHostsBitForBit) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  CudaGemmEngine engine(*devices[0], devices[0]->identity().index, nullptr, faults_at({}));
  for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                     GemmType::kE4m3, GemmType::kE5m2, GemmType::kInt8}) {
    for (GemmInputs in : {GemmInputs::kExact, GemmInputs::kRandom, GemmInputs::kScaled, GemmInputs::kDense}) {
      if (in == GemmInputs::kScaled && t == GemmType::kInt8) continue;
      if (in == GemmInputs::kDense && t != GemmType::kBf16) continue;
      GemmSpec s = square(t, in, 96);
      s.n = 128;
      s.k = 200;
      const GemmHostInputs host = generate_gemm_inputs(s, 2);
      std::vector<uint8_t> a, bt;
      engine.generate_on_device(s, a, bt);
      const std::string what = std::string(gemm_type_name(t)) + "/" + gemm_inputs_name(in);
      ASSERT_EQ(a.size(), host.a.size()) << what;
      ASSERT_EQ(bt.size(), host.bt.size()) << what;
      EXPECT_EQ(std::memcmp(a.data(), host.a.data(), a.size()), 0) << what;
      const GemmType b_type = gemm_cuda_operands(t, GemmPath::kLibrary, 90)->b;
      if (b_type == t) {
        EXPECT_EQ(std::memcmp(bt.data(), host.bt.data(), bt.size()), 0) << what;
      } else {  // e5m2's B, stored as E4M3: the same values
        for (uint64_t i = 0; i < uint64_t{s.n} * s.k; ++i) {
          ASSERT_EQ(gemm_input_to_float(b_type, bt.data(), i), gemm_input_to_float(t, host.bt.data(), i)) << what << i;
        }
      }
    }
  }
}

TEST(CudaGemmEngine, BytesBetweenHostAndDeviceAreLinearInN) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  Device& device = *devices[0];
  for (GemmInputs in : {GemmInputs::kRandom, GemmInputs::kExact}) {
    uint64_t faulty_bytes[2] = {};
    for (uint32_t n : {2048u, 4096u}) {
      GemmSpec s = square(GemmType::kBf16, in, n);
      s.repeats = 2;  // digests too
      CudaGemmEngine clean(device, device.identity().index, nullptr, faults_at({}));
      uint64_t before = device.host_device_bytes();
      EXPECT_EQ(clean.run(s).report.mismatches, 0u);
      const uint64_t clean_bytes = device.host_device_bytes() - before;
      const uint64_t at = uint64_t{300} * n + column_to_flip(s, 300, 517);
      CudaGemmEngine bad(device, device.identity().index, nullptr, faults_at({{at, uint64_t{1} << 30, 0}}));
      before = device.host_device_bytes();
      EXPECT_EQ(bad.run(s).report.mismatches, 1u) << kFlipAboveTheBound;
      faulty_bytes[n == 4096] = device.host_device_bytes() - before;
      const uint64_t c_bytes = uint64_t{n} * n * 4;
      std::printf("%s n=%u: %llu bytes clean, %llu with a fault (C is %llu)\n", gemm_inputs_name(in), n,
                  static_cast<unsigned long long>(clean_bytes),
                  static_cast<unsigned long long>(faulty_bytes[n == 4096]), static_cast<unsigned long long>(c_bytes));
      EXPECT_LT(clean_bytes, 64u * n) << n;
      EXPECT_LT(faulty_bytes[n == 4096], 64u * n) << n;
      EXPECT_LT(faulty_bytes[n == 4096] * 100, uint64_t{n} * n) << n;
    }
    // O(n), not O(n^2): doubling n at most doubles the bytes (plus a constant).
    EXPECT_LE(faulty_bytes[1], 2 * faulty_bytes[0] + 1024);
  }
}

TEST(CudaGemmEngine, DeviceChecksLocateEveryFaultAtItsRowAndColumn) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  const uint32_t n = 1024;
  struct Case {
    GemmType type;
    GemmInputs inputs;
  };
  for (const Case& c : {Case{GemmType::kBf16, GemmInputs::kRandom}, Case{GemmType::kE4m3, GemmInputs::kRandom},
                        Case{GemmType::kFp64, GemmInputs::kRandom}, Case{GemmType::kFp32, GemmInputs::kExact},
                        Case{GemmType::kFp16, GemmInputs::kScaled}, Case{GemmType::kInt8, GemmInputs::kExact},
                        Case{GemmType::kBf16, GemmInputs::kDense}}) {
    const std::string what = std::string(gemm_type_name(c.type)) + "/" + gemm_inputs_name(c.inputs);
    const uint64_t high = c.type == GemmType::kFp64 ? uint64_t{1} << 62 : uint64_t{1} << 30;
    const GemmSpec s = square(c.type, c.inputs, n);
    // Two faults in one row (different column tiles) and one more in the first one's column.
    const uint32_t j = column_to_flip(s, 300, 517);
    const std::vector<uint64_t> at = {uint64_t{300} * n + j, uint64_t{300} * n + column_to_flip(s, 300, 800),
                                      uint64_t{row_to_flip(s, 811, j)} * n + j};
    CudaGemmEngine engine(*devices[0], devices[0]->identity().index, nullptr,
                          faults_at({{at[0], high, 0}, {at[1], high, 0}, {at[2], high, 0}}));
    if (!engine.supports(c.type, GemmPath::kLibrary)) continue;
    const GemmRun run = engine.run(s);
    EXPECT_EQ(run.report.mismatches, 3u) << what << ": " << kFlipAboveTheBound;
    ASSERT_EQ(run.report.records.size(), 3u) << what;
    for (size_t q = 0; q < 3; ++q) {
      EXPECT_EQ(run.report.records[q].index, at[q]) << what;
      EXPECT_EQ(run.report.records[q].lane, static_cast<int>(at[q] % n % 32)) << what;
    }
  }
  // Exact families: the lowest bit is caught, and a NaN (no integer at all) too.
  CudaGemmEngine exact(*devices[0], devices[0]->identity().index, nullptr,
                       faults_at({{uint64_t{10} * n + 20, 1, 0}, {uint64_t{7} * n + 1000, 0, 0x7fc00000u}}));
  const GemmRun run = exact.run(square(GemmType::kFp32, GemmInputs::kExact, n));
  EXPECT_EQ(run.report.mismatches, 2u);
  ASSERT_EQ(run.report.records.size(), 2u);
  EXPECT_EQ(run.report.records[0].index, uint64_t{7} * n + 1000);
  EXPECT_EQ(run.report.records[0].observed, 0x7fc00000u);
  EXPECT_EQ(run.report.records[1].index, uint64_t{10} * n + 20);
}

TEST(CudaGemmEngine, ARepeatThatChangesBelowTheBoundIsNamedByTheDeviceDigests) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  const uint32_t n = 1024;
  const uint64_t at = uint64_t{100} * n + 200;
  CudaGemmEngine engine(*devices[0], devices[0]->identity().index, nullptr, faults_at({{at, 1, 0, 1}}));
  GemmSpec s = square(GemmType::kBf16, GemmInputs::kRandom, n);
  s.repeats = 3;
  const GemmRun run = engine.run(s);
  ASSERT_EQ(run.digests.size(), 3u);
  EXPECT_EQ(run.digests[0], run.digests[2]);
  EXPECT_NE(run.digests[0], run.digests[1]);
  EXPECT_EQ(run.flagged_checks, 0u);  // one ulp of one element: below the bound
  EXPECT_EQ(run.report.mismatches, 1u);
  ASSERT_EQ(run.report.records.size(), 1u);
  EXPECT_EQ(run.report.records[0].index, at);
  EXPECT_EQ(run.report.records[0].observed, run.report.records[0].expected ^ 1u);
}

// Small shapes, so that compute-sanitizer's racecheck and synccheck (the lease kit) can afford them:
// every type and family through the device's checks (block_sum's shared memory, the records'
// ballot), clean, then with one flip that is found at its place. n off the tiles, k below one.
TEST(CudaGemmEngine, SmallShapesPassCleanAndLocateAFlip) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                     GemmType::kE4m3, GemmType::kE5m2, GemmType::kInt8}) {
    // cuBLASLt's fp8 takes multiples of 16 only (gemm_cuda_unsupported_shape): the nearest ones.
    const bool off_tiles_ok = gemm_cuda_unsupported_shape(t, GemmPath::kLibrary, 136, 136, 72).empty();
    const uint32_t n = off_tiles_ok ? 136 : 144, k = off_tiles_ok ? 72 : 80;
    for (GemmInputs in : {GemmInputs::kExact, GemmInputs::kRandom, GemmInputs::kScaled, GemmInputs::kDense}) {
      if ((t == GemmType::kInt8 && in != GemmInputs::kExact) || (in == GemmInputs::kDense && t != GemmType::kBf16)) {
        continue;
      }
      const std::string what = std::string(gemm_type_name(t)) + "/" + gemm_inputs_name(in);
      GemmSpec s = square(t, in, n);
      s.k = k;
      const uint64_t at = uint64_t{50} * n + column_to_flip(s, 50, 77);
      const uint64_t high = t == GemmType::kFp64 ? uint64_t{1} << 62 : uint64_t{1} << 30;
      CudaGemmEngine clean(*devices[0], devices[0]->identity().index, nullptr, faults_at({}));
      if (!clean.supports(t, GemmPath::kLibrary)) continue;
      const GemmRun ok = clean.run(s);
      EXPECT_EQ(ok.report.mismatches, 0u) << what;
      EXPECT_EQ(ok.report.checked, uint64_t{n} * n) << what;
      CudaGemmEngine faulty(*devices[0], devices[0]->identity().index, nullptr, faults_at({{at, high, 0}}));
      const GemmRun bad = faulty.run(s);
      EXPECT_EQ(bad.report.mismatches, 1u) << what << ": " << kFlipAboveTheBound;
      ASSERT_EQ(bad.report.records.size(), 1u) << what;
      EXPECT_EQ(bad.report.records[0].index, at) << what;
    }
  }
}

// gemm.simt.fp32 off its 128 x 128 x 8 tile: partial tiles in m and n, k not a multiple of the
// depth, and k % 4 != 0 (scalar global loads). Exact inputs: C equals the CPU's bit for bit (whose
// blocked SGEMM takes m a multiple of 4 and n of 32).
TEST(CudaGemmEngine, SimtEdgeShapesMatchTheCpu) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  CudaGemmEngine engine(*devices[0], devices[0]->identity().index, nullptr, faults_at({}));
  auto cpus = make_cpu_devices(1);
  GemmEngine* cpu = cpus[0]->gemm();
  ASSERT_NE(cpu, nullptr);
  for (auto [m, n, k] : {std::tuple<uint32_t, uint32_t, uint32_t>{4, 32, 1},
                         {132, 96, 13},
                         {200, 288, 36},
                         {132, 128, 8},
                         {64, 320, 1000}}) {
    GemmSpec s;
    s.type = GemmType::kFp32;
    s.inputs = GemmInputs::kExact;
    s.path = GemmPath::kSimt;
    s.m = m;
    s.n = n;
    s.k = k;
    s.seed = 7;
    s.digest = true;
    const GemmRun run = engine.run(s);
    const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    EXPECT_EQ(run.report.mismatches, 0u) << what;
    ASSERT_EQ(run.digests.size(), 1u) << what;
    EXPECT_EQ(cpu->run(s).digests.at(0), run.digests[0]) << what;
  }
}

// The check at speed: the reference is computed once per input set and kept; each later GEMM on
// the inputs is checked by one pass over C against it, and a wrong element of 2 rms(C) planted in
// the first, a middle or the last of five GEMMs is caught in that GEMM and located.
TEST(CudaGemmEngine, EveryGemmOnKeptInputsIsCheckedAgainstTheKeptReference) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  const uint32_t n = 1024;
  const uint64_t at = uint64_t{417} * n + 613;
  for (GemmType t :
       {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16, GemmType::kE4m3}) {
    const std::string what = gemm_type_name(t);
    const GemmSpec s = square(t, GemmInputs::kRandom, n);
    CudaGemmEngine probe(*devices[0], devices[0]->identity().index, nullptr, faults_at({}));
    if (!probe.supports(t, GemmPath::kLibrary)) continue;
    const GemmRun clean = probe.run(s);
    ASSERT_EQ(clean.report.mismatches, 0u) << what;
    const double rms = clean.c_rms;
    ASSERT_GT(rms, 0) << what;
    CudaGemmEngine engine(*devices[0], devices[0]->identity().index, nullptr,
                          faults_at({{at, 0, 0, 0, 2 * rms}, {at, 0, 0, 2, 2 * rms}, {at, 0, 0, 4, 2 * rms}}));
    for (int g = 0; g < 5; ++g) {
      const GemmRun run = engine.run(s);
      EXPECT_EQ(run.inputs_reused, g > 0) << what << " GEMM " << g;
      EXPECT_EQ(run.reference_s > 0, g == 0) << what << " GEMM " << g;
      if (g % 2 == 0) {
        EXPECT_EQ(run.report.mismatches, 1u) << what << " GEMM " << g;
        ASSERT_EQ(run.report.records.size(), 1u) << what << " GEMM " << g;
        EXPECT_EQ(run.report.records[0].index, at) << what << " GEMM " << g;
      } else {
        EXPECT_EQ(run.report.mismatches, 0u) << what << " GEMM " << g;
        EXPECT_LT(run.max_ratio, 1.0) << what << " GEMM " << g;
      }
    }
    std::printf("%-5s n=%u max |r|/tau %.3g, detectable %.2f rms(C)\n", what.c_str(), n, clean.max_ratio,
                clean.detectable / rms);
  }
}

// A run's repeats on both paths of the check at speed (SDCPROBE_GEMM_CHECK: the fast path batches the
// repeats and reads their verdicts once): one element off by 2 x rms(C) in the first, a middle or the
// last repeat is caught, located and its repeat named first, for every random type; clean repeats
// stay far from the bound.
TEST(CudaGemmEngine, BothCheckPathsNameTheRepeatAndElementOfAFaultInTheFirstMiddleAndLastRepeat) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  const uint32_t n = 1024;
  const uint64_t at = uint64_t{417} * n + 613;
  // Unset again however the test ends, so that the later tests take the default path.
  struct Unset {
    ~Unset() { unsetenv("SDCPROBE_GEMM_CHECK"); }
  } unset;
  for (const char* path : {"fast", "thin"}) {
    ASSERT_EQ(setenv("SDCPROBE_GEMM_CHECK", path, 1), 0);
    for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                       GemmType::kE4m3, GemmType::kE5m2}) {
      const std::string what = std::string(path) + " " + gemm_type_name(t);
      GemmSpec s = square(t, GemmInputs::kRandom, n);
      CudaGemmEngine probe(*devices[0], devices[0]->identity().index, nullptr, faults_at({}));
      if (!probe.supports(t, GemmPath::kLibrary)) continue;
      s.repeats = 5;
      const GemmRun clean = probe.run(s);
      ASSERT_EQ(clean.report.mismatches, 0u) << what;
      EXPECT_LT(clean.max_ratio, 0.1) << what;
      EXPECT_LT(clean.detectable / clean.c_rms, 2.0) << what;
      for (int planted : {0, 2, 4}) {
        CudaGemmEngine engine(*devices[0], devices[0]->identity().index, nullptr,
                              faults_at({{at, 0, 0, planted, 2 * clean.c_rms}}));
        const GemmRun run = engine.run(s);
        EXPECT_EQ(run.report.mismatches, 1u) << what << ", repeat " << planted;
        ASSERT_FALSE(run.report.records.empty()) << what << ", repeat " << planted;
        EXPECT_EQ(run.report.records[0].index, at) << what << ", repeat " << planted;
        ASSERT_FALSE(run.failed_repeats.empty()) << what << ", repeat " << planted;
        EXPECT_EQ(run.failed_repeats.front(), static_cast<uint32_t>(planted)) << what;
      }
    }
  }
}

// gemm.burn.bf16 on the GPU: a transient flip in the first, a middle and the last GEMM is caught
// and located, naming the GEMM; NVML's conditions are sampled (or said to be unavailable).
TEST(CudaGemmProbes, BurnCatchesAFlipInTheFirstMiddleAndLastGemm) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  const Probe& burn = *builtin_registry().find("gemm.burn.bf16");
  if (!burn.included_at(Level::kStandard, devices[0]->identity())) GTEST_SKIP() << "no bf16 on this GPU";
  const uint32_t n = 1024;
  const uint64_t at = uint64_t{33} * n + 1000;
  for (uint32_t after : {0u, 2u, 4u}) {
    Injector inj(parse_injection_specs("model=bitflip,bit=30,mode=transient,after=" + std::to_string(after) +
                                       ",index=" + std::to_string(at)),
                 1);
    RunOptions o;
    o.seed = 6;
    o.compute_bytes = uint64_t{n} * n * 12;
    o.iterations = 5;
    o.burn_s = 600;
    o.injector = &inj;
    const ProbeResult r = run_probe(burn, *devices[0], o);
    ASSERT_EQ(r.outcome, Outcome::kFail) << r.reason;
    EXPECT_EQ(r.report.mismatches, 1u);
    ASSERT_EQ(r.report.records.size(), 1u);
    EXPECT_EQ(r.report.records[0].index, at);
    ASSERT_EQ(r.params["wrong_results"].size(), 1u);
    EXPECT_EQ(r.params["wrong_results"][0]["gemm"].get<uint32_t>(), after);
    const std::string conditions = r.params["conditions"].get<std::string>();
    if (conditions == "sampled") {
      EXPECT_GT(r.params["wrong_results"][0]["conditions"]["temperature_c"].get<double>(), 0.0);
    } else {
      EXPECT_EQ(conditions.rfind("unavailable: ", 0), 0u);
    }
  }
}

}  // namespace
}  // namespace sdc
