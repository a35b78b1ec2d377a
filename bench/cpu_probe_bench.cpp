// Each CPU probe's throughput as a ratio of the machine's ceiling measured in the same run:
// memory probes against memcpy bandwidth (bytes read plus written), alu.fma32 against a peak-FMA
// loop. Run: build/release/bench/cpu_probe_bench
#include <benchmark/benchmark.h>

#include <chrono>

#include "bench/ceilings.hpp"
#include "host/backend.hpp"
#include "host/cpu_device.hpp"
#include "kernels/common/chains.hpp"
#include "scheduler/catalogue.hpp"
#include "scheduler/runner.hpp"

namespace {

constexpr size_t kBufferBytes = 256u << 20;

// Each benchmark measures its ceiling next to itself, so both see the same machine state.
void BM_MemoryProbe(benchmark::State& state, const char* probe_id) {
  auto devices = sdc::make_cpu_devices(1);
  const sdc::Probe* probe = sdc::builtin_registry().find(probe_id);
  sdc::RunOptions options;
  options.seed = 1;
  options.size_bytes = kBufferBytes;
  sdc::run_probe(*probe, *devices[0], options);  // warm-up: allocates the device's scratch buffer
  double bytes = 0, seconds = 0, memcpy_bw = 0;
  for (auto _ : state) {
    const sdc::ProbeResult r = sdc::run_probe(*probe, *devices[0], options);
    if (r.outcome != sdc::Outcome::kPass) state.SkipWithError("probe did not pass");
    bytes += static_cast<double>(r.bytes);
    seconds += r.duration_s;
    memcpy_bw += sdc::bench::memcpy_bytes_per_second(kBufferBytes);
  }
  memcpy_bw /= static_cast<double>(state.iterations());
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["memcpy_GB/s"] = memcpy_bw / 1e9;
  state.counters["ratio_to_memcpy"] = bytes / seconds / memcpy_bw;
}

void BM_Fma32Chains(benchmark::State& state) {
  auto devices = sdc::make_cpu_devices(1);
  auto* cpu = static_cast<sdc::CpuDevice*>(devices[0].get());
  const size_t cores = cpu->cores().size();
  sdc::ChainJob job;
  job.kind = sdc::ChainKind::kFma32;
  job.seed = 1;
  job.copies = 8192 * cores;
  job.iterations = 16384;
  std::vector<float> out(job.copies * sdc::kChainOutputsPerCopy);
  double flops = 0, seconds = 0, peak = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for num_threads(cores)
    for (size_t t = 0; t < cores; ++t) {
      sdc::cpu_compute_chains(job, job.copies * t / cores, job.copies * (t + 1) / cores, out.data());
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(out.data());
    flops += 4.0 * static_cast<double>(job.copies) * job.iterations;
    peak += sdc::bench::peak_fma32_flops();
  }
  peak /= static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = flops / seconds / 1e9;
  state.counters["peak_GFLOP/s"] = peak / 1e9;
  state.counters["ratio_to_peak_fma"] = flops / seconds / peak;
}

}  // namespace

BENCHMARK_CAPTURE(BM_MemoryProbe, own_address, "mem.own_address")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_MemoryProbe, walking_bits, "mem.walking_bits")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_MemoryProbe, moving_inversions, "mem.moving_inversions")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);
BENCHMARK_CAPTURE(BM_MemoryProbe, march_c, "mem.march_c")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_MemoryProbe, modulo20, "mem.modulo20")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_MemoryProbe, random_blocks, "mem.random_blocks")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_Fma32Chains)->Unit(benchmark::kMillisecond)->Iterations(5);

BENCHMARK_MAIN();
