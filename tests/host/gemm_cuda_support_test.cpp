// What the CUDA engine runs, decided on the host: the operand types per data type and compute
// capability (e5m2 as E5M2 x E4M3, since cuBLASLt has no E5M2 x E5M2), and the shapes cuBLASLt
// refuses, which a probe skips with the reason instead of failing in the library.
#include <gtest/gtest.h>

#include <cmath>

#include "host/gemm_cuda_support.hpp"
#include "kernels/common/gemm_elements.hpp"

namespace sdc {
namespace {

TEST(GemmCudaSupport, Fp8NeedsAdaAndE5m2RunsAsE5m2TimesE4m3) {
  for (int cc : {89, 90, 100}) {
    const auto e5m2 = gemm_cuda_operands(GemmType::kE5m2, GemmPath::kLibrary, cc);
    ASSERT_TRUE(e5m2.has_value()) << cc;
    EXPECT_EQ(e5m2->a, GemmType::kE5m2) << cc;
    EXPECT_EQ(e5m2->b, GemmType::kE4m3) << cc << ": cuBLASLt has no E5M2 x E5M2";
    const auto e4m3 = gemm_cuda_operands(GemmType::kE4m3, GemmPath::kLibrary, cc);
    ASSERT_TRUE(e4m3.has_value()) << cc;
    EXPECT_EQ(e4m3->a, GemmType::kE4m3);
    EXPECT_EQ(e4m3->b, GemmType::kE4m3);
  }
  for (GemmType t : {GemmType::kE4m3, GemmType::kE5m2}) {
    EXPECT_FALSE(gemm_cuda_operands(t, GemmPath::kLibrary, 80).has_value()) << gemm_type_name(t);
  }
  EXPECT_TRUE(gemm_cuda_operands(GemmType::kBf16, GemmPath::kLibrary, 80).has_value());
  EXPECT_FALSE(gemm_cuda_operands(GemmType::kTf32, GemmPath::kLibrary, 75).has_value());
  EXPECT_TRUE(gemm_cuda_operands(GemmType::kFp16, GemmPath::kLibrary, 75).has_value());
  EXPECT_TRUE(gemm_cuda_operands(GemmType::kFp32, GemmPath::kSimt, 90).has_value());
  EXPECT_FALSE(gemm_cuda_operands(GemmType::kBf16, GemmPath::kSimt, 90).has_value());
}

// E5M2 x E4M3 computes the e5m2 product only if E4M3 holds every value B takes: random, exact and
// scaled inputs at the depths the probes use, over many rows (scaled rows differ in exponent).
TEST(GemmCudaSupport, E4m3HoldsEveryE5m2InputValue) {
  uint64_t values = 0;
  for (GemmInputs in : {GemmInputs::kRandom, GemmInputs::kExact, GemmInputs::kScaled}) {
    for (uint32_t k : {16u, 64u, 512u, 8192u}) {
      for (uint32_t stream : {kGemmStreamA, kGemmStreamB}) {
        const GemmGenerator g = gemm_generator(GemmType::kE5m2, in, k, 7, stream);
        for (uint64_t i = 0; i < 4096 * uint64_t{k}; i += k / 16 + 1) {
          const float v = gemm_generated_float(g, i);
          ASSERT_TRUE(gemm_e4m3_holds(v)) << gemm_inputs_name(in) << " k " << k << " value " << v;
          ++values;
        }
      }
    }
  }
  EXPECT_GT(values, 100000u);
  // E5M2 values outside E4M3's range or precision are told apart.
  EXPECT_TRUE(gemm_e4m3_holds(448.0f));
  EXPECT_FALSE(gemm_e4m3_holds(57344.0f));
  EXPECT_FALSE(gemm_e4m3_holds(std::ldexp(1.0f, -16)));
  EXPECT_FALSE(gemm_e4m3_holds(1.0625f));
}

TEST(GemmCudaSupport, Fp8ShapesOffSixteenAreRefusedWithAReason) {
  const std::string why = gemm_cuda_unsupported_shape(GemmType::kE4m3, GemmPath::kLibrary, 136, 136, 72);
  EXPECT_NE(why.find("multiples of 16"), std::string::npos) << why;
  EXPECT_NE(why.find("136 x 136 x 72"), std::string::npos) << why;
  EXPECT_FALSE(gemm_cuda_unsupported_shape(GemmType::kE5m2, GemmPath::kLibrary, 144, 144, 72).empty());
  EXPECT_EQ(gemm_cuda_unsupported_shape(GemmType::kE4m3, GemmPath::kLibrary, 144, 144, 80), "");
  for (GemmType t :
       {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16, GemmType::kInt8}) {
    EXPECT_EQ(gemm_cuda_unsupported_shape(t, GemmPath::kLibrary, 136, 136, 72), "") << gemm_type_name(t);
  }
  EXPECT_EQ(gemm_cuda_unsupported_shape(GemmType::kFp32, GemmPath::kSimt, 132, 96, 13), "");
}

}  // namespace
}  // namespace sdc
