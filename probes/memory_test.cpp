#include "probes/memory_test.hpp"

#include <algorithm>
#include <chrono>

#include "host/error.hpp"

namespace sdc {

uint64_t default_memory_bytes(const Device& device, Level level) {
  // The scratch buffer an earlier probe left is this probe's to reuse: count it as free, or each
  // later probe would test a fraction of what the first one did.
  const uint64_t free_bytes = device.free_memory_bytes() + device.scratch_bytes();
  const double fraction = level == Level::kQuick ? 0.10 : level == Level::kStandard ? 0.50 : 0.85;
  uint64_t bytes = static_cast<uint64_t>(static_cast<double>(free_bytes) * fraction);
  if (device.identity().backend == "cpu") {
    // Host memory is shared with everything else on the node, and host bandwidth is far lower.
    const uint64_t cap = level == Level::kQuick      ? (32ULL << 20)
                         : level == Level::kStandard ? (512ULL << 20)
                                                     : (8ULL << 30);
    bytes = std::min(bytes, cap);
  }
  return std::max<uint64_t>(bytes, 1ULL << 20);
}

MemoryTest::MemoryTest(ProbeContext& ctx, ProbeResult& result) : ctx_(ctx), result_(result) {
  const uint64_t bytes = ctx.size_bytes ? *ctx.size_bytes : default_memory_bytes(ctx.device, ctx.level);
  words_ = bytes / 8;
  if (words_ == 0) throw InputError("--size must be at least 8 bytes");
  // Allocating (and on the CPU pre-faulting) a fresh buffer is setup, not the probe's passes.
  const auto start = std::chrono::steady_clock::now();
  buffer_ = &ctx.device.scratch(words_ * 8);
  result.setup_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.params["bytes"] = words_ * 8;
  const uint64_t total = ctx.device.identity().memory_bytes;
  if (total > 0) result.params["memory_fraction"] = static_cast<double>(words_ * 8) / static_cast<double>(total);
}

void MemoryTest::fill(const Pattern& p) {
  ctx_.device.fill(*buffer_, words_, p);
  result_.bytes += words_ * 8;
}

void MemoryTest::check(const Pattern& expect, const Pattern* then_write, Direction dir) {
  result_.report.merge(ctx_.device.verify(*buffer_, words_, expect, then_write, dir));
  result_.bytes += words_ * 8 * (then_write ? 2 : 1);
}

void MemoryTest::write_and_check(const std::vector<Pattern>& sequence) {
  if (sequence.empty()) return;
  fill(sequence.front());
  for (size_t i = 0; i + 1 < sequence.size(); ++i) check(sequence[i], &sequence[i + 1]);
  check(sequence.back());
}

uint32_t MemoryTest::passes(uint32_t quick, uint32_t standard, uint32_t long_level) const {
  if (ctx_.iterations) return *ctx_.iterations;
  return ctx_.level == Level::kQuick ? quick : ctx_.level == Level::kStandard ? standard : long_level;
}

}  // namespace sdc
