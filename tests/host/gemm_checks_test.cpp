// The SDC_HD code the CUDA GEMM engine shares with the host: the input generators pinned per type
// and family (fixed seed -> exact bits), the host's generate_gemm_inputs proven element for element
// to be those generators (the device kernels call the same functions), and the verification
// arithmetic (check vectors, tau, the exact unscaling) and the host-side confirmation of the
// candidates a device returns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "host/gemm.hpp"
#include "host/gemm_checks.hpp"
#include "host/gemm_digest.hpp"
#include "kernels/common/gemm_check.hpp"
#include "kernels/common/gemm_elements.hpp"

namespace sdc {
namespace {

struct Family {
  GemmType type;
  GemmInputs inputs;
};

// Every (type, family) the generators accept.
std::vector<Family> families() {
  std::vector<Family> out;
  for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                     GemmType::kE4m3, GemmType::kE5m2, GemmType::kInt8}) {
    out.push_back({t, GemmInputs::kExact});
    out.push_back({t, GemmInputs::kRandom});
    if (t != GemmType::kInt8) out.push_back({t, GemmInputs::kScaled});
  }
  out.push_back({GemmType::kBf16, GemmInputs::kDense});
  return out;
}

std::string name_of(const Family& f) { return std::string(gemm_type_name(f.type)) + "/" + gemm_inputs_name(f.inputs); }

GemmSpec spec_of(const Family& f, uint32_t m, uint32_t n, uint32_t k, uint64_t seed) {
  GemmSpec s;
  s.type = f.type;
  s.inputs = f.inputs;
  s.m = m;
  s.n = n;
  s.k = k;
  s.seed = seed;
  return s;
}

GemmSpec small_spec(const Family& f) { return spec_of(f, 24, 32, 40, 7); }

TEST(GemmGenerator, HostInputsAreTheSharedGeneratorsElementForElement) {
  for (const Family& f : families()) {
    const GemmSpec s = small_spec(f);
    const GemmHostInputs in = generate_gemm_inputs(s, 2);
    const unsigned ib = gemm_input_bytes(f.type);
    const GemmGenerator ga = gemm_generator(f.type, f.inputs, s.k, s.seed, kGemmStreamA);
    const GemmGenerator gb = gemm_generator(f.type, f.inputs, s.k, s.seed, kGemmStreamB);
    EXPECT_EQ(in.exact_bound, gemm_exact_output_bound(f.inputs, s.k, ga.mag)) << name_of(f);
    for (int op = 0; op < 2; ++op) {
      const GemmGenerator& g = op == 0 ? ga : gb;
      const std::vector<uint8_t>& stored = op == 0 ? in.a : in.bt;
      const uint32_t rows = op == 0 ? s.m : s.n;
      // What the device kernel writes: gemm_generate_element for every index.
      std::vector<uint8_t> device(stored.size());
      for (uint64_t i = 0; i < uint64_t{rows} * s.k; ++i) gemm_generate_element(g, device.data(), i);
      ASSERT_EQ(std::memcmp(device.data(), stored.data(), stored.size()), 0) << name_of(f) << " operand " << op;
      ASSERT_EQ(stored.size(), uint64_t{rows} * s.k * ib);
      for (uint64_t i = 0; i < uint64_t{rows} * s.k; ++i) {
        const double v = gemm_generated_double(g, i);
        if (f.type != GemmType::kFp64) {
          const std::vector<float>& wide = op == 0 ? in.a_wide : in.bt_wide;
          const float stored_value =
              wide.empty() ? reinterpret_cast<const float*>(stored.data())[i] : wide[static_cast<size_t>(i)];
          ASSERT_EQ(stored_value, gemm_generated_float(g, i)) << name_of(f) << " " << i;
          ASSERT_EQ(static_cast<double>(stored_value), v);
        } else {
          ASSERT_EQ(reinterpret_cast<const double*>(stored.data())[i], v) << name_of(f) << " " << i;
        }
        if (gemm_inputs_exact(f.inputs)) {
          const std::vector<int32_t>& ints = op == 0 ? in.a_int : in.bt_int;
          ASSERT_EQ(ints[static_cast<size_t>(i)], gemm_generated_int(g, i)) << name_of(f) << " " << i;
        }
      }
      if (f.inputs == GemmInputs::kScaled) {
        const std::vector<int32_t>& exps = op == 0 ? in.row_exp : in.col_exp;
        for (uint32_t r = 0; r < rows; ++r) EXPECT_EQ(exps[r], gemm_generated_exponent(g, r)) << name_of(f);
      }
    }
  }
}

// Digest of one operand's stored bytes (zero-padded to whole words).
uint64_t bytes_digest(const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> padded(bytes);
  padded.resize((padded.size() + 7) / 8 * 8, 0);
  return gemm_digest(padded.data(), padded.size(), 1).lo;
}

