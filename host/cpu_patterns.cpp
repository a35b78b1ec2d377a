#include "host/cpu_patterns.hpp"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sdc {
namespace {

// Words per step: 2 KiB of data, whose expected words stay in L1.
constexpr size_t kBlockWords = 256;
constexpr size_t kLineWords = 8;
// A block whose expected words are computed (kRandom) first prefetches the block this many blocks
// ahead: computing them slows the loads that would otherwise keep memory busy.
constexpr size_t kPrefetchBlocks = 2;

// A block's expected words: window[k] ^ flip for k in [0, n). Every kind but kRandom is a window
// into a table made once per process, XOR a constant for the block, so a pass compares and
// writes at memory speed without computing a word; kRandom is computed into a scratch block.
struct BlockWords {
  const uint64_t* window;
  uint64_t flip;
};

struct Tables {
  uint64_t zeros[kBlockWords];
  uint64_t alternating[kBlockWords + 1];  // 0, ~0, 0, ...
  uint64_t walking[kBlockWords + 64];     // 1 << (j % 64)
  uint64_t offsets[kBlockWords];          // j * 8
  uint64_t modulo20[kBlockWords + 20];    // 0 where j % 20 == 0, ~0 elsewhere
};

const Tables& tables() {
  static const Tables t = [] {
    Tables m{};
    for (size_t j = 0; j < kBlockWords + 1; ++j) m.alternating[j] = j % 2 ? ~0ULL : 0;
    for (size_t j = 0; j < kBlockWords + 64; ++j) m.walking[j] = 1ULL << (j % 64);
    for (size_t j = 0; j < kBlockWords; ++j) m.offsets[j] = j * 8;
    for (size_t j = 0; j < kBlockWords + 20; ++j) m.modulo20[j] = j % 20 == 0 ? 0 : ~0ULL;
    return m;
  }();
  return t;
}

// kRandom's words [lo, lo + n) into `out`, not inverted: the two 32-bit hashes of each word as two
// 32-bit arrays, which vectorise, then joined.
void random_words_portable(const Pattern& p, size_t lo, size_t n, uint64_t* out) {
  const uint64_t key = random_pattern_key(p.seed, lo);
  const uint32_t key_lo = static_cast<uint32_t>(key), key_hi = static_cast<uint32_t>(key >> 32);
  const uint32_t first = static_cast<uint32_t>(lo), count = static_cast<uint32_t>(n);
  alignas(64) uint32_t low[kBlockWords], high[kBlockWords];
  for (uint32_t k = 0; k < count; ++k) {
    low[k] = hash32((first + k) ^ key_lo);
    high[k] = hash32((first + k) ^ key_hi);
  }
  for (uint32_t k = 0; k < count; ++k) out[k] = static_cast<uint64_t>(low[k]) | (static_cast<uint64_t>(high[k]) << 32);
}

// The memory side of a pass, the same for every pattern: `words` is the buffer's block, and
// window[k] ^ flip its expected (or new) words. Each visits the block in `dir` order.
struct MemoryOps {
  // Non-temporal stores: a fill is not read back soon, so it should neither evict the cache nor
  // pay for reading the lines it overwrites. Always ascending.
  void (*stream)(uint64_t* words, const uint64_t* window, uint64_t flip, size_t n);
  // The OR of (words[k] ^ window[k] ^ flip): zero when the block is clean.
  uint64_t (*difference)(const uint64_t* words, const uint64_t* window, uint64_t flip, size_t n, Direction dir);
  // words[k] = window[k] ^ flip.
  void (*write)(uint64_t* words, const uint64_t* window, uint64_t flip, size_t n, Direction dir);
  void (*random_words)(const Pattern& p, size_t lo, size_t n, uint64_t* out);
  // kRandom's words into `out` (not inverted) while the block is compared with them (inverted if
  // p is), in `dir` order, so that computing them overlaps the reads; returns the difference.
  uint64_t (*random_difference)(const Pattern& p, size_t lo, size_t n, const uint64_t* words, Direction dir,
                                uint64_t* out);
};

void stream_portable(uint64_t* words, const uint64_t* window, uint64_t flip, size_t n) {
  for (size_t k = 0; k < n; ++k) {
#if defined(__x86_64__)
    _mm_stream_si64(reinterpret_cast<long long*>(words + k), static_cast<long long>(window[k] ^ flip));
#else
    words[k] = window[k] ^ flip;
#endif
  }
}

uint64_t difference_portable(const uint64_t* words, const uint64_t* window, uint64_t flip, size_t n, Direction dir) {
  uint64_t diff = 0;
  for (size_t j = 0; j < n; ++j) {
    const size_t k = dir == Direction::kUp ? j : n - 1 - j;
    diff |= words[k] ^ window[k] ^ flip;
  }
  return diff;
}

uint64_t random_difference_portable(const Pattern& p, size_t lo, size_t n, const uint64_t* words, Direction dir,
                                    uint64_t* out) {
  random_words_portable(p, lo, n, out);
  return difference_portable(words, out, p.inverted ? ~0ULL : 0, n, dir);
}

void write_portable(uint64_t* words, const uint64_t* window, uint64_t flip, size_t n, Direction dir) {
  for (size_t j = 0; j < n; ++j) {
    const size_t k = dir == Direction::kUp ? j : n - 1 - j;
    words[k] = window[k] ^ flip;
  }
}

#if defined(__x86_64__)
// With AVX2: 32-byte vectors of 4 words, the words past the last whole vector one by one (first,
// when descending).
constexpr size_t kVectorWords = 4;

__attribute__((target("avx2"), always_inline)) inline __m256i load(const uint64_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

__attribute__((target("avx2"))) void stream_avx2(uint64_t* words, const uint64_t* window, uint64_t flip, size_t n) {
  const __m256i flips = _mm256_set1_epi64x(static_cast<long long>(flip));
  size_t k = 0;
  for (; k < n && reinterpret_cast<uintptr_t>(words + k) % 32 != 0; ++k) {
    _mm_stream_si64(reinterpret_cast<long long*>(words + k), static_cast<long long>(window[k] ^ flip));
  }
  for (; k + kVectorWords <= n; k += kVectorWords) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(words + k), _mm256_xor_si256(load(window + k), flips));
  }
  for (; k < n; ++k) _mm_stream_si64(reinterpret_cast<long long*>(words + k), static_cast<long long>(window[k] ^ flip));
}

