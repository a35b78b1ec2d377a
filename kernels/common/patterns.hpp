// Memory test patterns: the expected word at any index is computed on the fly, never read from a
// reference buffer, so a fault cannot corrupt the expectation as well as the data.
#pragma once

#include "kernels/common/random.hpp"
#include "kernels/common/sdc_hd.hpp"

namespace sdc {

enum class PatternKind : uint32_t {
  kOwnAddress = 0,    // word = its own byte offset ^ param (address aliasing, decoder faults)
  kWalkingOnes = 1,   // one set bit that moves with the index and with param (the pass)
  kWalkingZeros = 2,  // one clear bit that moves with the index and with param
  kSolid = 3,         // every word = param
  kCheckerboard = 4,  // alternating param / ~param
  kWalking8 = 5,      // one set bit per byte, the same in every byte, chosen by param
  kModulo20 = 6,      // a random background at index % 20 == param % 20, its inverse elsewhere
  kRandom = 7,        // a random word per index (two 32-bit hashes under a seeded key)
  kRandomBlocks = 8,  // blocks of 2^param words, each with its own kind and background
};
inline constexpr uint32_t kPatternKinds = 9;

struct Pattern {
  PatternKind kind = PatternKind::kSolid;
  uint64_t param = 0;  // background word, walking offset, modulo-20 offset or log2 block size
  uint64_t seed = 0;   // random stream
  bool inverted = false;
};

// The word for one kind; callers that loop over many words dispatch on the kind once.
template <PatternKind K>
SDC_HD uint64_t pattern_word_of(const Pattern& p, uint64_t index);

template <>
SDC_HD uint64_t pattern_word_of<PatternKind::kOwnAddress>(const Pattern& p, uint64_t index) {
  return (index * 8u) ^ p.param;
}
template <>
SDC_HD uint64_t pattern_word_of<PatternKind::kWalkingOnes>(const Pattern& p, uint64_t index) {
  return 1ULL << ((index + p.param) & 63u);
}
template <>
SDC_HD uint64_t pattern_word_of<PatternKind::kWalkingZeros>(const Pattern& p, uint64_t index) {
  return ~(1ULL << ((index + p.param) & 63u));
}
template <>
SDC_HD uint64_t pattern_word_of<PatternKind::kSolid>(const Pattern& p, uint64_t) {
  return p.param;
}
template <>
SDC_HD uint64_t pattern_word_of<PatternKind::kCheckerboard>(const Pattern& p, uint64_t index) {
  return (index & 1u) ? ~p.param : p.param;
}
template <>
SDC_HD uint64_t pattern_word_of<PatternKind::kWalking8>(const Pattern& p, uint64_t) {
  return 0x0101010101010101ULL << (p.param & 7u);
}
// x % 20 from 32-bit halves: 2^32 = 16 (mod 20), so x = hi * 2^32 + lo leaves
// (lo % 20 + 16 * (hi % 20)) % 20. GPUs have no 64-bit divider: x % 20 on 64 bits is a 64-bit
// multiply-high emulated in many instructions, these are three 32-bit multiply-highs.
SDC_HD uint32_t mod20(uint64_t x) {
  const uint32_t lo = static_cast<uint32_t>(x), hi = static_cast<uint32_t>(x >> 32);
  return (lo % 20u + 16u * (hi % 20u)) % 20u;
}
template <>
SDC_HD uint64_t pattern_word_of<PatternKind::kModulo20>(const Pattern& p, uint64_t index) {
  const uint64_t background = mix64(p.seed);
  return mod20(index + 20u - mod20(p.param)) == 0 ? background : ~background;
}
// The key changes every 2^32 words, so the pattern never repeats within a buffer.
SDC_HD uint64_t random_pattern_key(uint64_t seed, uint64_t index) { return mix64(seed + (index >> 32)); }
template <>
SDC_HD uint64_t pattern_word_of<PatternKind::kRandom>(const Pattern& p, uint64_t index) {
  return keyed_random_word(random_pattern_key(p.seed, index), static_cast<uint32_t>(index));
}

// kRandomBlocks: the plain pattern that block `block` uses (never itself kRandomBlocks).
SDC_HD Pattern random_block_pattern(const Pattern& p, uint64_t block) {
  const uint64_t h = counter_random(p.seed ^ 0xb10c5ULL, block);
  Pattern sub;
  switch (h % 6u) {
    case 0: sub.kind = PatternKind::kOwnAddress; break;
    case 1: sub.kind = PatternKind::kWalkingOnes; break;
    case 2: sub.kind = PatternKind::kWalkingZeros; break;
    case 3: sub.kind = PatternKind::kSolid; break;
    case 4: sub.kind = PatternKind::kCheckerboard; break;
    default: sub.kind = PatternKind::kRandom; break;
  }
  sub.param = mix64(h);
  sub.seed = h;
  sub.inverted = p.inverted;
  return sub;
}

SDC_HD uint64_t pattern_word(const Pattern& p, uint64_t index);

template <>
SDC_HD uint64_t pattern_word_of<PatternKind::kRandomBlocks>(const Pattern& p, uint64_t index) {
  Pattern sub = random_block_pattern(p, index >> (p.param & 63u));
  sub.inverted = false;
  return pattern_word(sub, index);
}

SDC_HD uint64_t pattern_word(const Pattern& p, uint64_t index) {
  uint64_t w = 0;
  switch (p.kind) {
    case PatternKind::kOwnAddress: w = pattern_word_of<PatternKind::kOwnAddress>(p, index); break;
    case PatternKind::kWalkingOnes: w = pattern_word_of<PatternKind::kWalkingOnes>(p, index); break;
    case PatternKind::kWalkingZeros: w = pattern_word_of<PatternKind::kWalkingZeros>(p, index); break;
    case PatternKind::kSolid: w = pattern_word_of<PatternKind::kSolid>(p, index); break;
    case PatternKind::kCheckerboard: w = pattern_word_of<PatternKind::kCheckerboard>(p, index); break;
    case PatternKind::kWalking8: w = pattern_word_of<PatternKind::kWalking8>(p, index); break;
    case PatternKind::kModulo20: w = pattern_word_of<PatternKind::kModulo20>(p, index); break;
    case PatternKind::kRandom: w = pattern_word_of<PatternKind::kRandom>(p, index); break;
    case PatternKind::kRandomBlocks: w = pattern_word_of<PatternKind::kRandomBlocks>(p, index); break;
  }
  return p.inverted ? ~w : w;
}

// Words 2v and 2v + 1 of one kind, as the 16-byte accesses of the memory kernels take them:
// at(even) == {pattern_word_of<K>(p, even), pattern_word_of<K>(p, even + 1)}, not inverted.
// kRandom keeps its key while the index stays within one 2^32-word span (a pair never crosses one).
struct WordPair {
  uint64_t lo;
  uint64_t hi;
};
template <PatternKind K>
struct PairSource {
  SDC_HD explicit PairSource(const Pattern& p) : pat(p) {}
  SDC_HD WordPair at(uint64_t even) const { return {pattern_word_of<K>(pat, even), pattern_word_of<K>(pat, even + 1)}; }
  Pattern pat;
};
template <>
struct PairSource<PatternKind::kRandom> {
  SDC_HD explicit PairSource(const Pattern& p) : seed(p.seed), span(0), key(random_pattern_key(p.seed, 0)) {}
  SDC_HD WordPair at(uint64_t even) {
    if ((even >> 32) != span) {
      span = even >> 32;
      key = random_pattern_key(seed, even);
    }
    const uint32_t low = static_cast<uint32_t>(even);
    return {keyed_random_word(key, low), keyed_random_word(key, low + 1)};
  }
  uint64_t seed;
  uint64_t span;  // even >> 32 of the last pair
  uint64_t key;   // random_pattern_key(seed, span << 32)
};

// kModulo20 with its background and offset computed once, and one residue per pair: the odd
// word's index is t + 1, marked when t's residue is 19, or when t + 1 wraps to 0.
template <>
struct PairSource<PatternKind::kModulo20> {
  SDC_HD explicit PairSource(const Pattern& p) : background(mix64(p.seed)), shift(20u - mod20(p.param)) {}
  SDC_HD WordPair at(uint64_t even) const {
    const uint64_t t = even + shift;
    const uint32_t r = mod20(t);
    return {r == 0 ? background : ~background, r == 19 || t == ~0ULL ? background : ~background};
  }
  uint64_t background;
  uint64_t shift;  // 20 - param % 20, as pattern_word_of adds it
};

SDC_HD Pattern inverse(Pattern p) {
  p.inverted = !p.inverted;
  return p;
}

// p with every field that does not change its words folded to one form, and the kinds whose
// complement is another parameter or kind written as an inversion: WalkingZeros(x) is
// ~WalkingOnes(x); Solid, Checkerboard and OwnAddress of ~x are the inverses of those of x.
SDC_HD Pattern canonical_pattern(Pattern p) {
  switch (p.kind) {
    case PatternKind::kWalkingZeros:
      p.kind = PatternKind::kWalkingOnes;
      p.inverted = !p.inverted;
      p.param &= 63u;
      p.seed = 0;
      break;
    case PatternKind::kWalkingOnes:
      p.param &= 63u;
      p.seed = 0;
      break;
    case PatternKind::kSolid:
    case PatternKind::kCheckerboard:
    case PatternKind::kOwnAddress:
      if (p.inverted) p.param = ~p.param;
      p.inverted = false;
      p.seed = 0;
      break;
    case PatternKind::kWalking8:
      p.param &= 7u;
      p.seed = 0;
      break;
    case PatternKind::kModulo20: p.param %= 20u; break;
    case PatternKind::kRandom: p.param = 0; break;
    case PatternKind::kRandomBlocks: p.param &= 63u; break;
  }
  return p;
}

// True when every word of b is the bitwise NOT of a's word at the same index, so a March element
// from a to b rewrites ~word instead of computing b (mem.walking_bits' ones to zeros, too).
SDC_HD bool is_bitwise_inverse(const Pattern& a, const Pattern& b) {
  const Pattern x = canonical_pattern(a), y = canonical_pattern(inverse(b));
  return x.kind == y.kind && x.param == y.param && x.seed == y.seed && x.inverted == y.inverted;
}

}  // namespace sdc