TEST(GemmGenerator, OutputsArePinnedPerTypeAndFamily) {
  // Seed 7, A 24 x 40 and Bt 32 x 40: the bits every backend must generate (the values the host
  // generated before the generators moved into SDC_HD code). A change here changes every GEMM
  // probe's inputs: make it deliberately. (int8's exact and random families coincide: both draw
  // uniform integers in [-127, 127].)
  struct Pin {
    const char* name;
    uint64_t a, bt;
  };
  const Pin pins[] = {
      {"fp64/exact", 0xc96d2c9435f9bc83ULL, 0x1d590255acfc6259ULL},
      {"fp64/random", 0x4c1d7990635902d7ULL, 0x663b7b6bf2b3a346ULL},
      {"fp64/scaled", 0x80f0e797a62e0e98ULL, 0xc7aa4e17e834364dULL},
      {"fp32/exact", 0x422a027dc213ab3dULL, 0xd0edfd7e96e78466ULL},
      {"fp32/random", 0x04cf40692ad55fd8ULL, 0x4abb4a3de2ec1adaULL},
      {"fp32/scaled", 0xc2df0496ffc094bfULL, 0x765e4624a4c054a9ULL},
      {"tf32/exact", 0x422a027dc213ab3dULL, 0xd0edfd7e96e78466ULL},
      {"tf32/random", 0x06c43c5ae574d174ULL, 0x44af43b3c4b7150cULL},
      {"tf32/scaled", 0xc2df0496ffc094bfULL, 0x765e4624a4c054a9ULL},
      {"fp16/exact", 0x63df5e9db79e482fULL, 0x3cec1bc7fc99bc80ULL},
      {"fp16/random", 0x908b21f93edb6479ULL, 0xf53de647e3d1b173ULL},
      {"fp16/scaled", 0xc9432832a1614e8eULL, 0x51c0b346afb041acULL},
      {"bf16/exact", 0x3444910e7f60ca7dULL, 0xe608695166bbfdbbULL},
      {"bf16/random", 0x2eba143fa01d9002ULL, 0x77cb30a4ce8400edULL},
      {"bf16/scaled", 0x647ab420a178527eULL, 0x7d0b541639d7a2e9ULL},
      {"e4m3/exact", 0x14f592ec6d652856ULL, 0xe1796b0766ffa7cfULL},
      {"e4m3/random", 0xdad7843ac4113081ULL, 0x6f99c3817ba56033ULL},
      {"e4m3/scaled", 0xd8d702ad6970b081ULL, 0x2536b3c102885c34ULL},
      {"e5m2/exact", 0xa2902cb4bba016e7ULL, 0x3089525140e30bd5ULL},
      {"e5m2/random", 0xeb9150044c376f14ULL, 0xdb9f94e3861e98a0ULL},
      {"e5m2/scaled", 0x7fecc3964fe6a3b6ULL, 0x2dbf2724eb74f28fULL},
      {"int8/exact", 0xe033087e83120c76ULL, 0x170d075fdca8ac63ULL},
      {"int8/random", 0xe033087e83120c76ULL, 0x170d075fdca8ac63ULL},
      {"bf16/dense", 0x8a96b91a29ec647aULL, 0x8be378d488766273ULL},
  };
  std::vector<Family> fs = families();
  ASSERT_EQ(fs.size(), sizeof pins / sizeof pins[0]);
  for (size_t q = 0; q < fs.size(); ++q) {
    const GemmHostInputs in = generate_gemm_inputs(small_spec(fs[q]), 1);
    const uint64_t a = bytes_digest(in.a), bt = bytes_digest(in.bt);
    EXPECT_EQ(name_of(fs[q]), pins[q].name);
    EXPECT_EQ(a, pins[q].a) << name_of(fs[q]);
    EXPECT_EQ(bt, pins[q].bt) << name_of(fs[q]);
    if (a != pins[q].a || bt != pins[q].bt) {
      std::printf("    {\"%s\", 0x%016llxULL, 0x%016llxULL},\n", name_of(fs[q]).c_str(),
                  static_cast<unsigned long long>(a), static_cast<unsigned long long>(bt));
    }
  }
  // A few elements spelled out.
  const GemmGenerator bf16 = gemm_generator(GemmType::kBf16, GemmInputs::kRandom, 40, 7, kGemmStreamA);
  const GemmGenerator e4m3 = gemm_generator(GemmType::kE4m3, GemmInputs::kExact, 8192, 7, kGemmStreamB);
  EXPECT_EQ(e4m3.mag, 1u);  // 8192 * m^2 <= 2^13
  EXPECT_EQ(bf16.key, gemm_stream_key(7, kGemmStreamA));
  for (uint64_t i = 0; i < 64; ++i) {
    const float v = gemm_generated_float(bf16, i);
    EXPECT_EQ(v, gemm_random_value_of(GemmType::kBf16, gemm_random32(bf16.key, i)));
    EXPECT_EQ(bits_of_float(v) & 0xffffu, 0u);  // a bf16 value
    EXPECT_GE(std::fabs(v), 0.125f);
    EXPECT_LT(std::fabs(v), 2.0f);
    EXPECT_LE(std::abs(gemm_generated_int(e4m3, i)), 1);
  }
}

