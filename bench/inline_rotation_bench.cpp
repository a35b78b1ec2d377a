// The inline memory rotation's visit (check one slice, write its inverse in the same pass) as a
// ratio of memcpy bandwidth measured in the same run: what a visit adds to an inline probe's cost,
// on this machine's CPU with its own last-level cache, as the inline probe plans the region.
// Run: build/release/bench/inline_rotation_bench
#include <benchmark/benchmark.h>

#include <chrono>

#include "bench/ceilings.hpp"
#include "host/backend.hpp"
#include "scheduler/inline/memory_rotation.hpp"

namespace {

// Larger than any L3, as for cpu_probe_bench's ceilings.
constexpr size_t kCeilingBytes = 1u << 30;

void BM_RotationVisit(benchmark::State& state) {
  auto device = sdc::open_device({"cpu", 1}, 0);
  // No measured probe cost: cache-sized slices, as the inline probe's cost makes them in practice.
  const sdc::RotationPlan plan = sdc::plan_rotation(device->identity().cache_bytes, 0, 0);
  sdc::MemoryRotation rotation(*device, plan, 1);
  for (uint64_t s = 0; s < plan.slices; ++s) rotation.visit_next();  // every slice written
  double bytes = 0, seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const sdc::MemoryRotation::Visit v = rotation.visit_next();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (v.report.checked == 0 || v.report.mismatches != 0) state.SkipWithError("the visit did not check cleanly");
    bytes += static_cast<double>(v.bytes);
  }
  const double memcpy_bw = sdc::bench::memcpy_bytes_per_second(kCeilingBytes);
  state.counters["slice_MiB"] = static_cast<double>(plan.slice_bytes) / (1 << 20);
  state.counters["slices"] = static_cast<double>(plan.slices);
  state.counters["ratio_to_memcpy"] = bytes / seconds / memcpy_bw;
}
BENCHMARK(BM_RotationVisit)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
