#include "host/cpu_patterns.hpp"

#include <algorithm>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sdc {
namespace {

// Expected words generated per step: 2 KiB, kept in L1 next to the data being checked.
constexpr size_t kBlockWords = 256;

// Word k of a block starting at `lo`: pattern_word_of<K>(p, lo + k) with what is constant over
// a block hoisted out, so the loops vectorise. Tests check every word against pattern_word.
template <PatternKind K>
struct BlockPattern {
  BlockPattern(const Pattern& p, size_t) : pat(p) {}
  uint64_t word(size_t lo, size_t k) const { return pattern_word_of<K>(pat, lo + k); }
  const Pattern pat;  // a copy: stores to the buffer cannot alias it
};

// Patterns that repeat every kPeriod words keep one period in a table; a block is then plain
// copies of it, which vectorise (a variable shift or a modulo per word does not).
template <size_t kPeriod>
struct PeriodicBlock {
  static constexpr size_t period = kPeriod;
  uint64_t table[kPeriod];  // word k of the block is table[k % kPeriod]
};

template <bool kOnes>
struct WalkingBlock : PeriodicBlock<64> {
  WalkingBlock(const Pattern& p, size_t lo) {
    for (unsigned k = 0; k < 64; ++k) {
      const uint64_t one = 1ULL << ((lo + k + p.param) & 63u);
      table[k] = kOnes ? one : ~one;
    }
  }
};

template <>
struct BlockPattern<PatternKind::kWalkingOnes> : WalkingBlock<true> {
  using WalkingBlock<true>::WalkingBlock;
};

template <>
struct BlockPattern<PatternKind::kWalkingZeros> : WalkingBlock<false> {
  using WalkingBlock<false>::WalkingBlock;
};

template <>
struct BlockPattern<PatternKind::kModulo20> : PeriodicBlock<20> {
  BlockPattern(const Pattern& p, size_t lo) {
    for (unsigned k = 0; k < 20; ++k) table[k] = pattern_word_of<PatternKind::kModulo20>(p, lo + k);
  }
};

template <>
struct BlockPattern<PatternKind::kRandom> {
  // The key changes every 2^32 words; no block crosses such a boundary (for_each_block).
  BlockPattern(const Pattern& p, size_t lo) : key(random_pattern_key(p.seed, lo)) {}
  uint64_t word(size_t lo, size_t k) const { return keyed_random_word(key, static_cast<uint32_t>(lo + k)); }
  const uint64_t key;
};

template <typename T, typename = void>
struct is_periodic : std::false_type {};
template <typename T>
struct is_periodic<T, std::void_t<decltype(T::period)>> : std::true_type {};

// Calls f(k0, m, word) for consecutive runs [k0, k0 + m) of a block, where word(j) is word k0 + j.
// Periodic patterns go in runs of one period, each a copy of the period table.
template <PatternKind K, typename F>
__attribute__((always_inline)) inline void for_each_word_run(const BlockPattern<K>& block, size_t lo, size_t n, F&& f) {
  if constexpr (is_periodic<BlockPattern<K>>::value) {
    constexpr size_t period = BlockPattern<K>::period;
    for (size_t k0 = 0; k0 < n; k0 += period) {
      f(k0, std::min(period, n - k0), [&](size_t j) { return block.table[j]; });
    }
  } else {
    f(0, n, [&](size_t j) { return block.word(lo, j); });
  }
}

template <PatternKind K>
__attribute__((always_inline)) inline void expected_block(const Pattern& p, size_t lo, size_t n, uint64_t* out) {
  const BlockPattern<K> block(p, lo);
  const uint64_t invert = p.inverted ? ~0ULL : 0;
  for_each_word_run(block, lo, n, [&](size_t k0, size_t m, auto word) {
    for (size_t j = 0; j < m; ++j) out[k0 + j] = word(j) ^ invert;
  });
}

// OR of (observed ^ expected) over a block: zero when the block is clean. Generating and comparing
// in one loop keeps a read-only pass at memory speed.
template <PatternKind K>
__attribute__((always_inline)) inline uint64_t block_difference(const Pattern& p, size_t lo, size_t n,
                                                                const uint64_t* w) {
  const BlockPattern<K> block(p, lo);
  const uint64_t invert = p.inverted ? ~0ULL : 0;
  uint64_t diff = 0;
  for_each_word_run(block, lo, n, [&](size_t k0, size_t m, auto word) {
    for (size_t j = 0; j < m; ++j) diff |= w[k0 + j] ^ word(j) ^ invert;
  });
  return diff;
}

using GenerateFn = void (*)(const Pattern&, size_t, size_t, uint64_t*);
using DifferenceFn = uint64_t (*)(const Pattern&, size_t, size_t, const uint64_t*);

struct PatternKernels {
  GenerateFn generate;
  DifferenceFn difference;
};

template <PatternKind K>
void generate_portable(const Pattern& p, size_t lo, size_t n, uint64_t* out) {
  expected_block<K>(p, lo, n, out);
}
template <PatternKind K>
uint64_t difference_portable(const Pattern& p, size_t lo, size_t n, const uint64_t* w) {
  return block_difference<K>(p, lo, n, w);
}

#if defined(__x86_64__)
// The same loops compiled for AVX2, whose 64-bit vector shifts and multiplies vectorise them.
template <PatternKind K>
__attribute__((target("avx2"))) void generate_avx2(const Pattern& p, size_t lo, size_t n, uint64_t* out) {
  expected_block<K>(p, lo, n, out);
}
template <PatternKind K>
__attribute__((target("avx2"))) uint64_t difference_avx2(const Pattern& p, size_t lo, size_t n, const uint64_t* w) {
  return block_difference<K>(p, lo, n, w);
}

bool have_avx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}
#endif

