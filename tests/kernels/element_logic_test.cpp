// Pinned constants for the SDC_HD element logic: the CUDA kernels compute the same functions, so
// a change here silently changes every golden. The values were recorded once and are checked
// bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "kernels/common/chains.hpp"
#include "kernels/common/corruption.hpp"
#include "kernels/common/device_mismatch.hpp"
#include "kernels/common/digest.hpp"
#include "kernels/common/gemm_elements.hpp"
#include "kernels/common/patterns.hpp"
#include "kernels/common/random.hpp"
#include "kernels/common/simt_tile.hpp"
#include "kernels/common/sweep.hpp"

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

// is_bitwise_inverse(a, b) holds exactly when b's words are ~a's, over patterns of every kind whose
// parameters differ by a complement, by 64 (walking) or only in fields the kind ignores.
TEST(Patterns, BitwiseInverseIsSeenAcrossKindsAndParameters) {
  std::vector<Pattern> all;
  for (uint32_t k = 0; k < kPatternKinds; ++k) {
    for (uint64_t param : {9ULL, ~9ULL, 73ULL, 3ULL})
      for (uint64_t seed : {5ULL, 6ULL})
        for (bool inverted : {false, true}) all.push_back(Pattern{static_cast<PatternKind>(k), param, seed, inverted});
  }
  const auto words_inverse = [](const Pattern& a, const Pattern& b) {
    for (uint64_t i = 0; i < 4096; i += 7) {
      if (pattern_word(b, i) != ~pattern_word(a, i)) return false;
    }
    return true;
  };
  for (const Pattern& a : all) {
    for (const Pattern& b : all) {
      EXPECT_EQ(is_bitwise_inverse(a, b), words_inverse(a, b))
          << static_cast<int>(a.kind) << "/" << a.param << "/" << a.seed << "/" << a.inverted << " vs "
          << static_cast<int>(b.kind) << "/" << b.param << "/" << b.seed << "/" << b.inverted;
    }
  }
  // The rewrites the probes run: walking ones to walking zeros at the same offset, a background to
  // its complement.
  EXPECT_TRUE(is_bitwise_inverse({PatternKind::kWalkingOnes, 3, 0, false}, {PatternKind::kWalkingZeros, 3, 0, false}));
  EXPECT_TRUE(is_bitwise_inverse({PatternKind::kSolid, 0x5555, 0, false}, {PatternKind::kSolid, ~0x5555ULL, 0, false}));
  EXPECT_TRUE(is_bitwise_inverse({PatternKind::kCheckerboard, 1, 0, false}, {PatternKind::kCheckerboard, 1, 0, true}));
  EXPECT_FALSE(is_bitwise_inverse({PatternKind::kWalkingOnes, 3, 0, false}, {PatternKind::kWalkingZeros, 4, 0, false}));
}

TEST(Patterns, Modulo20MarksEveryTwentiethWord) {
  const Pattern p{PatternKind::kModulo20, 7, 3, false};
  const uint64_t marked = pattern_word(p, 7);
  for (uint64_t i = 0; i < 200; ++i) EXPECT_EQ(pattern_word(p, i) == marked, i % 20 == 7) << i;
}

// mod20 and kModulo20's pairs, as the kernels take them, against 64-bit % 20 (the form the
// words were defined with), at indices near 2^32, 2^40 and 2^64, where the 32-bit halves carry
// and the index plus the offset wraps.
TEST(Patterns, Modulo20ResidueFromHalvesIsTheSixtyFourBitOne) {
  std::vector<uint64_t> xs;
  for (uint64_t base : {uint64_t{0}, uint64_t{1} << 32, uint64_t{1} << 40, uint64_t{5} << 60, uint64_t{0} - 64}) {
    for (uint64_t d = 0; d < 64; ++d) {
      xs.push_back(base + d);
      xs.push_back(base - d);
    }
  }
  for (uint64_t k = 1; k < 20; ++k) xs.push_back(0xffffffffULL * k);
  for (uint64_t x : xs) ASSERT_EQ(mod20(x), x % 20) << x;
  for (uint64_t offset : {uint64_t{0}, uint64_t{7}, uint64_t{19}, uint64_t{27}}) {
    const Pattern p{PatternKind::kModulo20, offset, 3, false};
    const uint64_t background = mix64(p.seed);
    const PairSource<PatternKind::kModulo20> src(p);
    for (uint64_t x : xs) {
      const uint64_t old_word = (x + 20u - p.param % 20u) % 20u == 0 ? background : ~background;
      ASSERT_EQ(pattern_word_of<PatternKind::kModulo20>(p, x), old_word) << offset << " at " << x;
      const uint64_t even = x & ~1ULL;
      const WordPair w = src.at(even);
      ASSERT_EQ(w.lo, pattern_word_of<PatternKind::kModulo20>(p, even)) << offset << " at " << even;
      ASSERT_EQ(w.hi, pattern_word_of<PatternKind::kModulo20>(p, even + 1)) << offset << " at " << even + 1;
    }
  }
}

