// What the memory probes share: the buffer (its default size is a fraction of the device's free
// memory, capped per level on the CPU so `quick` fits its budget) and the byte accounting.
#pragma once

#include <vector>

#include "probes/probe.hpp"

namespace sdc {

class MemoryTest {
 public:
  MemoryTest(ProbeContext& ctx, ProbeResult& result);

  size_t words() const { return words_; }
  void fill(const Pattern& p);
  // Reads every word against `expect`; with `then_write`, rewrites each word after reading it.
  void check(const Pattern& expect, const Pattern* then_write = nullptr, Direction dir = Direction::kUp);
  // Writes each pattern of `sequence` over the whole buffer, then reads it back. Each pattern's
  // check rewrites the word with the next pattern, in place: a word is still read only after the
  // whole buffer holds its pattern, as with a separate fill, and the passes between the first fill
  // and the last check read and write in place (memcpy's access type) instead of a read-only pass
  // and a write-only pass.
  void write_and_check(const std::vector<Pattern>& sequence);
  // Passes: the operator's --iterations, else the level's default.
  uint32_t passes(uint32_t quick, uint32_t standard, uint32_t long_level) const;

 private:
  ProbeContext& ctx_;
  ProbeResult& result_;
  DeviceBuffer* buffer_;
  size_t words_ = 0;
};

// Default buffer bytes for a memory probe on this device at this level: a fraction of its free
// memory, counting the scratch buffer it already holds as free.
uint64_t default_memory_bytes(const Device& device, Level level);

}  // namespace sdc
