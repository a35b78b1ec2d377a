// The CPU's pattern loops against the per-word reference, pattern_word: every kind, over ranges
// that start and end anywhere (partial blocks and vectors), in both directions, for every way a
// block's expected and rewritten words are made (periodic tables, generated blocks, the inverse,
// any other pattern), and far into the index space where kRandom changes its key.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <vector>

#include "host/cpu_patterns.hpp"

namespace sdc {
namespace {

std::vector<Pattern> every_pattern() {
  std::vector<Pattern> patterns;
  for (uint32_t k = 0; k < kPatternKinds; ++k) {
    const auto kind = static_cast<PatternKind>(k);
    const uint64_t param = kind == PatternKind::kRandomBlocks ? 9 : 0x5555555555555555ULL + k;
    for (bool inverted : {false, true}) patterns.push_back({kind, param, 42 + k, inverted});
  }
  patterns.push_back({PatternKind::kRandomBlocks, 3, 7, false});  // blocks of 8 words: many per step
  patterns.push_back({PatternKind::kModulo20, 13, 5, false});
  return patterns;
}

// [lo, hi) ranges: within one block, across blocks, unaligned at both ends, and whole blocks.
const std::vector<std::pair<size_t, size_t>> kRanges = {{0, 1}, {3, 7}, {5, 250}, {1, 1031}, {256, 768}, {0, 2048}};
constexpr size_t kWords = 2048 + 16;
constexpr uint64_t kUntouched = 0xdeadbeefcafef00dULL;

void expect_words(const std::vector<uint64_t>& words, size_t lo, size_t hi, const Pattern& p, const char* what) {
  for (size_t i = 0; i < words.size(); ++i) {
    const uint64_t want = i >= lo && i < hi ? pattern_word(p, i) : kUntouched;
    ASSERT_EQ(words[i], want) << what << ": kind " << static_cast<int>(p.kind) << " param " << p.param << " inverted "
                              << p.inverted << " range [" << lo << ", " << hi << ") word " << i;
  }
}

TEST(CpuPatterns, FillWritesEveryWordOfTheRangeAndNothingElse) {
  for (const Pattern& p : every_pattern()) {
    for (auto [lo, hi] : kRanges) {
      std::vector<uint64_t> words(kWords, kUntouched);
      cpu_fill_words(words.data(), lo, hi, p);
      expect_words(words, lo, hi, p, "fill");
    }
  }
}

// Every March rewrite, the inverse and any other pattern (a different kind, or kRandomBlocks whose
// blocks do not line up with the expected pattern's), leaves exactly the per-word reference.
TEST(CpuPatterns, EveryRewriteGivesThePerWordReference) {
  const std::vector<Pattern> patterns = every_pattern();
  for (const Pattern& expect : patterns) {
    std::vector<Pattern> rewrites = {inverse(expect), patterns[(&expect - patterns.data() + 5) % patterns.size()],
                                     Pattern{PatternKind::kRandomBlocks, 2, 9, true}};
    for (const Pattern& then_write : rewrites) {
      for (Direction dir : {Direction::kUp, Direction::kDown}) {
        for (auto [lo, hi] : kRanges) {
          std::vector<uint64_t> words(kWords, kUntouched);
          for (size_t i = lo; i < hi; ++i) words[i] = pattern_word(expect, i);
          MismatchReport r;
          cpu_verify_words(words.data(), lo, hi, expect, &then_write, dir, 3, r);
          EXPECT_EQ(r.mismatches, 0u);
          expect_words(words, lo, hi, then_write, dir == Direction::kUp ? "rewrite up" : "rewrite down");
        }
      }
    }
  }
}

// A fault anywhere, on the first or last word of a range, a block or a vector, is counted once and
// recorded with its index, the expected word and the word read, read-only or with a rewrite, in
// both directions; the rewrite still writes the word.
TEST(CpuPatterns, FaultIsCaughtAtItsIndexByEveryPass) {
  const size_t lo = 1, hi = 1031;
  for (const Pattern& p : every_pattern()) {
    for (size_t bad : {size_t{1}, size_t{3}, size_t{255}, size_t{256}, size_t{700}, size_t{1030}}) {
      for (int rewrite = 0; rewrite < 2; ++rewrite) {
        for (Direction dir : {Direction::kUp, Direction::kDown}) {
          std::vector<uint64_t> words(kWords, kUntouched);
          for (size_t i = lo; i < hi; ++i) words[i] = pattern_word(p, i);
          const uint64_t observed = words[bad] ^ (1ULL << (bad % 64));
          words[bad] = observed;
          const Pattern q = inverse(p);
          MismatchReport r;
          cpu_verify_words(words.data(), lo, hi, p, rewrite ? &q : nullptr, dir, 5, r);
          ASSERT_EQ(r.mismatches, 1u) << "kind " << static_cast<int>(p.kind) << " word " << bad;
          ASSERT_EQ(r.records.size(), 1u);
          EXPECT_EQ(r.records[0].index, bad);
          EXPECT_EQ(r.records[0].expected, pattern_word(p, bad));
          EXPECT_EQ(r.records[0].observed, observed);
          EXPECT_EQ(r.records[0].unit, 5);
          if (rewrite) expect_words(words, lo, hi, q, "rewrite after a fault");
        }
      }
    }
  }
}

TEST(CpuPatterns, CountsEveryFaultAndKeepsTheLowestRecords) {
  const Pattern p{PatternKind::kRandom, 0, 11, false};
  for (Direction dir : {Direction::kUp, Direction::kDown}) {
    std::vector<uint64_t> words(kWords);
    for (size_t i = 0; i < kWords; ++i) words[i] = pattern_word(p, i);
    for (size_t i = 100; i < kWords; i += 37) words[i] = ~words[i];
    MismatchReport r;
    cpu_verify_words(words.data(), 0, kWords, p, nullptr, dir, 0, r);
    EXPECT_EQ(r.mismatches, (kWords - 100 + 36) / 37);
    ASSERT_EQ(r.records.size(), MismatchReport::kMaxRecords);
    for (size_t k = 0; k < r.records.size(); ++k) EXPECT_EQ(r.records[k].index, 100 + 37 * k);
  }
}

// Indices past 2^32, where kRandom changes its key and periodic tables start mid-period: a
// reserved, mostly untouched mapping of 2^32 + 4096 words, of which only the tested pages are used.
TEST(CpuPatterns, WordsPastTwoToTheThirtyTwo) {
  const size_t words = (size_t{1} << 32) + 4096;
  void* map = ::mmap(nullptr, words * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) GTEST_SKIP() << "cannot reserve 32 GiB of address space";
  auto* w = static_cast<uint64_t*>(map);
  const size_t lo = (size_t{1} << 32) - 301, hi = (size_t{1} << 32) + 1003;
  for (const Pattern& p : every_pattern()) {
    cpu_fill_words(w, lo, hi, p);
    for (size_t i = lo; i < hi; ++i) ASSERT_EQ(w[i], pattern_word(p, i)) << "kind " << static_cast<int>(p.kind);
    const Pattern q = inverse(p);
    MismatchReport r;
    cpu_verify_words(w, lo, hi, p, &q, Direction::kDown, 0, r);
    EXPECT_EQ(r.mismatches, 0u);
    for (size_t i = lo; i < hi; ++i) ASSERT_EQ(w[i], pattern_word(q, i)) << "kind " << static_cast<int>(p.kind);
  }
  ::munmap(map, words * 8);
}

}  // namespace
}  // namespace sdc
