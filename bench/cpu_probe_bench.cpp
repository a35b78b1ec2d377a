// Each CPU probe's throughput as a ratio of the machine's ceiling measured in the same run:
// memory probes against memcpy bandwidth (bytes read plus written), alu.fma32 against a peak-FMA
// loop. Run: build/release/bench/cpu_probe_bench
#include <benchmark/benchmark.h>

#include "bench/ceilings.hpp"
#include "host/backend.hpp"
#include "host/cpu_device.hpp"
#include "kernels/common/chains.hpp"
#include "scheduler/catalogue.hpp"
#include "scheduler/runner.hpp"

namespace {

constexpr size_t kBufferBytes = 256u << 20;

double memcpy_ceiling() {
  static const double bw = sdc::bench::memcpy_bytes_per_second(kBufferBytes);
  return bw;
}

void BM_MemoryProbe(benchmark::State& state, const char* probe_id) {
  auto devices = sdc::make_cpu_devices(1);
  const sdc::Probe* probe = sdc::builtin_registry().find(probe_id);
  sdc::RunOptions options;
  options.seed = 1;
  options.size_bytes = kBufferBytes;
  double bytes = 0, seconds = 0;
  for (auto _ : state) {
    const sdc::ProbeResult r = sdc::run_probe(*probe, *devices[0], options);
    if (r.outcome != sdc::Outcome::kPass) state.SkipWithError("probe did not pass");
    bytes += static_cast<double>(r.bytes);
    seconds += r.duration_s;
  }
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["memcpy_GB/s"] = memcpy_ceiling() / 1e9;
  state.counters["ratio_to_memcpy"] = bytes / seconds / memcpy_ceiling();
}

void BM_Fma32Chains(benchmark::State& state) {
  auto devices = sdc::make_cpu_devices(1);
  auto* cpu = static_cast<sdc::CpuDevice*>(devices[0].get());
  sdc::ChainJob job;
  job.kind = sdc::ChainKind::kFma32;
  job.seed = 1;
  job.copies = 8192 * cpu->cores().size();
  job.iterations = 16384;
  std::vector<float> out(job.copies * sdc::kChainOutputsPerCopy);
  static const double peak = sdc::bench::peak_fma32_flops();
  for (auto _ : state) {
#pragma omp parallel for num_threads(cpu->cores().size())
    for (size_t t = 0; t < cpu->cores().size(); ++t) {
      const uint64_t lo = job.copies * t / cpu->cores().size(), hi = job.copies * (t + 1) / cpu->cores().size();
      sdc::cpu_compute_chains(job, lo, hi, out.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = 4.0 * static_cast<double>(job.copies) * job.iterations * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.counters["peak_GFLOP/s"] = peak / 1e9;
  state.counters["ratio_to_peak_fma"] = benchmark::Counter(flops / peak, benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK_CAPTURE(BM_MemoryProbe, own_address, "mem.own_address")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_MemoryProbe, walking_bits, "mem.walking_bits")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_MemoryProbe, moving_inversions, "mem.moving_inversions")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_MemoryProbe, march_c, "mem.march_c")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_MemoryProbe, modulo20, "mem.modulo20")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_MemoryProbe, random_blocks, "mem.random_blocks")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_Fma32Chains)->Unit(benchmark::kMillisecond)->MinTime(1.0);

BENCHMARK_MAIN();