TEST(GemmCheck, CheckVectorsAndTilesAreThoseDocumented) {
  EXPECT_EQ(gemm_exact_tile_of(64), 64u);
  EXPECT_EQ(gemm_exact_tile_of(512), 256u);
  EXPECT_EQ(gemm_exact_tile_of(1025), 257u);
  EXPECT_EQ(gemm_exact_tile_of(8192), 2048u);
  for (uint32_t n : {2u, 64u, 255u, 256u, 257u, 1000u, 1025u, 4097u, 8192u, 10000u, 65536u}) {
    const uint32_t tile = gemm_exact_tile_of(n);
    EXPECT_LE((n + tile - 1) / tile, kGemmExactMaxTiles) << n;
  }
  // Random inputs: tile = 1.5 / (eps sqrt(k)), at least 8, at most the exact families' tile; with
  // the CUDA engine's models at n = k = 8192 (docs/probes.md): fp32 33, the 2^-23 tensor-core types
  // 16, fp8 8 (the floor), fp64 a quarter of the line.
  const auto tile = [](GemmType t, uint32_t n) {
    return gemm_float_tile_of(gemm_cuda_accumulation(t, GemmPath::kLibrary), n, n);
  };
  EXPECT_EQ(tile(GemmType::kFp32, 8192), 33u);
  EXPECT_EQ(tile(GemmType::kBf16, 8192), 16u);
  EXPECT_EQ(tile(GemmType::kTf32, 8192), 16u);
  EXPECT_EQ(tile(GemmType::kE4m3, 8192), kGemmMinFloatTile);
  EXPECT_EQ(tile(GemmType::kFp64, 8192), 2048u);
  EXPECT_EQ(tile(GemmType::kFp32, 1024), 256u);
  for (GemmType t : {GemmType::kFp32, GemmType::kBf16, GemmType::kE4m3}) {
    for (uint32_t n : {256u, 1024u, 2048u, 4096u, 8192u}) {
      const GemmAccumulation acc = gemm_cuda_accumulation(t, GemmPath::kLibrary);
      const uint32_t w = tile(t, n);
      const double per_column = gemm_tile_rel(acc, n, n) * std::sqrt(static_cast<double>(n));
      EXPECT_LE(w, gemm_exact_tile_of(n));
      if (w > kGemmMinFloatTile && w < gemm_exact_tile_of(n)) {
        EXPECT_LE(w * per_column, kGemmTileTarget) << gemm_type_name(t) << " " << n;
        EXPECT_GT((w + 1) * per_column, kGemmTileTarget) << gemm_type_name(t) << " " << n;
      }
    }
  }
  GemmSpec s;
  s.inputs = GemmInputs::kExact;
  s.m = 1000;
  s.n = 8192;
  s.k = 8192;
  GemmAccumulation bf16 = gemm_cuda_accumulation(GemmType::kBf16, GemmPath::kLibrary);
  EXPECT_EQ(gemm_check_tile(s, bf16, false), 2048u);
  EXPECT_EQ(gemm_check_tile(s, bf16, true), 256u);
  s.inputs = GemmInputs::kRandom;
  EXPECT_EQ(gemm_check_tile(s, bf16, false), 16u);
  const uint32_t key = gemm_stream_key(3, kGemmStreamRowCheck);
  for (uint32_t j = 0; j < 1000; ++j) {
    const double w = gemm_float_check_weight(key, j);
    EXPECT_GE(w, 1.0);
    EXPECT_LT(w, 2.0);
    EXPECT_EQ(w, 1.0 + (gemm_random32(key, j) >> 8) * 0x1p-24);
    for (uint32_t v = 0; v < kGemmExactVectors; ++v) EXPECT_EQ(gemm_exact_check_weight(key, j, v) & 1u, 1u);
  }
  EXPECT_NE(gemm_exact_check_weight(key, 5, 0), gemm_exact_check_weight(key, 5, 1));
}

TEST(GemmCheck, TauIsTheDocumentedBound) {
  GemmAccumulation acc;
  acc.u_acc = 0x1p-23;
  const uint32_t k = 8192, n = 8192;
  const double rel = gemm_relative_bound(acc, k);
  const double slack = gemm_check_slack(k, n);
  EXPECT_DOUBLE_EQ(slack, 2 * gemm_gamma(k + n + 8.0, 0x1p-53) + 0x1p-45);
  EXPECT_DOUBLE_EQ(gemm_float_sum_factor(k), (1 + 0x1p-22) / (1 - gemm_gamma(k + 1.0, 0x1p-24)));
  const double q = 1234.5, wsum = 3000;
  EXPECT_DOUBLE_EQ(gemm_tile_tau(acc, rel, slack, k, q, wsum),
                   (rel + acc.u_out * (1 + rel)) * q + (k + 2.0) * acc.underflow * wsum + slack * (2 + rel) * q);
  const double es = gemm_element_slack(k);
  EXPECT_DOUBLE_EQ(es, 2 * gemm_gamma(k + 8.0, 0x1p-53) + 0x1p-45);
  EXPECT_DOUBLE_EQ(gemm_element_tau(acc, rel, es, k, 10.0, 2.0),
                   rel * 10 + acc.u_out * 2 + (k + 2.0) * acc.underflow + es * 12);
  EXPECT_FALSE(gemm_check_fails(1.0, 1.0));
  EXPECT_TRUE(gemm_check_fails(std::nextafter(1.0, 2.0), 1.0));
  EXPECT_TRUE(gemm_check_fails(std::nan(""), 1.0));
  EXPECT_TRUE(gemm_check_fails(INFINITY, 1e300));
}

