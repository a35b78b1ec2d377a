#include "probes/memory_test.hpp"

#include <algorithm>
#include <chrono>

#include "host/error.hpp"

namespace sdc {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

MemoryTime memory_probe_time(Level level) {
  if (level == Level::kQuick) return {1.5, 2.5};
  if (level == Level::kStandard) return {20, 30};
  return {120, 180};
}

uint64_t memory_probe_bytes(uint64_t spare_bytes, const Device::MemoryRates& rates, const MemoryTime& time,
                            double traffic_per_byte, uint64_t held_bytes) {
  double bytes = static_cast<double>(spare_bytes);
  // A rate of 0 was too fast to time: no bound.
  if (rates.allocate_bytes_per_s > 0) {
    bytes = std::min(bytes, std::max(static_cast<double>(held_bytes), rates.allocate_bytes_per_s * time.allocate_s));
  }
  if (rates.fill_bytes_per_s > 0) bytes = std::min(bytes, rates.fill_bytes_per_s * time.passes_s / traffic_per_byte);
  return std::max<uint64_t>(static_cast<uint64_t>(bytes) / kMiB, 1) * kMiB;
}

uint64_t memory_prefix_bytes(uint64_t bytes, double left_s, double rate, double traffic_left) {
  if (!(rate > 0) || !(traffic_left > 0)) return bytes;
  const double fit = std::max(0.0, left_s) * rate / traffic_left;
  if (fit >= static_cast<double>(bytes)) return bytes;
  return std::min(bytes, std::max<uint64_t>(static_cast<uint64_t>(fit) / kMiB, 1) * kMiB);
}

const Device::MemoryRates& measured_memory_rates(Device& device) {
  std::optional<Device::MemoryRates>& rates = device.memory_rates();
  if (rates) return *rates;
  const uint64_t most = device.identity().backend == "cpu" ? 64 * kMiB : 1024 * kMiB;
  const uint64_t bytes = std::max(kMiB, std::min(device.spare_memory_bytes() / kMiB * kMiB, most));
  const size_t words = bytes / 8;
  const Pattern pattern{PatternKind::kRandom, 0, 1, false};
  auto start = std::chrono::steady_clock::now();
  const std::unique_ptr<DeviceBuffer> buffer = device.allocate(bytes);
  const double allocate_s = seconds_since(start);
  device.fill(*buffer, words, pattern);  // the first touch of a fresh buffer is slower: not timed
  // The fastest of three: a fill this short also times starting the device's threads or kernel.
  double fill_s = 0;
  for (int i = 0; i < 3; ++i) {
    start = std::chrono::steady_clock::now();
    device.fill(*buffer, words, pattern);
    const double s = seconds_since(start);
    fill_s = i == 0 ? s : std::min(fill_s, s);
  }
  rates = Device::MemoryRates{allocate_s > 0 ? bytes / allocate_s : 0, fill_s > 0 ? bytes / fill_s : 0};
  return *rates;
}

MemoryTest::MemoryTest(ProbeContext& ctx, ProbeResult& result, double traffic_per_byte)
    : ctx_(ctx), result_(result), traffic_left_(traffic_per_byte) {
  // Measuring, allocating (and on the CPU pre-faulting) a fresh buffer is setup, not the passes.
  const auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  if (ctx.size_bytes) {
    bytes = *ctx.size_bytes;
  } else {
    const uint64_t spare = ctx.device.spare_memory_bytes();
    bytes = memory_probe_bytes(spare, measured_memory_rates(ctx.device), memory_probe_time(ctx.level), traffic_per_byte,
                               ctx.device.scratch_bytes());
    result.params["spare_bytes"] = spare;
  }
  words_ = bytes / 8;
  if (words_ == 0) throw InputError("--size must be at least 8 bytes");
  const bool fresh = ctx.device.scratch_bytes() < words_ * 8;
  const auto allocation_start = std::chrono::steady_clock::now();
  buffer_ = &ctx.device.scratch(words_ * 8);
  const double allocate_s = seconds_since(allocation_start);
  result.setup_s += seconds_since(start);
  result.params["traffic_per_byte"] = traffic_per_byte;
  covered();
  boxed_ = !ctx.size_bytes && !ctx.iterations;
  if (boxed_) {
    // The box runs from the allocation's start: one slower than its share (faulting in memory on a
    // loaded node) takes the rest from the passes, so the probe still ends on time. Its rate is kept
    // for the next allocation, as the passes' is.
    const MemoryTime time = memory_probe_time(ctx.level);
    const double box_s = time.passes_s + (fresh ? time.allocate_s : 0);
    deadline_ = allocation_start +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(box_s));
    if (fresh && allocate_s > 0) ctx.device.memory_rates()->allocate_bytes_per_s = words_ * 8 / allocate_s;
    result.params["time_box_s"] = box_s;
    result.params["planned_bytes"] = words_ * 8;
  }
}

void MemoryTest::covered() {
  result_.params["bytes"] = words_ * 8;
  const uint64_t total = ctx_.device.identity().memory_bytes;
  if (total > 0) result_.params["memory_fraction"] = static_cast<double>(words_ * 8) / static_cast<double>(total);
}

template <typename Op>
void MemoryTest::timed(double traffic, Op&& op) {
  if (boxed_) {
    // The rate so far: this probe's own passes, else the device's last.
    const double rate = moved_s_ > 0 ? moved_ / moved_s_ : measured_memory_rates(ctx_.device).fill_bytes_per_s;
    const double left_s = std::chrono::duration<double>(deadline_ - std::chrono::steady_clock::now()).count();
    const size_t fitted = memory_prefix_bytes(words_ * 8, left_s, rate, std::max(traffic_left_, traffic)) / 8;
    if (fitted < words_) {
      words_ = fitted;
      covered();
    }
  }
  const auto start = std::chrono::steady_clock::now();
  op();
  moved_ += traffic * static_cast<double>(words_) * 8;
  moved_s_ += seconds_since(start);
  traffic_left_ -= traffic;
  result_.bytes += static_cast<uint64_t>(traffic) * words_ * 8;
  // Kept for the device's next probe, measured while every device and the node's load ran.
  if (boxed_ && moved_s_ > 0) ctx_.device.memory_rates()->fill_bytes_per_s = moved_ / moved_s_;
}

void MemoryTest::fill(const Pattern& p) {
  timed(1, [&] { ctx_.device.fill(*buffer_, words_, p); });
}

void MemoryTest::check(const Pattern& expect, const Pattern* then_write, Direction dir) {
  timed(then_write ? 2 : 1,
        [&] { result_.report.merge(ctx_.device.verify(*buffer_, words_, expect, then_write, dir)); });
}

void MemoryTest::write_and_check(const std::vector<Pattern>& sequence) {
  if (sequence.empty()) return;
  fill(sequence.front());
  for (size_t i = 0; i + 1 < sequence.size(); ++i) check(sequence[i], &sequence[i + 1]);
  check(sequence.back());
}

uint32_t memory_passes(const ProbeContext& ctx, uint32_t quick, uint32_t standard, uint32_t long_level) {
  if (ctx.iterations) return *ctx.iterations;
  return ctx.level == Level::kQuick ? quick : ctx.level == Level::kStandard ? standard : long_level;
}

}  // namespace sdc
