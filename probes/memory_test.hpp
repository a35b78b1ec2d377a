// What the memory probes share: the buffer, sized from the level's time and the device's measured
// rates to cover all the memory the device can spare when that fits, and the byte accounting.
#pragma once

#include <chrono>
#include <vector>

#include "probes/probe.hpp"

namespace sdc {

// With the level's default sizing (no --size, no --iterations) a probe keeps its time box. The box
// runs from the start of its allocation: the level's allocate time plus its passes' when it
// allocates a fresh buffer, the passes' alone when it reuses the last probe's, so an allocation
// slower than its share takes the rest from the passes. Before each fill or check the tested range
// shrinks to the prefix of the buffer that leaves the rest of the probe's traffic within what is
// left of the box, at the rate its own passes ran so far (every earlier operation covered that
// prefix, so the probe's sequence stays whole on it, and it never shrinks below 1 MiB). The rates
// of its allocation and passes are kept for the device's next probe: sizes come from work run while
// the level's devices and the node's load run together. `bytes` in the result's params is the
// prefix every operation covered.
class MemoryTest {
 public:
  // `traffic_per_byte`: the bytes the probe reads and writes per buffer byte (one March C- pass is
  // 10). The buffer is the operator's --size, else memory_probe_bytes() for this device and level.
  MemoryTest(ProbeContext& ctx, ProbeResult& result, double traffic_per_byte);

  size_t words() const { return words_; }
  void fill(const Pattern& p);
  // Reads every word against `expect`; with `then_write`, rewrites each word after reading it.
  void check(const Pattern& expect, const Pattern* then_write = nullptr, Direction dir = Direction::kUp);
  // Writes each pattern of `sequence` over the whole buffer, then reads it back. Each pattern's
  // check rewrites the word with the next pattern, in place: a word is still read only after the
  // whole buffer holds its pattern, as with a separate fill, and the passes between the first fill
  // and the last check read and write in place (memcpy's access type) instead of a read-only pass
  // and a write-only pass. Its traffic is 2 bytes per buffer byte per pattern.
  void write_and_check(const std::vector<Pattern>& sequence);

 private:
  // Records the tested prefix in the result's params.
  void covered();
  // Runs one fill or check that moves `traffic` bytes per buffer byte, within the time box.
  template <typename Op>
  void timed(double traffic, Op&& op);

  ProbeContext& ctx_;
  ProbeResult& result_;
  DeviceBuffer* buffer_;
  size_t words_ = 0;
  bool boxed_ = false;
  std::chrono::steady_clock::time_point deadline_;
  double traffic_left_ = 0;  // bytes per buffer byte the probe has still to move
  double moved_ = 0;         // bytes its operations moved so far, and the seconds they took
  double moved_s_ = 0;
};

// Passes: the operator's --iterations, else the level's default.
uint32_t memory_passes(const ProbeContext& ctx, uint32_t quick, uint32_t standard, uint32_t long_level);

// The time the memory probes may take at `level`: to allocate the buffer, once (the probes reuse
// it), and each probe's passes. At quick, 1.5 s and 2.5 s each: with six probes, 16.5 s of the 50 s
// budget, leaving the rest to the other probes and to a loaded machine. Allocation gets less: it is
// the least predictable (on a loaded VM, pre-faulting took up to 5 times its measured rate).
struct MemoryTime {
  double allocate_s = 0;
  double passes_s = 0;
};
MemoryTime memory_probe_time(Level level);

// The buffer of a memory probe: everything the device can spare, or less where allocating it or
// `traffic_per_byte` bytes of passes over each byte, at the measured rates, would take longer than
// `time` allows. The `held_bytes` of the last probe's buffer cost no allocation. A whole number of
// MiB, at least 1 MiB.
uint64_t memory_probe_bytes(uint64_t spare_bytes, const Device::MemoryRates& rates, const MemoryTime& time,
                            double traffic_per_byte, uint64_t held_bytes = 0);

// The bytes a time-boxed probe's next fill or check covers: `bytes` (the prefix covered so far) when
// `traffic_left` bytes per buffer byte fit in `left_s` seconds at `rate` bytes per second (or the rate
// is unknown, 0), else the largest whole number of MiB that fits, at least 1 MiB and at most `bytes`.
uint64_t memory_prefix_bytes(uint64_t bytes, double left_s, double rate, double traffic_left);

// The device's allocation and fill rates, measured on first use (a fresh buffer of up to 64 MiB on
// the CPU, 1 GiB elsewhere: its allocation, then the fastest of three fills after a first) and kept.
const Device::MemoryRates& measured_memory_rates(Device& device);

}  // namespace sdc