__attribute__((target("avx2"))) uint64_t difference_avx2(const uint64_t* words, const uint64_t* window, uint64_t flip,
                                                         size_t n, Direction dir) {
  const size_t whole = n / kVectorWords * kVectorWords;
  const __m256i flips = _mm256_set1_epi64x(static_cast<long long>(flip));
  __m256i diff = _mm256_setzero_si256();
  uint64_t tail = 0;
  if (dir == Direction::kUp) {
    for (size_t k = 0; k < whole; k += kVectorWords) {
      diff = _mm256_or_si256(diff, _mm256_xor_si256(load(words + k), _mm256_xor_si256(load(window + k), flips)));
    }
    for (size_t k = whole; k < n; ++k) tail |= words[k] ^ window[k] ^ flip;
  } else {
    for (size_t k = n; k > whole; --k) tail |= words[k - 1] ^ window[k - 1] ^ flip;
    for (size_t k = whole; k > 0; k -= kVectorWords) {
      const size_t v = k - kVectorWords;
      diff = _mm256_or_si256(diff, _mm256_xor_si256(load(words + v), _mm256_xor_si256(load(window + v), flips)));
    }
  }
  return tail | !_mm256_testz_si256(diff, diff);
}

__attribute__((target("avx2"))) void write_avx2(uint64_t* words, const uint64_t* window, uint64_t flip, size_t n,
                                                Direction dir) {
  const size_t whole = n / kVectorWords * kVectorWords;
  const __m256i flips = _mm256_set1_epi64x(static_cast<long long>(flip));
  auto* out = reinterpret_cast<__m256i_u*>(words);
  if (dir == Direction::kUp) {
    for (size_t k = 0; k < whole; k += kVectorWords) {
      _mm256_storeu_si256(out + k / kVectorWords, _mm256_xor_si256(load(window + k), flips));
    }
    for (size_t k = whole; k < n; ++k) words[k] = window[k] ^ flip;
  } else {
    for (size_t k = n; k > whole; --k) words[k - 1] = window[k - 1] ^ flip;
    for (size_t k = whole; k > 0; k -= kVectorWords) {
      _mm256_storeu_si256(out + k / kVectorWords - 1, _mm256_xor_si256(load(window + k - kVectorWords), flips));
    }
  }
}

