#include "host/byte_digest.hpp"

#include <cstdint>
#include <cstring>

#include "host/error.hpp"

namespace sdc {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "digest words are little-endian, as on every GPU");

Digest128 digest_host_bytes(const void* data, size_t bytes) {
  if (data == nullptr) throw InputError("data must not be NULL");
  if (bytes == 0) throw InputError("bytes must be positive");
  const auto* p = static_cast<const unsigned char*>(data);
  const uint64_t words = bytes / 8;
  // Two plain sums: the compiler keeps them in registers and overlaps the words' multiplies.
  uint64_t lo = 0, hi = 0;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, p + 8 * i, sizeof word);  // any alignment
    lo += digest_term_lo(word, i);
    hi += digest_term_hi(word, i);
  }
  Digest128 d;
  d.lo = lo;
  d.hi = hi;
  if (bytes % 8 != 0) digest_add(d, digest_tail_word(p + 8 * words, static_cast<unsigned>(bytes % 8)), words);
  return d;
}

}  // namespace sdc