TEST(GemmCheck, ExactUnscalingAcceptsOnlyIntegersWithinTheBound) {
  EXPECT_EQ(exp2_double(0), 1.0);
  EXPECT_EQ(exp2_double(-60), std::ldexp(1.0, -60));
  EXPECT_EQ(exp2_double(120), std::ldexp(1.0, 120));
  EXPECT_EQ(gemm_unscale_output(48.0, 0.25, 100), 12);
  EXPECT_EQ(gemm_unscale_output(-100.0, 1.0, 100), -100);
  EXPECT_EQ(gemm_unscale_output(0.0, 1.0, 100), 0);
  EXPECT_EQ(gemm_unscale_output(101.0, 1.0, 100), kGemmInvalid);
  EXPECT_EQ(gemm_unscale_output(2.5, 1.0, 100), kGemmInvalid);
  EXPECT_EQ(gemm_unscale_output(std::nan(""), 1.0, 100), kGemmInvalid);
  EXPECT_EQ(gemm_unscale_output(INFINITY, 1.0, 100), kGemmInvalid);
  EXPECT_EQ(gemm_unscale_output(0x1p-1074, 1.0, 100), kGemmInvalid);  // nonzero that unscales to zero
  EXPECT_EQ(gemm_unscale_output(3.0 * 0x1p-40, 0x1p40, 100), 3);
  EXPECT_EQ(gemm_output_value_of_bits(GemmType::kFp32, 0x3f800000u), 1.0);
  EXPECT_EQ(gemm_output_value_of_bits(GemmType::kInt8, 0xfffffffeu), -2.0);
  EXPECT_EQ(gemm_output_value_of_bits(GemmType::kFp64, 0x4000000000000000ULL), 2.0);
}

// A reference C: exact families exactly, random ones in FP64 rounded once.
std::vector<uint8_t> reference_c(const GemmSpec& s) {
  const GemmGenerator ga = gemm_generator(s.type, s.inputs, s.k, s.seed, kGemmStreamA);
  const GemmGenerator gb = gemm_generator(s.type, s.inputs, s.k, s.seed, kGemmStreamB);
  std::vector<double> a(uint64_t{s.m} * s.k), b(uint64_t{s.n} * s.k);
  for (uint64_t i = 0; i < a.size(); ++i) a[i] = gemm_generated_double(ga, i);
  for (uint64_t i = 0; i < b.size(); ++i) b[i] = gemm_generated_double(gb, i);
  std::vector<uint8_t> c(uint64_t{s.m} * s.n * gemm_output_bytes(s.type));
  for (uint32_t i = 0; i < s.m; ++i) {
    for (uint32_t j = 0; j < s.n; ++j) {
      double e = 0;
      for (uint32_t p = 0; p < s.k; ++p) e += a[uint64_t{i} * s.k + p] * b[uint64_t{j} * s.k + p];
      const uint64_t idx = uint64_t{i} * s.n + j;
      if (s.type == GemmType::kFp64) {
        reinterpret_cast<double*>(c.data())[idx] = e;
      } else if (s.type == GemmType::kInt8) {
        reinterpret_cast<int32_t*>(c.data())[idx] = static_cast<int32_t>(e);
      } else {
        reinterpret_cast<float*>(c.data())[idx] = static_cast<float>(e);
      }
    }
  }
  return c;
}
std::vector<uint8_t> reference_c(const GemmHostInputs& in) { return reference_c(in.spec); }

GemmAccumulation fp32_or_fp64(GemmType t) {
  GemmAccumulation acc;
  if (t == GemmType::kFp64) {
    acc.u_acc = acc.u_out = 0x1p-53;
    acc.underflow = 0x1p-1074;
  }
  return acc;
}