TEST(Patterns, RandomBlocksAreConstantKindPerBlock) {
  const Pattern p{PatternKind::kRandomBlocks, 4, 99, false};
  for (uint64_t block = 0; block < 64; ++block) {
    const Pattern sub = random_block_pattern(p, block);
    EXPECT_NE(sub.kind, PatternKind::kRandomBlocks);
    for (uint64_t i = block * 16; i < block * 16 + 16; ++i) EXPECT_EQ(pattern_word(p, i), pattern_word(sub, i));
  }
}

// The memory kernels' 16-byte pairs: PairSource<K>::at(even) is pattern_word_of<K> at even and
// even + 1, for every kind, in any order of access (kRandom caches its key per 2^32-word span).
template <PatternKind K>
void expect_pairs_match(const Pattern& p) {
  PairSource<K> src(p);
  const uint64_t span = uint64_t{1} << 32;
  for (uint64_t even : std::vector<uint64_t>{0, 2, 1000, span - 2, span, span + 6, 4, 3 * span + 2, span - 2, 0}) {
    const WordPair w = src.at(even);
    EXPECT_EQ(w.lo, pattern_word_of<K>(p, even)) << static_cast<int>(K) << " at " << even;
    EXPECT_EQ(w.hi, pattern_word_of<K>(p, even + 1)) << static_cast<int>(K) << " at " << even + 1;
  }
}

TEST(Patterns, PairSourceGivesTheWordsOfEachKind) {
  const Pattern p{PatternKind::kSolid, 9, 1234, false};  // the kind comes from the template
  expect_pairs_match<PatternKind::kOwnAddress>(p);
  expect_pairs_match<PatternKind::kWalkingOnes>(p);
  expect_pairs_match<PatternKind::kWalkingZeros>(p);
  expect_pairs_match<PatternKind::kSolid>(p);
  expect_pairs_match<PatternKind::kCheckerboard>(p);
  expect_pairs_match<PatternKind::kWalking8>(p);
  expect_pairs_match<PatternKind::kModulo20>(p);
  expect_pairs_match<PatternKind::kRandom>(p);
  expect_pairs_match<PatternKind::kRandomBlocks>(p);
}

// Every vector once; each thread's vectors strictly ascending (descending); within a step,
// neighbouring threads take neighbouring vectors (coalesced), thread 0 the top one when descending;
// the kernels' walk by addition (sweep_first, sweep_delta) visits the same vectors in that order.
TEST(Sweep, VisitsEveryVectorOnceInEachThreadsOrder) {
  for (auto [descending, unroll] : {std::pair<bool, unsigned>{false, kSweepUnroll},
                                    {true, kSweepUnroll},
                                    {false, kUnitUnroll},
                                    {true, kUnitUnroll}}) {
    for (auto [vectors, threads] : {std::pair<uint64_t, uint64_t>{0, 64},
                                    {1, 64},
                                    {63, 64},
                                    {64, 64},
                                    {1000, 64},
                                    {4096, 256},
                                    {4099, 96},
                                    {7, 1}}) {
      const uint64_t steps = sweep_steps(vectors, threads, unroll);
      EXPECT_EQ(steps % unroll, 0u);
      EXPECT_LT((steps == 0 ? 0 : steps - unroll) * threads, vectors + 1);  // no idle group
      std::vector<int> seen(vectors, 0);
      for (uint64_t t = 0; t < threads; ++t) {
        bool first = true;
        uint64_t last = 0;
        for (uint64_t k = 0; k < steps; ++k) {
          const uint64_t v = sweep_vector(k, steps, t, threads, descending);
          if (t + 1 < threads) {
            const uint64_t next = sweep_vector(k, steps, t + 1, threads, descending);
            EXPECT_EQ(next, descending ? v - 1 : v + 1);
          }
          if (v >= vectors) continue;
          ++seen[v];
          if (!first) {
            EXPECT_TRUE(descending ? v < last : v > last) << t << " " << k;
          }
          first = false;
          last = v;
        }
      }
      for (uint64_t t = 0; t < threads; ++t) {
        uint64_t local = sweep_first(steps, t, threads, descending);
        for (uint64_t k = 0; k < steps; ++k, local += sweep_delta(threads, descending)) {
          ASSERT_EQ(local, sweep_vector(k, steps, t, threads, descending)) << t << " " << k;
        }
      }
      for (uint64_t v = 0; v < vectors; ++v) ASSERT_EQ(seen[v], 1) << "vector " << v << " of " << vectors;
      if (descending && steps > 0) {
        EXPECT_EQ(sweep_vector(0, steps, 0, threads, true), steps * threads - 1);
      }
    }
  }
}

