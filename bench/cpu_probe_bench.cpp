// Each CPU probe's throughput as a ratio of the machine's ceiling measured in the same run:
// memory probes against memcpy bandwidth (bytes read plus written), alu.fma32 against a peak-FMA
// loop. BM_CliPath measures the memory probes as `sdcprobe run` does, with a fresh session each
// time; bench/cli_vs_bench.py compares it with the CLI itself.
// Run: build/release/bench/cpu_probe_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "bench/ceilings.hpp"
#include "host/backend.hpp"
#include "host/cpu_device.hpp"
#include "kernels/common/chains.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/qualify_session.hpp"
#include "scheduler/qualify/runner.hpp"

namespace {

constexpr size_t kBufferBytes = 256u << 20;
// Every ceiling: memcpy (or a one-way stream) over buffers larger than any L3, at most 1 GiB each.
// Not smaller: glibc's memcpy over 256 MiB ran at 0.5-0.7 of its 1 GiB rate on the development VM,
// a ceiling that would flatter every ratio.
constexpr size_t kCeilingBytes = 1u << 30;

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
    seconds += r.duration_s - r.setup_s;
    memcpy_bw += sdc::bench::memcpy_bytes_per_second(kCeilingBytes);
  }
  memcpy_bw /= static_cast<double>(state.iterations());
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["memcpy_GB/s"] = memcpy_bw / 1e9;
  state.counters["ratio_to_memcpy"] = bytes / seconds / memcpy_bw;
}

// `sdcprobe run <probe> --backend cpu --size <bytes>`: a fresh session each time, which opens fresh
// devices and allocates a fresh buffer exactly as cmd_run does, and the rate the CLI prints (over
// the probe's own time, without allocating and pre-faulting the buffer: setup_s).
void BM_CliPath(benchmark::State& state, const char* probe_id) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  double bytes = 0, seconds = 0, setup = 0, memcpy_bw = 0;
  for (auto _ : state) {
    // The ceiling is the better of memcpy before and after the session: right after mem.march_c had
    // freed its buffer, memcpy was seen up to a fifth slower than after the other probes (on a VM).
    const size_t ceiling_bytes = std::min<size_t>(size, kCeilingBytes);
    const double memcpy_before = sdc::bench::memcpy_bytes_per_second(ceiling_bytes);
    sdc::QualifyOptions options;
    options.mode = "run";
    options.backend = {"cpu", 1};
    options.probe_globs = {probe_id};
    options.seed = 1;
    options.size_bytes = size;
    {
      sdc::QualifySession session(options);
      const sdc::RunReport report = session.run();
      const sdc::ProbeResult& r = report.results.at(0);
      if (r.outcome != sdc::Outcome::kPass) state.SkipWithError("probe did not pass");
      bytes += static_cast<double>(r.bytes);
      seconds += r.duration_s - r.setup_s;
      setup += r.setup_s;
    }  // the buffer is freed before the ceiling allocates its own
    memcpy_bw += std::max(memcpy_before, sdc::bench::memcpy_bytes_per_second(ceiling_bytes));
  }
  memcpy_bw /= static_cast<double>(state.iterations());
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["memcpy_GB/s"] = memcpy_bw / 1e9;
  state.counters["ratio_to_memcpy"] = bytes / seconds / memcpy_bw;
  state.counters["setup_s"] = setup / static_cast<double>(state.iterations());
}

// One pass of one pattern over the CLI path's ceiling size, against memcpy and against the ceiling
// of its own access type (each the best seen): a fill only writes, a verify only reads, a March
// element (here one up or down and back) reads and writes in place as memcpy does. Where a
// probe's time goes, pass by pass.
enum class Pass { kFill, kVerify, kMarchUp, kMarchDown };