// The device's check (kernels/gemm_verify.cu) on the CPU, one line at a time as a block computes
// it, from the same GemmCheckShape and helpers: flags[line * tiles + t].
std::vector<uint8_t> check_lines(const GemmCheckShape& s, const GemmAccumulation& acc, const void* c,
                                 double& max_ratio) {
  std::vector<uint8_t> flags(size_t{s.lines} * s.tiles, 0);
  const size_t yk = size_t{s.tiles} * s.k;
  if (!gemm_inputs_exact(s.line.inputs)) {
    const GemmFloatBound b = gemm_float_bound(s, acc);
    std::vector<GemmTileWeights> tw;
    for (uint32_t t = 0; t < s.tiles; ++t)
      tw.push_back(gemm_tile_weights(s.key, t * s.tile, std::min(s.width, (t + 1) * s.tile)));
    std::vector<double> y(yk, 0.0), ya(yk, 0.0);
    for (uint32_t j = 0; j < s.width; ++j) {
      const double w = gemm_float_check_weight(s.key, j);
      for (uint32_t p = 0; p < s.k; ++p) {
        const double bv = gemm_generated_double(s.other, uint64_t{j} * s.k + p);
        y[size_t{j / s.tile} * s.k + p] += bv * w;
        ya[size_t{j / s.tile} * s.k + p] += std::fabs(bv) * w;
      }
    }
    for (uint32_t line = 0; line < s.lines; ++line) {
      for (uint32_t t = 0; t < s.tiles; ++t) {
        double ay = 0, cw = 0;
        float q = 0;
        for (uint32_t p = 0; p < s.k; ++p) {
          const double a = gemm_generated_double(s.line, uint64_t{line} * s.k + p);
          ay += a * y[size_t{t} * s.k + p];
          q += std::fabs(static_cast<float>(a)) * static_cast<float>(ya[size_t{t} * s.k + p]);
        }
        for (uint32_t j = t * s.tile; j < std::min(s.width, (t + 1) * s.tile); ++j) {
          cw += gemm_output_value(s.out_type, c, line * s.line_stride + j * s.col_stride) *
                gemm_float_check_weight(s.key, j);
        }
        const double tau = gemm_tile_tau(b.acc, b.rel, b.slack, s.k, q * b.sum_factor, tw[t].sum);
        const double res = std::fabs(cw - ay);
        flags[size_t{line} * s.tiles + t] = gemm_check_fails(res, tau);
        max_ratio = std::max(max_ratio, res / tau);
      }
    }
    return flags;
  }
  const double bound = static_cast<double>(gemm_exact_output_bound(s.line.inputs, s.k, s.line.mag));
  std::vector<uint64_t> y(yk * kGemmExactVectors, 0);
  for (uint32_t j = 0; j < s.width; ++j) {
    for (uint32_t p = 0; p < s.k; ++p) {
      const auto bv = static_cast<uint64_t>(static_cast<int64_t>(gemm_generated_int(s.other, uint64_t{j} * s.k + p)));
      for (uint32_t v = 0; v < kGemmExactVectors; ++v)
        y[(size_t{j / s.tile} * kGemmExactVectors + v) * s.k + p] += bv * gemm_exact_check_weight(s.key, j, v);
    }
  }
  for (uint32_t line = 0; line < s.lines; ++line) {
    for (uint32_t t = 0; t < s.tiles; ++t) {
      for (uint32_t v = 0; v < kGemmExactVectors; ++v) {
        uint64_t ay = 0, cw = 0;
        for (uint32_t p = 0; p < s.k; ++p) {
          ay += static_cast<uint64_t>(static_cast<int64_t>(gemm_generated_int(s.line, uint64_t{line} * s.k + p))) *
                y[(size_t{t} * kGemmExactVectors + v) * s.k + p];
        }
        for (uint32_t j = t * s.tile; j < std::min(s.width, (t + 1) * s.tile); ++j) {
          const int scale = gemm_generated_exponent(s.line, line) + gemm_generated_exponent(s.other, j);
          int64_t ci = gemm_unscale_output(gemm_output_value(s.out_type, c, line * s.line_stride + j * s.col_stride),
                                           exp2_double(-scale), bound);
          if (ci == kGemmInvalid) ci = 0;
          cw += static_cast<uint64_t>(ci) * gemm_exact_check_weight(s.key, j, v);
        }
        if (ay != cw) flags[size_t{line} * s.tiles + t] = 1;
      }
    }
  }
  return flags;
}

void flip(std::vector<uint8_t>& c, GemmType t, uint64_t idx, int bit) {
  const unsigned ob = gemm_output_bytes(t);
  uint64_t word = 0;
  std::memcpy(&word, c.data() + idx * ob, ob);
  word ^= uint64_t{1} << bit;
  std::memcpy(c.data() + idx * ob, &word, ob);
}

// The device path's host half: candidates from flags, then gemm_confirm_candidates regenerating
// the rows, gives the records verify_gemm gives on the same output.
TEST(GemmCheck, ConfirmingCandidatesFromTheGeneratorsMatchesVerifyGemm) {
  for (const Family& f : families()) {
    const GemmSpec s = small_spec(f);
    if (f.type == GemmType::kE5m2 || f.type == GemmType::kE4m3) continue;  // no host accumulation model here
    const GemmAccumulation acc = fp32_or_fp64(f.type);
    const GemmHostInputs in = generate_gemm_inputs(s, 1);
    std::vector<uint8_t> c = reference_c(in);
    const uint64_t bad = uint64_t{5} * s.n + 17;
    const int bit = f.type == GemmType::kFp64 ? 62 : 30;
    flip(c, f.type, bad, bit);
    const GemmVerdict host = verify_gemm(in, c.data(), acc, 1);
    ASSERT_EQ(host.report.mismatches, 1u) << name_of(f);
    ASSERT_EQ(host.report.records.size(), 1u) << name_of(f);
    // Row 5 and column 17 flagged in their (single) tiles: the intersection is the bad element.
    std::vector<uint8_t> row_flags(s.m, 0), col_flags(s.n, 0);
    row_flags[5] = 1;
    col_flags[17] = 1;
    const std::vector<uint64_t> cand = gemm_candidates(s.m, s.n, s.n, s.m, row_flags, col_flags, {bad + 1}).index;
    ASSERT_EQ(cand, (std::vector<uint64_t>{bad, bad + 1})) << name_of(f);
    std::vector<uint64_t> bits;
    for (uint64_t idx : cand) bits.push_back(gemm_output_bits(f.type, c.data(), idx));
    const MismatchReport dev = gemm_confirm_candidates(s, acc, cand, bits, 2);
    ASSERT_EQ(dev.mismatches, 1u) << name_of(f);
    ASSERT_EQ(dev.records.size(), 1u);
    EXPECT_EQ(dev.records[0].index, host.report.records[0].index) << name_of(f);
    EXPECT_EQ(dev.records[0].expected, host.report.records[0].expected) << name_of(f);
    EXPECT_EQ(dev.records[0].observed, host.report.records[0].observed) << name_of(f);
    EXPECT_EQ(dev.records[0].lane, 17);
  }
  const std::vector<uint8_t> flags = {0, 1, 0, 0, 1, 0};  // 3 rows x 2 tiles of a 512-column C
  EXPECT_EQ(gemm_unconfirmed_checks(512, 256, flags), (std::vector<uint64_t>{256, 2 * 512 + 0}));
}

