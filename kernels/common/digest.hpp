// Order-independent 128-bit digest: the sum modulo 2^64 of a bijective mix of each word and its
// index, in two lanes with independent mixes. Any thread may add any word in any order, on any
// device, and get the same digest; a single changed word always changes both lanes.
#pragma once

#include "kernels/common/sdc_hd.hpp"

namespace sdc {

struct Digest128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
};

SDC_HD bool operator==(const Digest128& a, const Digest128& b) { return a.lo == b.lo && a.hi == b.hi; }
SDC_HD bool operator!=(const Digest128& a, const Digest128& b) { return !(a == b); }

// One round of the digest's mix: fold the high half into the low one, then add the low half's full
// 64-bit product with an even constant. Both steps are bijections (the new low half is the old one
// times the odd number k + 1), and the product is one 32x32->64 multiply-add: a single instruction
// on GPUs and a native vector multiply on CPUs, where a 64-bit multiply costs three or more.
SDC_HD uint64_t digest_round(uint64_t x, uint32_t even_k) {
  x ^= x >> 32;
  return x + static_cast<uint64_t>(static_cast<uint32_t>(x)) * even_k;
}

// Three rounds and a final fold: every output bit depends on every input bit, and a flipped input
// bit flips each output bit with probability 1/2 (within sampling noise; digest tests measure it).
// The last constant is near 2^32 so that the last product's high half covers the whole high half.
SDC_HD uint64_t digest_mix(uint64_t x, uint32_t k0, uint32_t k1, uint32_t k2) {
  x = digest_round(digest_round(digest_round(x, k0), k1), k2);
  return x ^ (x >> 32);
}

// Word i's key: a Weyl sequence, so that a loop steps it by one addition (kDigestKeyStep). The key
// makes each word's term depend on its position, so moved or swapped words change the digest.
constexpr uint64_t kDigestKeyStep = 0x9e3779b97f4a7c15ULL;
SDC_HD uint64_t digest_key(uint64_t index) { return (index + 1u) * kDigestKeyStep; }

// Each lane's constants: chosen, and checked by the digest tests, for full avalanche.
constexpr uint32_t kDigestLoK0 = 0xd6e8feb8u, kDigestLoK1 = 0xa0761d64u, kDigestLoK2 = 0xefd540f2u;
constexpr uint32_t kDigestHiK0 = 0xca5a8264u, kDigestHiK1 = 0x9fb21c64u, kDigestHiK2 = 0xfe3fd286u;

// Both terms are bijections of `word` for a fixed key, with independent constants.
SDC_HD uint64_t digest_term_lo_keyed(uint64_t word, uint64_t key) {
  return digest_mix(word ^ key, kDigestLoK0, kDigestLoK1, kDigestLoK2);
}
SDC_HD uint64_t digest_term_hi_keyed(uint64_t word, uint64_t key) {
  return digest_mix(word + key, kDigestHiK0, kDigestHiK1, kDigestHiK2);
}
SDC_HD uint64_t digest_term_lo(uint64_t word, uint64_t index) { return digest_term_lo_keyed(word, digest_key(index)); }
SDC_HD uint64_t digest_term_hi(uint64_t word, uint64_t index) { return digest_term_hi_keyed(word, digest_key(index)); }

// Word `word` at the index whose digest_key is `key`: for loops that step the key themselves.
SDC_HD void digest_add_keyed(Digest128& d, uint64_t word, uint64_t key) {
  d.lo += digest_term_lo_keyed(word, key);
  d.hi += digest_term_hi_keyed(word, key);
}

SDC_HD void digest_add(Digest128& d, uint64_t word, uint64_t index) { digest_add_keyed(d, word, digest_key(index)); }

SDC_HD void digest_merge(Digest128& into, const Digest128& part) {
  into.lo += part.lo;
  into.hi += part.hi;
}

// A byte range is digested as 64-bit little-endian words, word i being bytes [8i, 8i + 8). When the
// length is not a multiple of 8, the last word holds the remaining `n` (1 to 7) bytes in its low
// bytes and zeros above, as if the range were zero-padded to a whole word.
SDC_HD uint64_t digest_tail_word(const unsigned char* bytes, unsigned n) {
  uint64_t word = 0;
  for (unsigned i = 0; i < n; ++i) word |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return word;
}

// How the digest kernel splits `words` 64-bit words at byte `address` (a multiple of 8) for
// 16-byte loads: `head` words (0 or 1) before the first 16-byte boundary, then `pairs` vectors of
// two words, then `rest` words (0 or 1). Every word is in exactly one part.
struct VectorSplit {
  uint64_t head = 0;
  uint64_t pairs = 0;
  uint64_t rest = 0;
};

SDC_HD VectorSplit split_into_vectors(uint64_t address, uint64_t words) {
  VectorSplit s;
  s.head = (address % 16 != 0 && words > 0) ? 1 : 0;
  s.pairs = (words - s.head) / 2;
  s.rest = words - s.head - 2 * s.pairs;
  return s;
}

}  // namespace sdc