// kRandom by hand, 8 words a step: their low halves hashed in one vector and their high halves in
// another. Lanes hold words 0, 1, 4, 5 | 2, 3, 6, 7 of the step, so that interleaving the two
// hashes within each 128-bit lane gives words 0-3 and then 4-7 in order.
__attribute__((target("avx2"), always_inline)) inline __m256i hash32_avx2(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x846ca68bu)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// kRandom's words first .. first + 7 under `key`: words 0-3 in `lower`, 4-7 in `upper`.
__attribute__((target("avx2"), always_inline)) inline void random_step8(uint64_t key, uint32_t first, __m256i& lower,
                                                                        __m256i& upper) {
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  const __m256i index = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), order);
  const __m256i low = hash32_avx2(_mm256_xor_si256(index, _mm256_set1_epi32(static_cast<int>(key))));
  const __m256i high = hash32_avx2(_mm256_xor_si256(index, _mm256_set1_epi32(static_cast<int>(key >> 32))));
  lower = _mm256_unpacklo_epi32(low, high);
  upper = _mm256_unpackhi_epi32(low, high);
}

__attribute__((target("avx2"))) void random_words_avx2(const Pattern& p, size_t lo, size_t n, uint64_t* out) {
  const uint64_t key = random_pattern_key(p.seed, lo);
  const uint32_t first = static_cast<uint32_t>(lo);
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256i lower, upper;
    random_step8(key, first + static_cast<uint32_t>(k), lower, upper);
    _mm256_storeu_si256(reinterpret_cast<__m256i_u*>(out + k), lower);
    _mm256_storeu_si256(reinterpret_cast<__m256i_u*>(out + k + 4), upper);
  }
  for (; k < n; ++k) out[k] = keyed_random_word(key, static_cast<uint32_t>(first + k));
}

// Steps of 8 words as random_words_avx2 makes them, each compared as it is made; descending, the
// words past the last whole step first, then the steps and their two vectors from the top.
__attribute__((target("avx2"))) uint64_t random_difference_avx2(const Pattern& p, size_t lo, size_t n,
                                                                const uint64_t* words, Direction dir, uint64_t* out) {
  const uint64_t key = random_pattern_key(p.seed, lo);
  const uint64_t invert = p.inverted ? ~0ULL : 0;
  const __m256i flips = _mm256_set1_epi64x(static_cast<long long>(invert));
  const uint32_t first = static_cast<uint32_t>(lo);
  const size_t whole = n / 8 * 8;
  __m256i diff = _mm256_setzero_si256();
  uint64_t tail = 0;
  if (dir == Direction::kDown) {
    for (size_t k = n; k > whole; --k) {
      out[k - 1] = keyed_random_word(key, static_cast<uint32_t>(first + k - 1));
      tail |= words[k - 1] ^ out[k - 1] ^ invert;
    }
  }
  for (size_t j = 0; j < whole; j += 8) {
    const size_t k = dir == Direction::kUp ? j : whole - 8 - j;
    __m256i lower, upper;
    random_step8(key, first + static_cast<uint32_t>(k), lower, upper);
    _mm256_storeu_si256(reinterpret_cast<__m256i_u*>(out + k), lower);
    _mm256_storeu_si256(reinterpret_cast<__m256i_u*>(out + k + 4), upper);
    const bool up = dir == Direction::kUp;
    diff = _mm256_or_si256(
        diff, _mm256_xor_si256(load(words + k + (up ? 0 : 4)), _mm256_xor_si256(up ? lower : upper, flips)));
    diff = _mm256_or_si256(
        diff, _mm256_xor_si256(load(words + k + (up ? 4 : 0)), _mm256_xor_si256(up ? upper : lower, flips)));
  }
  if (dir == Direction::kUp) {
    for (size_t k = whole; k < n; ++k) {
      out[k] = keyed_random_word(key, static_cast<uint32_t>(first + k));
      tail |= words[k] ^ out[k] ^ invert;
    }
  }
  return tail | !_mm256_testz_si256(diff, diff);
}