// A row check that fails where no column check in its tile does (a change near the bound, which the
// row's tau caught and the column's not) makes every element of its tile a candidate, to be
// confirmed against its own element bound; where a column check fails too, only the intersection.
TEST(GemmCheck, AFailedRowTileNoColumnCheckExplainsMakesEachOfItsElementsACandidate) {
  const uint32_t m = 8, n = 12, tile_c = 4, tile_r = 4;  // 3 column tiles, 2 row tiles
  std::vector<uint8_t> row_flags(m * 3, 0), col_flags(n * 2, 0);
  row_flags[1 * 3 + 1] = 1;  // row 1, columns 4..7
  EXPECT_EQ(gemm_candidates(m, n, tile_c, tile_r, row_flags, col_flags, {}).index,
            (std::vector<uint64_t>{1 * n + 4, 1 * n + 5, 1 * n + 6, 1 * n + 7}));
  col_flags[6 * 2 + 0] = 1;  // column 6, rows 0..3
  EXPECT_EQ(gemm_candidates(m, n, tile_c, tile_r, row_flags, col_flags, {}).index, (std::vector<uint64_t>{1 * n + 6}));
  // Column 6 failing in rows 4..7 explains nothing of row 1.
  col_flags[6 * 2 + 0] = 0;
  col_flags[6 * 2 + 1] = 1;
  EXPECT_EQ(gemm_candidates(m, n, tile_c, tile_r, row_flags, col_flags, {}).index.size(), 4u);
}

// Past the confirmation cap, a whole tile's elements (a failed row check no column check explains)
// count as that one check, not each as a wrong element; located elements past the cap count each.
// Both confirmations (from the inputs, from the generators) give the same report, and a result whose
// only failure lies past the cap still fails.
TEST(GemmCheck, CandidatesPastTheCapCountAWholeTileAsOneFailedCheck) {
  const GemmSpec s = spec_of({GemmType::kFp32, GemmInputs::kExact}, 640, 512, 8, 3);
  const GemmAccumulation acc = fp32_or_fp64(s.type);
  const GemmHostInputs in = generate_gemm_inputs(s, 2);
  std::vector<uint8_t> c = reference_c(in);
  const uint32_t tile_c = 256, tile_r = 640, tiles = 2;          // C is 640 x 2 tiles for the rows, 1 for the columns
  ASSERT_EQ(uint64_t{s.m} * s.n - kGemmMaxConfirm, 128u * s.n);  // rows 512..639 lie past the cap
  const GemmBitsAt bits_at = [&](const std::vector<uint64_t>& index) {
    std::vector<uint64_t> bits;
    for (uint64_t idx : index) bits.push_back(gemm_output_bits(s.type, c.data(), idx));
    return bits;
  };
  auto both = [&](const GemmCandidates& cand) {
    const MismatchReport host = gemm_confirm_capped(s, acc, &in, cand, bits_at, 2);
    const MismatchReport dev = gemm_confirm_capped(s, acc, nullptr, cand, bits_at, 2);
    EXPECT_EQ(host.mismatches, dev.mismatches);
    EXPECT_EQ(host.records.size(), dev.records.size());
    EXPECT_EQ(host.checked, uint64_t{s.m} * s.n);
    return host;
  };
  // Every row check fails and no column check: every element a candidate, all right but one past
  // the cap. The 256 tiles past the cap are 256 unconfirmed checks (not 65536 wrong elements).
  std::vector<uint8_t> row_flags(s.m * tiles, 1), col_flags(s.n, 0);
  flip(c, s.type, uint64_t{600} * s.n + 3, 30);
  GemmCandidates cand = gemm_candidates(s.m, s.n, tile_c, tile_r, row_flags, col_flags, {});
  ASSERT_EQ(cand.index.size(), uint64_t{s.m} * s.n);
  ASSERT_EQ(cand.whole_tiles.size(), s.m * tiles);
  MismatchReport r = both(cand);
  EXPECT_EQ(r.mismatches, 256u);
  EXPECT_TRUE(r.records.empty());
  // A wrong element within the cap is confirmed and recorded besides.
  flip(c, s.type, uint64_t{7} * s.n + 300, 30);
  r = both(cand);
  EXPECT_EQ(r.mismatches, 257u);
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_EQ(r.records[0].index, uint64_t{7} * s.n + 300);
  // Located elements (row and column fail) past the cap count each: every column of column tile 0
  // fails too (one row tile spans all rows), so past the cap rows 512..639 hold 128 x 256 located
  // elements and 128 whole tiles. An invalid output in a whole tile counts with its tile.
  std::fill(col_flags.begin(), col_flags.begin() + tile_c, 1);
  cand = gemm_candidates(s.m, s.n, tile_c, tile_r, row_flags, col_flags, {uint64_t{600} * s.n + 400});
  ASSERT_EQ(cand.index.size(), uint64_t{s.m} * s.n);
  ASSERT_EQ(cand.whole_tiles.size(), s.m);
  r = both(cand);
  EXPECT_EQ(r.mismatches, 128u * 256 + 128 + 1);
  EXPECT_EQ(r.records.size(), 1u);
}