void BM_MemoryPass(benchmark::State& state, Pass pass, sdc::Pattern p) {
  auto devices = sdc::make_cpu_devices(1);
  sdc::Device& device = *devices[0];
  auto buffer = device.allocate(kCeilingBytes);
  const size_t words = kCeilingBytes / 8;
  const sdc::Pattern not_p = sdc::inverse(p);
  const sdc::Direction dir = pass == Pass::kMarchDown ? sdc::Direction::kDown : sdc::Direction::kUp;
  device.fill(*buffer, words, p);
  uint64_t mismatches = 0;
  double bytes = 0, seconds = 0, memcpy_bw = 0, access_bw = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (pass == Pass::kFill) {
      device.fill(*buffer, words, p);
    } else if (pass == Pass::kVerify) {
      mismatches += device.verify(*buffer, words, p, nullptr, dir).mismatches;
    } else {
      mismatches += device.verify(*buffer, words, p, &not_p, dir).mismatches;
      mismatches += device.verify(*buffer, words, not_p, &p, dir).mismatches;
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bytes += static_cast<double>(kCeilingBytes) * (pass == Pass::kFill || pass == Pass::kVerify ? 1 : 4);
    const double copy = sdc::bench::memcpy_bytes_per_second(kCeilingBytes);
    memcpy_bw = std::max(memcpy_bw, copy);
    access_bw = std::max(access_bw, pass == Pass::kFill     ? sdc::bench::write_bytes_per_second(kCeilingBytes)
                                    : pass == Pass::kVerify ? sdc::bench::read_bytes_per_second(kCeilingBytes)
                                                            : copy);
  }
  if (mismatches != 0) state.SkipWithError("the pass found mismatches");
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["ratio_to_memcpy"] = bytes / seconds / memcpy_bw;
  state.counters["ratio_to_access"] = bytes / seconds / access_bw;
}

const bool kPassesRegistered = [] {
  const std::pair<const char*, sdc::Pattern> patterns[] = {
      {"solid", {sdc::PatternKind::kSolid, 0, 0, false}},
      {"own_address", {sdc::PatternKind::kOwnAddress, 0x1230, 0, true}},
      {"random", {sdc::PatternKind::kRandom, 0, 7, false}},
      {"random_blocks", {sdc::PatternKind::kRandomBlocks, 9, 7, false}}};
  const std::pair<const char*, Pass> passes[] = {
      {"fill", Pass::kFill}, {"verify", Pass::kVerify}, {"march_up", Pass::kMarchUp}, {"march_down", Pass::kMarchDown}};
  for (const auto& [pattern_name, pattern] : patterns) {
    for (const auto& [pass_name, pass] : passes) {
      const std::string name = std::string("BM_MemoryPass/") + pattern_name + "/" + pass_name;
      benchmark::RegisterBenchmark(name.c_str(), [pass = pass, pattern = pattern](
                                                     benchmark::State& state) { BM_MemoryPass(state, pass, pattern); })
          ->Unit(benchmark::kMillisecond)
          ->Iterations(3);
    }
  }
  return true;
}();

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

// At 1 GiB and 4 GiB, where a fresh buffer's page faults showed most; once each (a fresh session is the point).
void cli_path_sizes(benchmark::internal::Benchmark* b) {
  b->Arg(int64_t{1} << 30)->Arg(int64_t{4} << 30)->Unit(benchmark::kMillisecond)->Iterations(1);
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

BENCHMARK_CAPTURE(BM_CliPath, own_address, "mem.own_address")->Apply(cli_path_sizes);
BENCHMARK_CAPTURE(BM_CliPath, walking_bits, "mem.walking_bits")->Apply(cli_path_sizes);
BENCHMARK_CAPTURE(BM_CliPath, moving_inversions, "mem.moving_inversions")->Apply(cli_path_sizes);
BENCHMARK_CAPTURE(BM_CliPath, march_c, "mem.march_c")->Apply(cli_path_sizes);
BENCHMARK_CAPTURE(BM_CliPath, modulo20, "mem.modulo20")->Apply(cli_path_sizes);
BENCHMARK_CAPTURE(BM_CliPath, random_blocks, "mem.random_blocks")->Apply(cli_path_sizes);

BENCHMARK_MAIN();
