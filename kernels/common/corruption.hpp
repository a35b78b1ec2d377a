// Fault models applied by the injector to an output buffer, between a probe's computation and its
// verification. Shared by the CPU backend and the CUDA injection kernel.
#pragma once

#include "kernels/common/sdc_hd.hpp"

namespace sdc {

// Reads and writes element `i` of a buffer of `width_bits`-wide elements (8, 16, 32 or 64) as a
// zero-extended 64-bit word.
SDC_HD uint64_t load_element(const void* data, uint64_t i, unsigned width_bits) {
  switch (width_bits) {
    case 8: return static_cast<const uint8_t*>(data)[i];
    case 16: return static_cast<const uint16_t*>(data)[i];
    case 32: return static_cast<const uint32_t*>(data)[i];
    default: return static_cast<const uint64_t*>(data)[i];
  }
}

SDC_HD void store_element(void* data, uint64_t i, unsigned width_bits, uint64_t v) {
  switch (width_bits) {
    case 8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v); break;
    case 16: static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(v); break;
    case 32: static_cast<uint32_t*>(data)[i] = static_cast<uint32_t>(v); break;
    default: static_cast<uint64_t*>(data)[i] = v; break;
  }
}

// Stuck-at: the bit reads as `value` whatever was written.
SDC_HD uint64_t stuck_bit(uint64_t word, unsigned bit, bool value) {
  return value ? (word | (1ULL << bit)) : (word & ~(1ULL << bit));
}

// Lane of element i, when `group` consecutive elements are produced by one lane of `lanes`.
SDC_HD uint64_t lane_of(uint64_t i, uint64_t group, uint64_t lanes) { return (i / group) % lanes; }

}  // namespace sdc
