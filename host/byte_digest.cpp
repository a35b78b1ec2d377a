#include "host/byte_digest.hpp"

#include <cstdint>
#include <cstring>

#include "host/error.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sdc {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "digest words are little-endian, as on every GPU");

uint64_t load_word(const unsigned char* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof word);  // any alignment
  return word;
}

// Words [first, words) term by term, with the SDC_HD definition itself.
void add_words(Digest128& d, const unsigned char* p, uint64_t first, uint64_t words) {
  for (uint64_t i = first; i < words; ++i) digest_add(d, load_word(p + 8 * i), i);
}

#if defined(__x86_64__)
// digest_round and digest_mix on four words at once. AVX2's 32x32->64 multiply is the round's
// product exactly; compilers turn the portable loop's multiplies into shift-and-add chains instead.
__attribute__((target("avx2"))) inline __m256i round4(__m256i x, __m256i even_k) {
  x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 32));
  return _mm256_add_epi64(x, _mm256_mul_epu32(x, even_k));
}

struct MixConstants4 {
  __m256i k0, k1, k2;
};

__attribute__((target("avx2"))) inline __m256i mix4(__m256i x, const MixConstants4& k) {
  x = round4(round4(round4(x, k.k0), k.k1), k.k2);
  return _mm256_xor_si256(x, _mm256_srli_epi64(x, 32));
}

// Eight words per iteration in two independent chains, so the multiplies of one overlap the
// other's; keys step by addition (digest_key is a Weyl sequence). The leftover words, fewer
// than eight, take the portable path with their own indices.
__attribute__((target("avx2"))) Digest128 digest_words_avx2(const unsigned char* p, uint64_t words) {
  const MixConstants4 lo_k{_mm256_set1_epi64x(kDigestLoK0), _mm256_set1_epi64x(kDigestLoK1),
                           _mm256_set1_epi64x(kDigestLoK2)};
  const MixConstants4 hi_k{_mm256_set1_epi64x(kDigestHiK0), _mm256_set1_epi64x(kDigestHiK1),
                           _mm256_set1_epi64x(kDigestHiK2)};
  const auto key = [](uint64_t i) { return static_cast<long long>(digest_key(i)); };
  __m256i key0 = _mm256_set_epi64x(key(3), key(2), key(1), key(0));
  __m256i key1 = _mm256_set_epi64x(key(7), key(6), key(5), key(4));
  const __m256i step = _mm256_set1_epi64x(static_cast<long long>(8 * kDigestKeyStep));
  __m256i lo0 = _mm256_setzero_si256(), lo1 = lo0, hi0 = lo0, hi1 = lo0;
  uint64_t i = 0;
  for (; i + 8 <= words; i += 8) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * i));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * i + 32));
    lo0 = _mm256_add_epi64(lo0, mix4(_mm256_xor_si256(w0, key0), lo_k));
    lo1 = _mm256_add_epi64(lo1, mix4(_mm256_xor_si256(w1, key1), lo_k));
    hi0 = _mm256_add_epi64(hi0, mix4(_mm256_add_epi64(w0, key0), hi_k));
    hi1 = _mm256_add_epi64(hi1, mix4(_mm256_add_epi64(w1, key1), hi_k));
    key0 = _mm256_add_epi64(key0, step);
    key1 = _mm256_add_epi64(key1, step);
  }
  alignas(32) uint64_t lo[4], hi[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lo), _mm256_add_epi64(lo0, lo1));
  _mm256_store_si256(reinterpret_cast<__m256i*>(hi), _mm256_add_epi64(hi0, hi1));
  Digest128 d;
  d.lo = lo[0] + lo[1] + lo[2] + lo[3];
  d.hi = hi[0] + hi[1] + hi[2] + hi[3];
  add_words(d, p, i, words);
  return d;
}
#endif

Digest128 digest_words(const unsigned char* p, uint64_t words) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return digest_words_avx2(p, words);
#endif
  Digest128 d;
  add_words(d, p, 0, words);
  return d;
}

}  // namespace

Digest128 digest_host_bytes(const void* data, size_t bytes) {
  if (data == nullptr) throw InputError("data must not be NULL");
  if (bytes == 0) throw InputError("bytes must be positive");
  const auto* p = static_cast<const unsigned char*>(data);
  const uint64_t words = bytes / 8;
  Digest128 d = digest_words(p, words);
  if (bytes % 8 != 0) digest_add(d, digest_tail_word(p + 8 * words, static_cast<unsigned>(bytes % 8)), words);
  return d;
}

}  // namespace sdc