bool have_avx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}
#endif

MemoryOps memory_ops() {
#if defined(__x86_64__)
  if (have_avx2()) return {&stream_avx2, &difference_avx2, &write_avx2, &random_words_avx2, &random_difference_avx2};
#endif
  return {&stream_portable, &difference_portable, &write_portable, &random_words_portable, &random_difference_portable};
}

// Words [lo, lo + n) of a plain kind, within one block. The tables hold each kind's words at
// indices that agree with lo + k modulo the kind's period (kBlockWords for own-address, whose
// block base only sets bits above the offset's, and so XORs on); `scratch` takes kRandom's.
BlockWords plain_block(const Pattern& p, size_t lo, size_t n, const MemoryOps& ops, uint64_t* scratch) {
  const Tables& t = tables();
  const uint64_t invert = p.inverted ? ~0ULL : 0;
  switch (p.kind) {
    case PatternKind::kOwnAddress: {
      const size_t base = lo / kBlockWords * kBlockWords;
      return {t.offsets + (lo - base), (base * 8u) ^ p.param ^ invert};
    }
    case PatternKind::kWalkingOnes: return {t.walking + ((lo + p.param) & 63u), invert};
    case PatternKind::kWalkingZeros: return {t.walking + ((lo + p.param) & 63u), ~invert};
    case PatternKind::kSolid: return {t.zeros, p.param ^ invert};
    case PatternKind::kCheckerboard: return {t.alternating + lo % 2, p.param ^ invert};
    case PatternKind::kWalking8: return {t.zeros, pattern_word_of<PatternKind::kWalking8>(p, lo) ^ invert};
    case PatternKind::kModulo20: return {t.modulo20 + (lo + 20u - p.param % 20u) % 20u, mix64(p.seed) ^ invert};
    case PatternKind::kRandom:
    case PatternKind::kRandomBlocks: break;
  }
  ops.random_words(p, lo, n, scratch);
  return {scratch, invert};
}

// The plain pattern of words [lo, lo + n) where they have one, else p (kRandomBlocks).
Pattern block_pattern(const Pattern& p, size_t lo, size_t n) {
  if (p.kind != PatternKind::kRandomBlocks) return p;
  const unsigned shift = p.param & 63u;
  return lo >> shift == (lo + n - 1) >> shift ? random_block_pattern(p, lo >> shift) : p;
}

// Words [lo, lo + n) of any pattern, within one block. kRandomBlocks is one plain pattern where
// the block lies in one of its blocks, else its runs are written out into `scratch`.
BlockWords block_words(const Pattern& p, size_t lo, size_t n, const MemoryOps& ops, uint64_t* scratch) {
  const Pattern plain = block_pattern(p, lo, n);
  if (plain.kind != PatternKind::kRandomBlocks) return plain_block(plain, lo, n, ops, scratch);
  const unsigned shift = p.param & 63u;
  for (size_t run_lo = lo; run_lo < lo + n;) {
    const size_t run_hi = std::min(lo + n, ((run_lo >> shift) + 1) << shift);
    uint64_t* out = scratch + (run_lo - lo);
    const BlockWords run = plain_block(random_block_pattern(p, run_lo >> shift), run_lo, run_hi - run_lo, ops, out);
    for (size_t k = 0; k < run_hi - run_lo; ++k) out[k] = run.window[k] ^ run.flip;
    run_lo = run_hi;
  }
  return {scratch, 0};
}