// The row and column passes as the device runs them (shapes, strides, swapped generators, keys,
// tiles): clean outputs pass with headroom, and a wrong element fails exactly its row's check in its
// column tile and its column's check in its row tile, so the candidates are that element alone.
// Exact families split lines into tiles of 256; random ones here take the fp8 tensor-core model,
// whose tiles at k = 24 are 104 columns wide.
TEST(GemmCheck, DevicePassesFlagExactlyTheWrongElementsRowAndColumnTiles) {
  struct Case {
    GemmType type;
    GemmInputs inputs;
    int bit;
  };
  for (const Case& c : {Case{GemmType::kBf16, GemmInputs::kRandom, 30}, Case{GemmType::kFp64, GemmInputs::kRandom, 62},
                        Case{GemmType::kE4m3, GemmInputs::kRandom, 30}, Case{GemmType::kFp32, GemmInputs::kExact, 0},
                        Case{GemmType::kFp16, GemmInputs::kScaled, 0}, Case{GemmType::kInt8, GemmInputs::kExact, 0},
                        Case{GemmType::kBf16, GemmInputs::kDense, 3}}) {
    const GemmSpec s = spec_of({c.type, c.inputs}, 520, 600, 24, 5);
    const std::string what = name_of({c.type, c.inputs});
    const bool exact = gemm_inputs_exact(c.inputs);
    const GemmAccumulation acc =
        c.type == GemmType::kFp64 ? fp32_or_fp64(c.type) : gemm_cuda_accumulation(GemmType::kE4m3, GemmPath::kLibrary);
    const GemmCheckShape rows = gemm_check_shape(s.type, s.inputs, s.m, s.n, s.k, s.seed, false, acc);
    const GemmCheckShape cols = gemm_check_shape(s.type, s.inputs, s.m, s.n, s.k, s.seed, true, acc);
    const uint32_t expect_tile = exact ? 256 : c.type == GemmType::kFp64 ? 0 : 104;
    if (expect_tile != 0) {
      ASSERT_EQ(rows.tile, expect_tile) << what;
      ASSERT_EQ(cols.tile, expect_tile) << what;
    }
    ASSERT_EQ(rows.tiles, (s.n + rows.tile - 1) / rows.tile);
    ASSERT_EQ(cols.tiles, (s.m + cols.tile - 1) / cols.tile);
    std::vector<uint8_t> out = reference_c(s);
    double ratio = 0;
    for (const auto& f : {check_lines(rows, acc, out.data(), ratio), check_lines(cols, acc, out.data(), ratio)}) {
      for (uint8_t x : f) ASSERT_EQ(x, 0) << what;
    }
    EXPECT_LT(ratio, 1.0) << what;
    const uint32_t row = 300, col = 517;
    flip(out, c.type, uint64_t{row} * s.n + col, c.bit);
    const std::vector<uint8_t> row_flags = check_lines(rows, acc, out.data(), ratio);
    const std::vector<uint8_t> col_flags = check_lines(cols, acc, out.data(), ratio);
    for (size_t f = 0; f < row_flags.size(); ++f)
      EXPECT_EQ(row_flags[f], f == row * rows.tiles + col / rows.tile) << what << " " << f;
    for (size_t f = 0; f < col_flags.size(); ++f)
      EXPECT_EQ(col_flags[f], f == col * cols.tiles + row / cols.tile) << what << " " << f;
    EXPECT_EQ(gemm_candidates(s.m, s.n, rows.tile, cols.tile, row_flags, col_flags, {}).index,
              (std::vector<uint64_t>{uint64_t{row} * s.n + col}))
        << what;
  }
}