// The words of a kRandomBlocks unit as patterns.cu computes them: the block pattern once per
// unit, then pairs of its plain kind.
WordPair unit_pair(const Pattern& sub, uint64_t even) {
  switch (sub.kind) {
    case PatternKind::kOwnAddress: return PairSource<PatternKind::kOwnAddress>(sub).at(even);
    case PatternKind::kWalkingOnes: return PairSource<PatternKind::kWalkingOnes>(sub).at(even);
    case PatternKind::kWalkingZeros: return PairSource<PatternKind::kWalkingZeros>(sub).at(even);
    case PatternKind::kSolid: return PairSource<PatternKind::kSolid>(sub).at(even);
    case PatternKind::kCheckerboard: return PairSource<PatternKind::kCheckerboard>(sub).at(even);
    default: return PairSource<PatternKind::kRandom>(sub).at(even);
  }
}

// mem.random_blocks block-major: walking units (a block, or a 2^kMaxUnitShift-word slice of a
// larger one) with the block pattern computed once per unit gives pattern_word at every word,
// each word once, for blocks of the probe's 4 KiB and larger, inverted or not; an odd last word
// comes from the per-word function. Smaller blocks keep the per-word path.
TEST(Patterns, RandomBlocksByUnitGiveTheSameWords) {
  EXPECT_FALSE(sweeps_by_unit(Pattern{PatternKind::kRandomBlocks, kMinUnitShift - 1, 1, false}));
  EXPECT_FALSE(sweeps_by_unit(Pattern{PatternKind::kRandom, 9, 1, false}));
  for (uint64_t shift : {8u, 9u, 12u, 13u, 20u}) {
    for (bool inverted : {false, true}) {
      const Pattern p{PatternKind::kRandomBlocks, shift, 77, inverted};
      ASSERT_TRUE(sweeps_by_unit(p));
      const uint64_t words = (shift == 20 ? (3ULL << 20) : (40ULL << shift)) + 2 * 300 + 1;  // a partial unit, odd
      const uint64_t invert = inverted ? ~0ULL : 0;
      const uint64_t unit_vectors = 1ULL << (unit_shift(p) - 1);
      const uint64_t vectors = words / 2;
      std::vector<uint8_t> seen(words, 0);
      for (uint64_t unit = 0; unit * unit_vectors < vectors; ++unit) {
        const Pattern sub = random_block_pattern(p, unit_block(p, unit));
        for (uint64_t v = unit * unit_vectors; v < std::min(vectors, (unit + 1) * unit_vectors); ++v) {
          const WordPair w = unit_pair(sub, 2 * v);
          ASSERT_EQ(w.lo ^ invert, pattern_word(p, 2 * v)) << "shift " << shift << " word " << 2 * v;
          ASSERT_EQ(w.hi ^ invert, pattern_word(p, 2 * v + 1)) << "shift " << shift << " word " << 2 * v + 1;
          ++seen[2 * v];
          ++seen[2 * v + 1];
        }
      }
      EXPECT_EQ(pattern_word_of<PatternKind::kRandomBlocks>(p, words - 1) ^ invert, pattern_word(p, words - 1));
      ++seen[words - 1];
      for (uint64_t i = 0; i < words; ++i) ASSERT_EQ(seen[i], 1) << i;
    }
  }
}