template <PatternKind K>
PatternKernels kernels_of() {
#if defined(__x86_64__)
  if (have_avx2()) return {&generate_avx2<K>, &difference_avx2<K>};
#endif
  return {&generate_portable<K>, &difference_portable<K>};
}

// The kernels for a plain kind (kRandomBlocks is split into runs of plain kinds before this).
PatternKernels kernels_for(PatternKind kind) {
  switch (kind) {
    case PatternKind::kOwnAddress: return kernels_of<PatternKind::kOwnAddress>();
    case PatternKind::kWalkingOnes: return kernels_of<PatternKind::kWalkingOnes>();
    case PatternKind::kWalkingZeros: return kernels_of<PatternKind::kWalkingZeros>();
    case PatternKind::kSolid: return kernels_of<PatternKind::kSolid>();
    case PatternKind::kCheckerboard: return kernels_of<PatternKind::kCheckerboard>();
    case PatternKind::kWalking8: return kernels_of<PatternKind::kWalking8>();
    case PatternKind::kModulo20: return kernels_of<PatternKind::kModulo20>();
    case PatternKind::kRandom: return kernels_of<PatternKind::kRandom>();
    case PatternKind::kRandomBlocks: return kernels_of<PatternKind::kRandomBlocks>();
  }
  return kernels_of<PatternKind::kSolid>();
}

// Calls f(pattern, lo, hi) over [lo, hi) in runs of one plain pattern, in `dir` order: one run
// for a plain pattern, one per block for kRandomBlocks.
template <typename F>
void for_each_run(const Pattern& p, size_t lo, size_t hi, Direction dir, F&& f) {
  if (p.kind != PatternKind::kRandomBlocks) {
    f(p, lo, hi);
    return;
  }
  const unsigned shift = p.param & 63u;
  const size_t first = lo >> shift, last = (hi - 1) >> shift;
  for (size_t k = 0; k <= last - first; ++k) {
    const size_t block = dir == Direction::kUp ? first + k : last - k;
    f(random_block_pattern(p, block), std::max(lo, block << shift), std::min(hi, (block + 1) << shift));
  }
}

