// gpu_gemm_bench's rates: each from its own shape's flops, and never a probe of one size against a
// bare GEMM of another (the first GPU run's e4m3 row: a probe at n = 4096 counted as 8192, 6,496
// TFLOP/s against 1,369).
#include <gtest/gtest.h>

#include <stdexcept>

#include "bench/gemm_bench_figures.hpp"

namespace sdc {
namespace {

TEST(GemmBenchFigures, RatesComeFromEachShapesFlops) {
  const GemmShape s{8192, 8192, 8192};
  EXPECT_DOUBLE_EQ(gemm_flops(s), 2.0 * 8192 * 8192 * 8192);
  // Three runs each: bare 1.0 ms per GEMM, the probe's GEMM 1.25 ms.
  const GemmRates r = gemm_rates(s, s, 3, 3e-3, 3.75e-3);
  EXPECT_NEAR(r.bare_tflops, gemm_flops(s) / 1e-3 / 1e12, 1e-9);
  EXPECT_NEAR(r.probe_tflops, gemm_flops(s) / 1.25e-3 / 1e12, 1e-9);
  EXPECT_NEAR(r.gemm_ratio, 0.8, 1e-12);
  EXPECT_LE(r.gemm_ratio, 1.0);
}

TEST(GemmBenchFigures, AProbeOfAnotherShapeIsRefused) {
  const GemmShape bare{8192, 8192, 8192}, probe{4096, 4096, 4096};
  EXPECT_THROW(gemm_rates(bare, probe, 3, 3e-3, 3e-3 / 8 * 1.7), std::invalid_argument);
  EXPECT_THROW(gemm_rates(bare, bare, 3, 0, 1e-3), std::invalid_argument);
  // The row the first run printed: probe flops taken at 8192 for a 4096 GEMM, 4.7x the bare rate.
  const double wrong = gemm_flops(bare) * 3 / (3e-3 / 8 * 1.7) / 1e12,
               right = gemm_rates(probe, probe, 3, 1, 3e-3 / 8 * 1.7).probe_tflops;
  EXPECT_NEAR(wrong / right, 8.0, 1e-9);
}

}  // namespace
}  // namespace sdc
