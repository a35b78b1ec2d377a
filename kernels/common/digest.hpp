// Order-independent 128-bit digest: the sum modulo 2^64 of a bijective mix of each word and its
// index, in two lanes with independent mixes. Any thread may add any word in any order, on any
// device, and get the same digest; a single changed word always changes both lanes.
#pragma once

#include "kernels/common/random.hpp"
#include "kernels/common/sdc_hd.hpp"

namespace sdc {

struct Digest128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
};

SDC_HD bool operator==(const Digest128& a, const Digest128& b) { return a.lo == b.lo && a.hi == b.hi; }
SDC_HD bool operator!=(const Digest128& a, const Digest128& b) { return !(a == b); }

// MurmurHash3's 64-bit finaliser: a second bijection, independent of mix64.
SDC_HD uint64_t fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Both terms are bijections of `word` for a fixed index.
SDC_HD uint64_t digest_term_lo(uint64_t word, uint64_t index) { return mix64(word ^ fmix64(index + 1u)); }
SDC_HD uint64_t digest_term_hi(uint64_t word, uint64_t index) {
  return fmix64(word * 0x9e3779b97f4a7c15ULL + mix64(index ^ 0x5bd1e9955bd1e995ULL));
}

SDC_HD void digest_add(Digest128& d, uint64_t word, uint64_t index) {
  d.lo += digest_term_lo(word, index);
  d.hi += digest_term_hi(word, index);
}

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

}  // namespace sdc
