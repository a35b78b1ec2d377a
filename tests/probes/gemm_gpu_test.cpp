// The gemm.* engine and probes on a CUDA device (label `gpu`; skipped without one): every family
// passes clean, a flip above the bound is caught with its row and column, the pinned cuBLASLt
// algorithm repeats bit for bit, and exact outputs equal the CPU's bit for bit.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "host/backend.hpp"
#include "host/cuda/cuda_gemm.hpp"
#include "scheduler/catalogue.hpp"
#include "scheduler/runner.hpp"

namespace sdc {
namespace {

std::vector<std::unique_ptr<Device>> gpus() { return make_cuda_devices(); }

struct Case {
  GemmType type;
  GemmInputs inputs;
  GemmPath path;
};

TEST(CudaGemmEngine, EveryTypeAndFamilyPassesCleanAndMatchesTheCpu) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  // The device's index is its CUDA ordinal in make_cuda_devices().
  CudaGemmEngine engine(*devices[0], devices[0]->identity().index, nullptr,
                        [](DeviceBuffer&, uint64_t, unsigned, uint64_t) {});
  auto cpus = make_cpu_devices(1);
  GemmEngine* cpu = cpus[0]->gemm();
  ASSERT_NE(cpu, nullptr);
  std::vector<Case> cases;
  for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                     GemmType::kE4m3, GemmType::kInt8}) {
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
  const uint32_t n = 1024, row = 300, col = 517;
  for (const auto& p : builtin_registry().probes()) {
    if (p->id().rfind("gemm.", 0) != 0 || !p->included_at(Level::kQuick, devices[0]->identity())) continue;
    RunOptions o;
    o.seed = 4;
    o.iterations = 2;
    o.compute_bytes = uint64_t{n} * n * (p->id().find("fp64") != std::string::npos ? 24 : 12);
    const ProbeResult clean = run_probe(*p, *devices[0], o);
    if (clean.outcome == Outcome::kSkipped) continue;  // e.g. e5m2: no cuBLASLt E5M2 x E5M2
    EXPECT_EQ(clean.outcome, Outcome::kPass) << p->id() << " " << clean.reason;
    const int bit = p->id().find("fp64") != std::string::npos ? 62 : 30;
    Injector inj(parse_injection_specs("model=bitflip,bit=" + std::to_string(bit) +
                                       ",index=" + std::to_string(uint64_t{row} * n + col)),
                 1);
    o.injector = &inj;
    const ProbeResult bad = run_probe(*p, *devices[0], o);
    ASSERT_EQ(bad.outcome, Outcome::kFail) << p->id() << " " << bad.reason;
    ASSERT_FALSE(bad.report.records.empty()) << p->id();
    EXPECT_EQ(bad.report.records[0].index / n, row) << p->id();
    EXPECT_EQ(bad.report.records[0].index % n, col) << p->id();
  }
}

// gemm.simt.fp32 off its 128 x 128 x 8 tile: partial tiles in m and n, k not a multiple of the
// depth, and k % 4 != 0 (scalar global loads). Exact inputs: C equals the CPU's bit for bit (whose
// blocked SGEMM takes m a multiple of 4 and n of 32).
TEST(CudaGemmEngine, SimtEdgeShapesMatchTheCpu) {
  auto devices = gpus();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device";
  CudaGemmEngine engine(*devices[0], devices[0]->identity().index, nullptr,
                        [](DeviceBuffer&, uint64_t, unsigned, uint64_t) {});
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

}  // namespace
}  // namespace sdc