// The probe's own pattern (4 KiB blocks) over 64 blocks, pinned: block-major iteration must not
// change what mem.random_blocks writes.
TEST(Patterns, RandomBlocksPinnedDigest) {
  const Pattern p{PatternKind::kRandomBlocks, 9, 1, false};
  Digest128 d;
  for (uint64_t i = 0; i < (64u << 9); ++i) digest_add(d, pattern_word(p, i), i);
  EXPECT_EQ(d.lo, 0x3f0ee7af7af0e8c2ULL);
  EXPECT_EQ(d.hi, 0xb5ac43492c7dcb22ULL);
}

// gemm.simt.fp32: the 16 x 16 threads' 8 x 8 micro-tiles cover the 128 x 128 output tile once,
// each micro-tile row (column) is two float4-aligned runs of four, and the threads' float4 loads
// cover each 128 x 8 slice of A and Bt once.
TEST(SimtTile, MicroTilesAndLoadsCoverTheTileOnce) {
  std::vector<int> out(kSimtTile * kSimtTile, 0);
  for (int ty = 0; ty < kSimtGrid; ++ty) {
    for (int tx = 0; tx < kSimtGrid; ++tx) {
      for (int i = 0; i < kSimtMicro; ++i) {
        for (int j = 0; j < kSimtMicro; ++j) {
          const int r = simt_micro_offset(ty, i), c = simt_micro_offset(tx, j);
          ASSERT_GE(r, 0);
          ASSERT_LT(r, kSimtTile);
          ASSERT_GE(c, 0);
          ASSERT_LT(c, kSimtTile);
          ++out[r * kSimtTile + c];
        }
        if (i % 4 == 0) {
          EXPECT_EQ(simt_micro_offset(ty, i) % 4, 0);
        } else {
          EXPECT_EQ(simt_micro_offset(ty, i), simt_micro_offset(ty, i - 1) + 1);
        }
      }
    }
  }
  for (int e = 0; e < kSimtTile * kSimtTile; ++e) ASSERT_EQ(out[e], 1) << e;
  EXPECT_EQ(kSimtGrid * kSimtGrid, kSimtThreads);
  std::vector<int> loads(kSimtTile * kSimtDepth, 0);
  for (int t = 0; t < kSimtThreads; ++t) {
    EXPECT_EQ(simt_load_k(t) % 4, 0);
    for (int q = 0; q < 4; ++q) ++loads[simt_load_row(t) * kSimtDepth + simt_load_k(t) + q];
  }
  for (int e = 0; e < kSimtTile * kSimtDepth; ++e) ASSERT_EQ(loads[e], 1) << e;
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

// The kernels run four copies interleaved: each copy's outputs are those of one run alone, bit for
// bit, for both widths.
template <typename T>
void expect_interleaved_chains_match(uint64_t seed) {
  RotationChain<T> together[4];
  for (unsigned k = 0; k < 4; ++k) together[k] = rotation_chain_seed<T>(seed, 10 * k + 1);
  rotation_chains_run(together, 3000);
  for (unsigned k = 0; k < 4; ++k) {
    T alone[2];
    rotation_chain_run(rotation_chain_seed<T>(seed, 10 * k + 1), 3000, alone);
    EXPECT_EQ(bits_of(together[k].x), bits_of(alone[0])) << k;
    EXPECT_EQ(bits_of(together[k].y), bits_of(alone[1])) << k;
  }
}

TEST(Chains, InterleavedCopiesGiveEachCopysOwnOutputs) {
  expect_interleaved_chains_match<float>(1);
  expect_interleaved_chains_match<double>(2);
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

// Golden files hold digests of this definition: a change here must bump kGoldenVersion.
TEST(Digest, PinnedAndOrderIndependent) {
  Digest128 forward, backward;
  for (uint64_t k = 0; k < 1000; ++k) digest_add(forward, k * 3, k);
  for (uint64_t k = 1000; k-- > 0;) digest_add(backward, k * 3, k);
  EXPECT_EQ(forward.lo, 0x5e54370632f7be5aULL);
  EXPECT_EQ(forward.hi, 0xf64be524432d7f9cULL);
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

// Each lane's term, flipping one bit of the word: each output bit flips with probability 1/2 within
// sampling noise (50000 words: one standard deviation is 0.0022). Two rounds of the mix, or a small
// last constant, leave biases of 0.08 to 0.36 that this catches.
TEST(Digest, EachLaneAvalanches) {
  constexpr int kWords = 50000;
  for (int lane = 0; lane < 2; ++lane) {
    const auto term = [lane](uint64_t w) { return lane == 0 ? digest_term_lo(w, 12345) : digest_term_hi(w, 12345); };
    std::vector<int> flips(64 * 64, 0);
    for (int n = 0; n < kWords; ++n) {
      const uint64_t w = counter_random(lane + 1, n), t = term(w);
      for (int in = 0; in < 64; ++in) {
        const uint64_t changed = t ^ term(w ^ (1ULL << in));
        for (int out = 0; out < 64; ++out) flips[64 * in + out] += static_cast<int>((changed >> out) & 1u);
      }
    }
    double worst = 0;
    for (int f : flips) worst = std::max(worst, std::abs(static_cast<double>(f) / kWords - 0.5));
    EXPECT_LT(worst, 0.02) << "lane " << lane;
  }
}

// Sums cancel when two faults change two terms by opposite amounts. A flip that changed a term by
// a predictable amount (as any linear mix does) would make that likely: no flip ever repeats one.
TEST(Digest, NoBitFlipChangesATermPredictably) {
  for (int lane = 0; lane < 2; ++lane) {
    for (int bit = 0; bit < 64; ++bit) {
      std::set<uint64_t> changes;
      for (uint64_t n = 0; n < 2048; ++n) {
        const uint64_t w = counter_random(7, n), flipped = w ^ (1ULL << bit);
        const uint64_t change = lane == 0 ? digest_term_lo(flipped, n) - digest_term_lo(w, n)
                                          : digest_term_hi(flipped, n) - digest_term_hi(w, n);
        changes.insert(std::min(change, 0 - change));  // up to sign
      }
      EXPECT_EQ(changes.size(), 2048u) << "lane " << lane << " bit " << bit;
    }
  }
}

// Words moved to another index: the key makes every term depend on its position.
TEST(Digest, SwappedWordsChangeBothLanes) {
  Digest128 clean;
  for (uint64_t k = 0; k < 256; ++k) digest_add(clean, counter_random(3, k), k);
  for (uint64_t a = 0; a < 256; a += 5) {
    for (uint64_t b = a + 1; b < 256; b += 7) {
      Digest128 d;
      for (uint64_t k = 0; k < 256; ++k) digest_add(d, counter_random(3, k == a ? b : k == b ? a : k), k);
      EXPECT_NE(d.lo, clean.lo) << a << " " << b;
      EXPECT_NE(d.hi, clean.hi) << a << " " << b;
    }
  }
}

// The digest kernel's 16-byte loads: every word in exactly one part, the vectors 16-byte aligned.
TEST(Digest, VectorSplitCoversEveryWordOnceWithAlignedPairs) {
  for (uint64_t address : {0x1000u, 0x1008u}) {
    for (uint64_t words = 0; words < 12; ++words) {
      const VectorSplit s = split_into_vectors(address, words);
      EXPECT_EQ(s.head + 2 * s.pairs + s.rest, words) << address << " " << words;
      EXPECT_LE(s.head, 1u);
      EXPECT_LE(s.rest, 1u);
      if (s.pairs > 0) {
        EXPECT_EQ((address + 8 * s.head) % 16, 0u) << address << " " << words;
      }
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

// The FP8 bound's promotion interval: a chunk never counts more products than k has, and a longer
// interval loosens the bound by about its ratio (128 against 32: four times).
TEST(GemmBound, ChunkIsCappedAtKAndScalesTheInnerError) {
  GemmAccumulation fp8;
  fp8.u_acc = 0x1p-23;
  fp8.u_inner = 0x1p-13;
  fp8.chunk = 128;
  GemmAccumulation short_chunk = fp8;
  short_chunk.chunk = 64;
  EXPECT_DOUBLE_EQ(gemm_relative_bound(fp8, 64), gemm_relative_bound(short_chunk, 64));
  EXPECT_LT(gemm_relative_bound(fp8, 32), gemm_relative_bound(fp8, 64));
  GemmAccumulation k32 = fp8;
  k32.chunk = 32;
  const double ratio = gemm_relative_bound(fp8, 8192) / gemm_relative_bound(k32, 8192);
  EXPECT_GT(ratio, 3.9);
  EXPECT_LT(ratio, 4.1);
}

}  // namespace
}  // namespace sdc
