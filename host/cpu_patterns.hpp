// The CPU's memory-pattern loops over one core's range of 64-bit words. Expected words are
// generated a block at a time (vectorised with AVX2 where the processor has it) and compared or
// written in order, so each March element still reads, checks and writes one word before the next.
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
