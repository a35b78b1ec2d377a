// Pinned constants for the SDC_HD element logic: the CUDA kernels compute the same functions, so
// a change here silently changes every golden. The values were recorded once and are checked
// bit for bit.
#include <gtest/gtest.h>

#include "kernels/common/chains.hpp"
#include "kernels/common/corruption.hpp"
#include "kernels/common/device_mismatch.hpp"
#include "kernels/common/digest.hpp"
#include "kernels/common/patterns.hpp"

namespace sdc {
namespace {

TEST(Random, PinnedValues) {
  EXPECT_EQ(mix64(1), 0x5692161d100b05e5ULL);
  EXPECT_EQ(counter_random(7, 3), 0xf0e521070cc03750ULL);
}

TEST(Patterns, PinnedWords) {
  auto word = [](PatternKind k, uint64_t i) { return pattern_word(Pattern{k, 5, 42, false}, i); };
  EXPECT_EQ(word(PatternKind::kOwnAddress, 1001), 0x1f4dULL);  // 1001 * 8 ^ 5
  EXPECT_EQ(word(PatternKind::kWalkingOnes, 0), 0x20ULL);
  EXPECT_EQ(word(PatternKind::kWalkingOnes, 1001), 0x0000400000000000ULL);  // bit (1001 + 5) % 64 = 46
  EXPECT_EQ(word(PatternKind::kWalkingZeros, 1001), ~0x0000400000000000ULL);
  EXPECT_EQ(word(PatternKind::kSolid, 1001), 5u);
  EXPECT_EQ(word(PatternKind::kCheckerboard, 0), 5u);
  EXPECT_EQ(word(PatternKind::kCheckerboard, 1001), ~5ULL);
  EXPECT_EQ(word(PatternKind::kWalking8, 77), 0x2020202020202020ULL);
  EXPECT_EQ(word(PatternKind::kModulo20, 0), 0x58a615d82b8d89ddULL);
  EXPECT_EQ(word(PatternKind::kModulo20, 5), ~0x58a615d82b8d89ddULL);
  EXPECT_EQ(word(PatternKind::kModulo20, 1005), ~0x58a615d82b8d89ddULL);
  EXPECT_EQ(word(PatternKind::kRandom, 0), 0x52d1d152223bd1ddULL);
  EXPECT_EQ(word(PatternKind::kRandom, 1001), 0xd907bc6c813d4f99ULL);
  EXPECT_EQ(word(PatternKind::kRandomBlocks, 1001), 0xb81606122d725d6cULL);
}

TEST(Patterns, RandomWordsChangeKeyEvery2To32Words) {
  const Pattern p{PatternKind::kRandom, 0, 42, false};
  EXPECT_EQ(hash32(1), 0x688990c0u);
  EXPECT_EQ(hash32(0xdeadbeefu), 0xe628c683u);
  EXPECT_NE(pattern_word(p, 5), pattern_word(p, 5 + (1ULL << 32)));
  EXPECT_EQ(pattern_word(p, 5), keyed_random_word(mix64(42), 5));
}

TEST(Patterns, InverseIsBitwiseNot) {
  for (uint32_t k = 0; k < kPatternKinds; ++k) {
    const Pattern p{static_cast<PatternKind>(k), 9, 1234, false};
    for (uint64_t i : {0ULL, 1ULL, 511ULL, 512ULL, 99999ULL})
      EXPECT_EQ(pattern_word(inverse(p), i), ~pattern_word(p, i));
  }
}

TEST(Patterns, Modulo20MarksEveryTwentiethWord) {
  const Pattern p{PatternKind::kModulo20, 7, 3, false};
  const uint64_t marked = pattern_word(p, 7);
  for (uint64_t i = 0; i < 200; ++i) EXPECT_EQ(pattern_word(p, i) == marked, i % 20 == 7) << i;
}

TEST(Patterns, RandomBlocksAreConstantKindPerBlock) {
  const Pattern p{PatternKind::kRandomBlocks, 4, 99, false};
  for (uint64_t block = 0; block < 64; ++block) {
    const Pattern sub = random_block_pattern(p, block);
    EXPECT_NE(sub.kind, PatternKind::kRandomBlocks);
    for (uint64_t i = block * 16; i < block * 16 + 16; ++i) EXPECT_EQ(pattern_word(p, i), pattern_word(sub, i));
  }
}

TEST(Chains, PinnedOutputs) {
  float f[2];
  rotation_chain_run(rotation_chain_seed<float>(1, 0), 1000, f);
  EXPECT_EQ(bits_of(f[0]), 0x3ed62d4dULL);
  EXPECT_EQ(bits_of(f[1]), 0xbfa2138bULL);
  double d[2];
  rotation_chain_run(rotation_chain_seed<double>(1, 0), 1000, d);
  EXPECT_EQ(bits_of(d[0]), 0x3fdac6f57c6a1442ULL);
  EXPECT_EQ(bits_of(d[1]), 0xbff442473a207f67ULL);
  uint64_t i[2];
  int64_chain_run(int64_chain_seed(1, 0), 1000, i);
  EXPECT_EQ(i[0], 0xd8ce65f245ad8745ULL);
  EXPECT_EQ(i[1], 0xd7244849f73de779ULL);
  uint64_t s[2];
  divsqrt_chain_run(divsqrt_chain_seed<float>(1, 0), 100, s);
  EXPECT_EQ(s[0], 0x402035aaULL);
  EXPECT_EQ(s[1], 0xbd0fefd042b0675aULL);
  divsqrt_chain_run(divsqrt_chain_seed<double>(1, 0), 100, s);
  EXPECT_EQ(s[0], 0x400406b533ca2fb2ULL);
  EXPECT_EQ(s[1], 0x188229cca36265deULL);
}

TEST(Chains, RotationNeitherDecaysNorGrows) {
  // A one-ulp perturbation mid-chain must survive to the output (no contraction washes it out),
  // and the state must stay bounded (no blow-up to inf).
  RotationChain<float> a = rotation_chain_seed<float>(5, 3), b = a;
  for (int j = 0; j < 5000; ++j) {
    rotation_step(a.x, a.y, a.s);
    rotation_step(b.x, b.y, b.s);
    if (j == 100) b.x = std::nextafter(b.x, 10.0f);
  }
  EXPECT_TRUE(a.x != b.x || a.y != b.y);
  EXPECT_LT(std::fabs(a.x), 10.0f);
  EXPECT_LT(std::fabs(a.y), 10.0f);
}

TEST(Chains, DivSqrtFoldKeepsEarlyFaultsVisible) {
  DivSqrtChain<double> a = divsqrt_chain_seed<double>(2, 7), b = a;
  for (uint32_t j = 0; j < 200; ++j) {
    divsqrt_step(a.x, a.d, a.fold, j);
    divsqrt_step(b.x, b.d, b.fold, j);
    if (j == 3) b.x = std::nextafter(b.x, 10.0);
  }
  EXPECT_EQ(a.x, b.x);        // the map contracts: x alone has forgotten the fault ...
  EXPECT_NE(a.fold, b.fold);  // ... the fold has not
}

TEST(Digest, PinnedAndOrderIndependent) {
  Digest128 forward, backward;
  for (uint64_t k = 0; k < 1000; ++k) digest_add(forward, k * 3, k);
  for (uint64_t k = 1000; k-- > 0;) digest_add(backward, k * 3, k);
  EXPECT_EQ(forward.lo, 0x26fcda63c53bc02aULL);
  EXPECT_EQ(forward.hi, 0xf5874ec641f24728ULL);
  EXPECT_TRUE(forward == backward);
}

TEST(Digest, AnySingleWordChangeChangesBothLanes) {
  Digest128 clean;
  for (uint64_t k = 0; k < 64; ++k) digest_add(clean, k, k);
  for (uint64_t k = 0; k < 64; ++k) {
    for (int bit = 0; bit < 64; ++bit) {
      Digest128 d;
      for (uint64_t i = 0; i < 64; ++i) digest_add(d, i == k ? i ^ (1ULL << bit) : i, i);
      EXPECT_NE(d.lo, clean.lo);
      EXPECT_NE(d.hi, clean.hi);
    }
  }
}

TEST(Corruption, ElementAccessAndStuckBits) {
  uint32_t data[4] = {0, 0xffffffffu, 0x12345678u, 0};
  EXPECT_EQ(load_element(data, 2, 32), 0x12345678u);
  store_element(data, 3, 32, 0xabcdef01u);
  EXPECT_EQ(data[3], 0xabcdef01u);
  EXPECT_EQ(load_element(data, 2, 16), 0xffffu);  // little-endian halves of element 1
  EXPECT_EQ(stuck_bit(0, 5, true), 32u);
  EXPECT_EQ(stuck_bit(~0ULL, 0, false), ~1ULL);
  EXPECT_EQ(lane_of(70, 2, 32), 3u);
}

// The warp-aggregated mismatch log, replayed on the host: each warp's leader adds its hit count
// once and every hit lane writes base + (hit lanes below it) while that slot exists. A
// whole-buffer fault (every lane of 40 warps) and scattered hits must both give an exact count,
// each of the first kDeviceMismatchSlots slots written exactly once, and nothing past them.
TEST(WarpAggregation, CountIsExactSlotsAreUniqueAndNoneIsWrittenPastTheEnd) {
  for (const std::vector<uint32_t>& warps :
       {std::vector<uint32_t>(40, 0xffffffffu), std::vector<uint32_t>{0x1u, 0x80000000u, 0x0u, 0x00f0f00fu, 0x5u}}) {
    unsigned long long count = 0;
    std::vector<int> written(kDeviceMismatchSlots, 0);
    unsigned long long atomics = 0;
    unsigned long long expected = 0;
    for (uint32_t hits : warps) {
      expected += popcount32(hits);
      if (hits == 0) continue;
      const unsigned long long base = count;  // the leader's atomicAdd returns the old count
      count += popcount32(hits);
      ++atomics;
      EXPECT_NE(hits & (1u << warp_leader(hits)), 0u);
      EXPECT_EQ(hits & ((1u << warp_leader(hits)) - 1u), 0u);  // the lowest hit lane leads
      for (unsigned lane = 0; lane < 32; ++lane) {
        if ((hits & (1u << lane)) == 0) continue;
        const unsigned long long slot = warp_slot(base, hits, lane);
        EXPECT_GE(slot, base);
        EXPECT_LT(slot, base + popcount32(hits));
        if (slot_recorded(slot)) ++written[slot];
      }
    }
    EXPECT_EQ(count, expected);
    EXPECT_LE(atomics, warps.size());
    for (unsigned k = 0; k < kDeviceMismatchSlots; ++k) EXPECT_EQ(written[k], k < count ? 1 : 0) << "slot " << k;
  }
  EXPECT_FALSE(slot_recorded(kDeviceMismatchSlots));
}

TEST(ProducerTag, NamesTheSmAndLaneOrFlagsAMove) {
  EXPECT_EQ(producer_unit(producer_tag_of(131, 131, 7)), 131u);
  EXPECT_EQ(producer_lane(producer_tag_of(131, 131, 7)), 7u);
  EXPECT_EQ(producer_unit(producer_tag_of(0, 0, 31)), 0u);
  // Preempted between the two %smid reads: the SM is unknown, the lane (fixed per thread) is kept.
  EXPECT_EQ(producer_unit(producer_tag_of(3, 4, 9)), kUnitMoved);
  EXPECT_EQ(producer_lane(producer_tag_of(3, 4, 9)), 9u);
}

}  // namespace
}  // namespace sdc
