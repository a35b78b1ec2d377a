// The CPU's memory-pattern loops over one core's range of 64-bit words, in 2 KiB blocks. A
// block's expected words come from the pattern function, as a window into a table of the kind's
// words XOR a constant (or, for kRandom, computed; AVX2 where the processor has it), never from
// a reference buffer. A verify visits the range in its direction, block by block and within a
// block vector by vector (4 words); a March element reads and checks a block, then rewrites it in
// the same order, so each word is read before it is rewritten and memory sees the lines in the
// element's order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "host/device.hpp"

namespace sdc {

void cpu_fill_words(uint64_t* words, size_t lo, size_t hi, const Pattern& p);

// Adds to `report` (mismatches and records; the caller sets `checked`), naming `core`.
void cpu_verify_words(uint64_t* words, size_t lo, size_t hi, const Pattern& expect, const Pattern* then_write,
                      Direction dir, int core, MismatchReport& report);

}  // namespace sdc