// Calls f(block_lo, n) over [lo, hi) in `dir` order, in blocks that never cross a multiple of
// kBlockWords (so never a 2^32-word boundary either).
template <typename F>
void for_each_block(size_t lo, size_t hi, Direction dir, F&& f) {
  const size_t first = lo / kBlockWords, last = (hi - 1) / kBlockWords;
  for (size_t b = 0; b <= last - first; ++b) {
    const size_t block = dir == Direction::kUp ? first + b : last - b;
    const size_t block_lo = std::max(lo, block * kBlockWords);
    f(block_lo, std::min(hi, (block + 1) * kBlockWords) - block_lo);
  }
}

// Non-temporal stores: a fill is not read back soon, so it should neither evict the cache nor
// pay for reading the lines it overwrites.
void stream_block(uint64_t* dst, const uint64_t* src, size_t n) {
#if defined(__x86_64__)
  size_t k = 0;
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 && n > 0) {
    _mm_stream_si64(reinterpret_cast<long long*>(dst), static_cast<long long>(src[0]));
    k = 1;
  }
  for (; k + 2 <= n; k += 2) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)));
  }
  if (k < n) _mm_stream_si64(reinterpret_cast<long long*>(dst + k), static_cast<long long>(src[k]));
#else
  std::copy(src, src + n, dst);
#endif
}

void stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

void note(MismatchReport& r, size_t i, uint64_t expected, uint64_t observed, int core) {
  ++r.mismatches;
  MismatchRecord rec;
  rec.index = i;
  rec.expected = expected;
  rec.observed = observed;
  rec.unit = core;
  r.keep(rec);
}

bool is_inverse(const Pattern& a, const Pattern& b) {
  return a.kind == b.kind && a.param == b.param && a.seed == b.seed && a.inverted != b.inverted;
}

}  // namespace

void cpu_fill_words(uint64_t* words, size_t lo, size_t hi, const Pattern& p) {
  alignas(64) uint64_t expected[kBlockWords];
  for_each_run(p, lo, hi, Direction::kUp, [&](const Pattern& run, size_t run_lo, size_t run_hi) {
    const PatternKernels kernels = kernels_for(run.kind);
    for_each_block(run_lo, run_hi, Direction::kUp, [&](size_t block_lo, size_t n) {
      kernels.generate(run, block_lo, n, expected);
      stream_block(words + block_lo, expected, n);
    });
  });
  stream_fence();
}

void cpu_verify_words(uint64_t* words, size_t lo, size_t hi, const Pattern& expect, const Pattern* then_write,
                      Direction dir, int core, MismatchReport& report) {
  alignas(64) uint64_t expected[kBlockWords];
  const bool rewrite_inverse = then_write != nullptr && is_inverse(expect, *then_write);
  for_each_run(expect, lo, hi, dir, [&](const Pattern& run, size_t run_lo, size_t run_hi) {
    const PatternKernels kernels = kernels_for(run.kind);
    for_each_block(run_lo, run_hi, dir, [&](size_t block_lo, size_t n) {
      const uint64_t* w = words + block_lo;
      if (kernels.difference(run, block_lo, n, w) != 0) {
        kernels.generate(run, block_lo, n, expected);
        for (size_t k = 0; k < n; ++k) {
          if (w[k] != expected[k]) note(report, block_lo + k, expected[k], w[k], core);
        }
      }
      if (then_write == nullptr) return;
      // A March element. Caches fetch and write back whole lines, so memory sees the same order
      // when a block is checked and then rewritten as when each word is: both steps vectorise.
      if (rewrite_inverse) {
        kernels.generate(inverse(run), block_lo, n, words + block_lo);
      } else {
        for (size_t k = 0; k < n; ++k) words[block_lo + k] = pattern_word(*then_write, block_lo + k);
      }
    });
  });
}

}  // namespace sdc