// Random fp8 inputs scale to int8 exactly (every value the generator can produce), so the
// reference GEMMs are exact; the element check fails a residual over its bound, NaN and infinity.
TEST(GemmCheck, Fp8ReferenceIsExactIntegersAndItsElementCheckFailsWhatItMust) {
  for (GemmType t : {GemmType::kE4m3, GemmType::kE5m2}) {
    EXPECT_TRUE(gemm_reference_check(t, GemmInputs::kRandom));
    EXPECT_FALSE(gemm_reference_check(t, GemmInputs::kExact));
    const int shift = gemm_reference_shift(t);
    int largest = 0;
    for (uint32_t r = 0; r < (1u << 20); ++r) {
      const uint32_t bits = (r << 12) | (r >> 8);  // sign, exponent and significand bits all vary
      const float v = gemm_random_value_of(t, bits);
      const int8_t q = gemm_reference_int8(v, shift);
      ASSERT_EQ(static_cast<double>(q), std::ldexp(static_cast<double>(v), shift)) << gemm_type_name(t) << " " << v;
      largest = std::max(largest, std::abs(static_cast<int>(q)));
    }
    EXPECT_EQ(largest, t == GemmType::kE4m3 ? 120 : 56);
  }
  EXPECT_EQ(kGemmReferenceMaxK, (uint32_t{1} << 31) / (120 * 120));
  EXPECT_FALSE(gemm_reference_check(GemmType::kBf16, GemmInputs::kRandom));
  const GemmAccumulation acc = gemm_cuda_accumulation(GemmType::kE4m3, GemmPath::kLibrary);
  const uint32_t k = 8192;
  const double rel = gemm_relative_bound(acc, k), ref = 10, ref_abs = 3000;
  const GemmElementCheck at = gemm_reference_element(acc, rel, k, ref, ref_abs, ref);
  EXPECT_FALSE(at.fails);
  EXPECT_EQ(at.residual, 0.0);
  EXPECT_GT(at.tau, rel * ref_abs);
  EXPECT_FALSE(gemm_reference_element(acc, rel, k, ref, ref_abs, ref + 0.99 * at.tau).fails);
  EXPECT_TRUE(gemm_reference_element(acc, rel, k, ref, ref_abs, ref - 1.01 * at.tau).fails);
  EXPECT_TRUE(gemm_reference_element(acc, rel, k, ref, ref_abs, std::nan("")).fails);
  EXPECT_TRUE(gemm_reference_element(acc, rel, k, ref, ref_abs, INFINITY).fails);
}

// At the depth the GPU levels run (k = 8192) and with the CUDA engine's bounds, so with their
// tiles (16 to 33 columns; fp8 per element against its exact reference), on a narrow output that
// verifies in seconds: a clean output raises no flag and guarantees to catch any single change of
// 2x the rms of C, and a change of that size at one element is caught and confirmed there.
TEST(GemmCheck, AtTheLevelsDepthOneElementOffByTwiceTheTypicalOutputIsCaughtWhereItIs) {
  for (GemmType t : {GemmType::kFp64, GemmType::kFp32, GemmType::kTf32, GemmType::kFp16, GemmType::kBf16,
                     GemmType::kE4m3, GemmType::kE5m2}) {
    GemmSpec s = spec_of({t, GemmInputs::kRandom}, 64, 256, 8192, 11);
    const std::string what = gemm_type_name(t);
    const GemmAccumulation acc = gemm_cuda_accumulation(t, GemmPath::kLibrary);
    const bool fp8 = t == GemmType::kE4m3 || t == GemmType::kE5m2;
    const GemmHostInputs in = generate_gemm_inputs(s, 2);
    std::vector<uint8_t> c = reference_c(in);
    const GemmVerdict clean = verify_gemm(in, c.data(), acc, 2);
    ASSERT_EQ(clean.flagged_checks, 0u) << what;
    ASSERT_EQ(clean.report.mismatches, 0u) << what;
    EXPECT_LT(clean.max_ratio, 1.0) << what;
    ASSERT_GT(clean.c_rms, 0.0) << what;
    const double multiple = clean.detectable / clean.c_rms;
    std::printf("%s k=8192: tile %u, max |r|/tau %.3g, detectable %.3g x rms(C)\n", what.c_str(), clean.check_tile,
                clean.max_ratio, multiple);
    if (t == GemmType::kFp64) {
      EXPECT_EQ(clean.check_tile, s.n);
    } else {
      EXPECT_EQ(clean.check_tile == 1, fp8) << what;
      EXPECT_LT(clean.check_tile, 40u) << what;
    }
    EXPECT_LT(multiple, 2.0) << what;
    const double error = 2.0 * clean.c_rms;
    for (const auto& [row, col] : {std::pair{0u, 0u}, std::pair{37u, 129u}, std::pair{63u, 255u}}) {
      std::vector<uint8_t> bad = c;
      const uint64_t idx = uint64_t{row} * s.n + col;
      if (t == GemmType::kFp64) {
        reinterpret_cast<double*>(bad.data())[idx] -= error;
      } else {
        reinterpret_cast<float*>(bad.data())[idx] += static_cast<float>(error);
      }
      const GemmVerdict v = verify_gemm(in, bad.data(), acc, 2);
      EXPECT_GE(v.flagged_checks, 1u) << what << " " << row << "," << col;
      ASSERT_EQ(v.report.mismatches, 1u) << what << " " << row << "," << col;
      ASSERT_EQ(v.report.records.size(), 1u);
      EXPECT_EQ(v.report.records[0].index, idx) << what;
    }
  }
}

}  // namespace
}  // namespace sdc