bool computes_words(const Pattern& p) { return p.kind == PatternKind::kRandom || p.kind == PatternKind::kRandomBlocks; }

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

// Prefetches the block kPrefetchBlocks ahead of the one at `block_lo`, line by line in `dir`
// order (the other order confuses the hardware's own prefetcher), if it lies within [lo, hi).
void prefetch_ahead(const uint64_t* words, size_t lo, size_t hi, size_t block_lo, Direction dir) {
  const size_t distance = kPrefetchBlocks * kBlockWords;
  if (dir == Direction::kUp ? block_lo + distance + kBlockWords > hi : block_lo < lo + distance) return;
  const uint64_t* ahead = words + (dir == Direction::kUp ? block_lo + distance : block_lo - distance);
  for (size_t j = 0; j < kBlockWords; j += kLineWords) {
    __builtin_prefetch(ahead + (dir == Direction::kUp ? j : kBlockWords - kLineWords - j));
  }
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
  if (lo >= hi) return;
  const MemoryOps ops = memory_ops();
  alignas(64) uint64_t scratch[kBlockWords];
  for_each_block(lo, hi, Direction::kUp, [&](size_t block_lo, size_t n) {
    const BlockWords b = block_words(p, block_lo, n, ops, scratch);
    ops.stream(words + block_lo, b.window, b.flip, n);
  });
  stream_fence();
}

void cpu_verify_words(uint64_t* words, size_t lo, size_t hi, const Pattern& expect, const Pattern* then_write,
                      Direction dir, int core, MismatchReport& report) {
  if (lo >= hi) return;
  const MemoryOps ops = memory_ops();
  alignas(64) uint64_t scratch[kBlockWords], rewrite_scratch[kBlockWords];
  // The inverse, the rewrite of every March element, is the expected block with every bit flipped.
  const bool rewrite_inverse = then_write != nullptr && is_inverse(expect, *then_write);
  const bool prefetch = computes_words(expect) || (then_write != nullptr && computes_words(*then_write));
  for_each_block(lo, hi, dir, [&](size_t block_lo, size_t n) {
    uint64_t* w = words + block_lo;
    if (prefetch) prefetch_ahead(words, lo, hi, block_lo, dir);
    const Pattern plain = block_pattern(expect, block_lo, n);
    BlockWords e{scratch, plain.inverted ? ~0ULL : 0};
    uint64_t diff = 0;
    if (plain.kind == PatternKind::kRandom) {
      diff = ops.random_difference(plain, block_lo, n, w, dir, scratch);
    } else {
      e = block_words(plain, block_lo, n, ops, scratch);
      diff = ops.difference(w, e.window, e.flip, n, dir);
    }
    if (diff != 0) {
      for (size_t k = 0; k < n; ++k) {
        const uint64_t expected = e.window[k] ^ e.flip;
        if (w[k] != expected) note(report, block_lo + k, expected, w[k], core);
      }
    }
    if (then_write == nullptr) return;
    // A March element. Caches fetch and write back whole lines, so memory sees the lines of a
    // block read and then rewritten in `dir` order either way; each word is read before it is
    // rewritten.
    const BlockWords r =
        rewrite_inverse ? BlockWords{e.window, ~e.flip} : block_words(*then_write, block_lo, n, ops, rewrite_scratch);
    ops.write(w, r.window, r.flip, n, dir);
  });
}

}  // namespace sdc
