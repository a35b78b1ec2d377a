// GPU probe throughput as ratios of the device's own ceilings, all measured in the same run:
// memory probes and memory ops against device-to-device cudaMemcpy bandwidth on a buffer of the
// same size (bytes read plus written), alu.fma32 and gemm.simt.fp32 against a peak-FMA kernel, and
// cuBLAS SGEMM as a reference rate on random data. Each reports, per probe run, its end-to-end
// ratio (probe time as the runner measures it, checks included), the goal that ratio has (counter
// "goal", 0 for none) and the bytes it copied between host and device ("host_device_bytes").
// Without a GPU every benchmark is skipped with the reason.
// Run: build/release/bench/gpu_bench --benchmark_format=json (bench/gpu_kit.sh run prints the table).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "host/backend.hpp"
#include "host/cuda/cuda_raii.hpp"
#include "kernels/common/random.hpp"
#include "kernels/launch.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"

namespace {

constexpr size_t kMaxBufferBytes = size_t{4} << 30;
constexpr int kOrdinal = 0;  // make_cuda_devices lists ordinals in order: device 0 is ordinal 0
constexpr int kSgemmN = 8192;
constexpr int kCeilingReps = 5;
// Goals (issue 15), as fractions of the ceiling: memory passes of the D2D copy rate, mem.random_blocks
// a little less (it draws a pattern per block), the FMA chains of peak FMA end to end with their
// check, and the SIMT GEMM's kernel of peak FMA.
constexpr double kMemoryGoal = 0.9;
constexpr double kRandomBlocksGoal = 0.8;
constexpr double kFma32Goal = 0.7;
constexpr double kGemmSimtGoal = 0.5;

struct Gpu {
  std::unique_ptr<sdc::Device> device;
  std::string unavailable;  // why there is no device
  size_t buffer_bytes = 0;
};

Gpu open_gpu() {
  Gpu g;
  try {
    auto devices = sdc::make_cuda_devices();
    if (devices.empty()) {
      g.unavailable = "no CUDA device: " + sdc::cuda_unavailable_reason();
      return g;
    }
    g.device = std::move(devices[0]);
    // Large enough to leave the L2 far behind, small enough to share the GPU.
    g.buffer_bytes = std::min<size_t>(kMaxBufferBytes, g.device->free_memory_bytes() / 4) / 4096 * 4096;
  } catch (const std::exception& e) {
    g.unavailable = e.what();
  }
  return g;
}

Gpu& gpu() {
  static Gpu g = open_gpu();
  return g;
}

// Seconds of GPU time `enqueue` takes on `stream`, the best of kCeilingReps after a warm-up.
template <typename F>
double best_seconds(cudaStream_t stream, F&& enqueue) {
  sdc::Event start(kOrdinal), stop(kOrdinal);
  double best = 1e30;
  for (int rep = 0; rep <= kCeilingReps; ++rep) {
    SDC_CUDA_TRY(cudaEventRecord(start.get(), stream));
    enqueue();
    SDC_CUDA_TRY(cudaEventRecord(stop.get(), stream));
    SDC_CUDA_TRY(cudaEventSynchronize(stop.get()));
    float ms = 0;
    SDC_CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (rep > 0) best = std::min(best, ms * 1e-3);
  }
  return best;
}

struct Ceilings {
  double copy_bytes_per_s = 0;  // cudaMemcpy device to device, bytes read plus written
  double peak_fma_flops = 0;    // FP32, an FMA counts two
  double sgemm_flops = 0;
};

Ceilings measure_ceilings(size_t buffer_bytes, int sm_count) {
  sdc::DeviceGuard guard(kOrdinal);
  sdc::Stream stream(kOrdinal);
  Ceilings c;
  {
    // Half the buffer onto the other half: the bytes a probe pass over the whole buffer moves.
    sdc::DeviceMemory buf(kOrdinal, buffer_bytes);
    char* base = buf.as<char>();
    const size_t half = buffer_bytes / 2;
    const double s = best_seconds(stream.get(), [&] {
      SDC_CUDA_TRY(cudaMemcpyAsync(base + half, base, half, cudaMemcpyDeviceToDevice, stream.get()));
    });
    c.copy_bytes_per_s = 2.0 * static_cast<double>(half) / s;
  }
  {
    const sdc::LaunchShape shape{static_cast<unsigned>(sm_count) * 8, 256};
    const uint32_t iterations = 1u << 16;
    sdc::DeviceMemory out(kOrdinal, sizeof(float) * shape.max_blocks * shape.threads);
    const double s = best_seconds(
        stream.get(), [&] { SDC_CUDA_TRY(sdc::launch_peak_fma32(out.as<float>(), iterations, shape, stream.get())); });
    const double fmas = static_cast<double>(shape.max_blocks) * shape.threads * iterations * sdc::kPeakFmaChains;
    c.peak_fma_flops = 2.0 * fmas / s;
  }
  {
    const size_t bytes = sizeof(float) * kSgemmN * kSgemmN;
    sdc::DeviceMemory a(kOrdinal, bytes), b(kOrdinal, bytes), out(kOrdinal, bytes);
    // Random operands in [-1, 1): zeros or a constant draw less power and would flatter the ceiling.
    std::vector<float> host(size_t{kSgemmN} * kSgemmN);
    for (size_t i = 0; i < host.size(); ++i) host[i] = sdc::random_float(1, i, -1.0f, 1.0f);
    SDC_CUDA_TRY(cudaMemcpy(a.get(), host.data(), bytes, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < host.size(); ++i) host[i] = sdc::random_float(2, i, -1.0f, 1.0f);
    SDC_CUDA_TRY(cudaMemcpy(b.get(), host.data(), bytes, cudaMemcpyHostToDevice));
    sdc::CublasHandle blas(kOrdinal);
    SDC_CUBLAS_TRY(cublasSetStream(blas.get(), stream.get()));
    // Default math: FP32 throughout, no TF32 tensor cores.
    SDC_CUBLAS_TRY(cublasSetMathMode(blas.get(), CUBLAS_DEFAULT_MATH));
    const float one = 1.0f, zero = 0.0f;
    const double s = best_seconds(stream.get(), [&] {
      SDC_CUBLAS_TRY(cublasSgemm(blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, kSgemmN, kSgemmN, kSgemmN, &one, a.as<float>(),
                                 kSgemmN, b.as<float>(), kSgemmN, &zero, out.as<float>(), kSgemmN));
    });
    c.sgemm_flops = 2.0 * kSgemmN * static_cast<double>(kSgemmN) * kSgemmN / s;
  }
  return c;
}

// The ceilings, measured once per run, the first time a benchmark needs them.
const Ceilings& ceilings() {
  static const Ceilings c = measure_ceilings(gpu().buffer_bytes, gpu().device->identity().compute_units);
  return c;
}

// Skips the benchmark when there is no GPU or the ceilings cannot be measured; true if it may run.
bool ready(benchmark::State& state) {
  if (!gpu().device) {
    state.SkipWithError(gpu().unavailable.c_str());
    return false;
  }
  try {
    ceilings();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return false;
  }
  return true;
}

// The probe `id` when ready(state) and it is registered; else nullptr, the benchmark skipped.
const sdc::Probe* ready_probe(benchmark::State& state, const char* id) {
  if (!ready(state)) return nullptr;
  const sdc::Probe* probe = sdc::builtin_registry().find(id);
  if (probe == nullptr) state.SkipWithError("probe not registered");
  return probe;
}

// The sums over a probe's timed runs, one per benchmark iteration; a run that does not pass ends
// them with the benchmark's error set.
struct ProbeTotals {
  double bytes = 0, flops = 0, seconds = 0, gemm_seconds = 0, copied = 0, runs = 0;
};

ProbeTotals timed_probe_runs(benchmark::State& state, const sdc::Probe& probe, const sdc::RunOptions& options) {
  ProbeTotals t;
  for (auto _ : state) {
    const sdc::ProbeResult r = sdc::run_probe(probe, *gpu().device, options);
    if (r.outcome != sdc::Outcome::kPass) {
      state.SkipWithError(("probe did not pass: " + r.reason).c_str());
      break;
    }
    t.bytes += static_cast<double>(r.bytes);
    t.flops += r.flops;
    t.seconds += r.duration_s;
    t.gemm_seconds += r.params.value("gemm_s", 0.0);
    t.copied += static_cast<double>(r.host_device_bytes);
    ++t.runs;
    state.SetIterationTime(r.duration_s);
  }
  return t;
}

void BM_Ceilings(benchmark::State& state) {
  if (!ready(state)) return;
  for (auto _ : state) benchmark::DoNotOptimize(ceilings());
  state.counters["memcpy_GB/s"] = ceilings().copy_bytes_per_s / 1e9;
  state.counters["peak_fma_TFLOP/s"] = ceilings().peak_fma_flops / 1e12;
  state.counters["sgemm_TFLOP/s"] = ceilings().sgemm_flops / 1e12;
  state.counters["buffer_MiB"] = static_cast<double>(gpu().buffer_bytes) / (1 << 20);
}

// One memory probe through the runner, as qualify runs it.
void BM_MemoryProbe(benchmark::State& state, const char* probe_id, double goal) {
  const sdc::Probe* probe = ready_probe(state, probe_id);
  if (probe == nullptr) return;
  sdc::RunOptions options;
  options.seed = 1;
  options.size_bytes = gpu().buffer_bytes;
  // A first run allocates the device's scratch buffer, which a process does once and the probe
  // counts as setup (setup_s), not as its passes: untimed, as BM_Fma32Probe's first run. Timed,
  // it fell on whichever memory benchmark ran first (mem.own_address in the first lease).
  sdc::run_probe(*probe, *gpu().device, options);
  const ProbeTotals t = timed_probe_runs(state, *probe, options);
  if (t.seconds <= 0) return;
  state.counters["GB/s"] = t.bytes / t.seconds / 1e9;
  state.counters["ratio_to_memcpy"] = t.bytes / t.seconds / ceilings().copy_bytes_per_s;
  state.counters["goal"] = goal;
  state.counters["host_device_bytes"] = t.copied / t.runs;
}

enum class Op { kFill, kVerify, kMarchElement, kDigest };

// One Device memory operation over the whole buffer, timed on the host around the call (each op
// synchronises before it returns, so launch and readback overheads are included).
void BM_MemoryOp(benchmark::State& state, Op op) {
  if (!ready(state)) return;
  sdc::Device& d = *gpu().device;
  const size_t words = gpu().buffer_bytes / sizeof(uint64_t);
  double bytes = 0, seconds = 0, runs = 0;
  uint64_t copied = 0;
  try {
    auto buf = d.allocate(words * sizeof(uint64_t));
    sdc::Pattern p;
    p.kind = sdc::PatternKind::kRandom;
    p.seed = 7;
    d.fill(*buf, words, p);
    // The March element the probes run: read the pattern, write its inverse (alternately p and ~p,
    // so every iteration checks what the previous one wrote).
    sdc::Pattern now = p, next = sdc::inverse(p);
    const uint64_t copied_before = d.host_device_bytes();
    for (auto _ : state) {
      const auto start = std::chrono::steady_clock::now();
      double moved = static_cast<double>(words * sizeof(uint64_t));
      switch (op) {
        case Op::kFill: d.fill(*buf, words, p); break;
        case Op::kVerify: benchmark::DoNotOptimize(d.verify(*buf, words, p, nullptr, sdc::Direction::kUp)); break;
        case Op::kMarchElement:
          benchmark::DoNotOptimize(d.verify(*buf, words, now, &next, sdc::Direction::kDown));
          std::swap(now, next);
          moved *= 2;
          break;
        case Op::kDigest: benchmark::DoNotOptimize(d.digest(*buf, words)); break;
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      state.SetIterationTime(s);
      bytes += moved;
      seconds += s;
      ++runs;
    }
    copied = d.host_device_bytes() - copied_before;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (seconds <= 0) return;
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["ratio_to_memcpy"] = bytes / seconds / ceilings().copy_bytes_per_s;
  state.counters["goal"] = op == Op::kDigest ? 0 : kMemoryGoal;
  state.counters["host_device_bytes"] = static_cast<double>(copied) / runs;
}

void BM_Fma32Probe(benchmark::State& state) {
  const sdc::Probe* probe = ready_probe(state, "alu.fma32");
  if (probe == nullptr) return;
  sdc::RunOptions options;
  options.seed = 1;
  // A first run computes what a process computes once (host goldens); the timed runs are repeated
  // probes, end to end with their check, as inline and sweep probes run them.
  sdc::run_probe(*probe, *gpu().device, options);
  const ProbeTotals t = timed_probe_runs(state, *probe, options);
  if (t.seconds <= 0) return;
  state.counters["TFLOP/s"] = t.flops / t.seconds / 1e12;
  state.counters["ratio_to_peak_fma"] = t.flops / t.seconds / ceilings().peak_fma_flops;
  state.counters["ratio_to_sgemm"] = t.flops / t.seconds / ceilings().sgemm_flops;
  state.counters["goal"] = kFma32Goal;
  state.counters["host_device_bytes"] = t.copied / t.runs;
}

// gemm.simt.fp32 at the standard level (n = 8192 on a GPU): end to end (generate, GEMM, verify)
// and the kernel alone (the probe's own GEMM time), both against peak FMA; the goal is the kernel's.
void BM_GemmSimtProbe(benchmark::State& state) {
  const sdc::Probe* probe = ready_probe(state, "gemm.simt.fp32");
  if (probe == nullptr) return;
  sdc::RunOptions options;
  options.seed = 1;
  options.level = sdc::Level::kStandard;
  const ProbeTotals t = timed_probe_runs(state, *probe, options);
  if (t.seconds <= 0 || t.gemm_seconds <= 0) return;
  state.counters["TFLOP/s"] = t.flops / t.seconds / 1e12;
  state.counters["ratio_to_peak_fma"] = t.flops / t.seconds / ceilings().peak_fma_flops;
  state.counters["kernel_TFLOP/s"] = t.flops / t.gemm_seconds / 1e12;
  state.counters["kernel_ratio_to_peak_fma"] = t.flops / t.gemm_seconds / ceilings().peak_fma_flops;
  state.counters["goal"] = kGemmSimtGoal;
  state.counters["host_device_bytes"] = t.copied / t.runs;
}

}  // namespace

BENCHMARK(BM_Ceilings)->Iterations(1);
BENCHMARK_CAPTURE(BM_MemoryProbe, own_address, "mem.own_address", kMemoryGoal)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_MemoryProbe, walking_bits, "mem.walking_bits", kMemoryGoal)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_MemoryProbe, moving_inversions, "mem.moving_inversions", kMemoryGoal)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_MemoryProbe, march_c, "mem.march_c", kMemoryGoal)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_MemoryProbe, modulo20, "mem.modulo20", kMemoryGoal)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_MemoryProbe, random_blocks, "mem.random_blocks", kRandomBlocksGoal)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_MemoryOp, fill, Op::kFill)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK_CAPTURE(BM_MemoryOp, verify, Op::kVerify)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK_CAPTURE(BM_MemoryOp, march_element, Op::kMarchElement)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);
BENCHMARK_CAPTURE(BM_MemoryOp, digest, Op::kDigest)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK(BM_Fma32Probe)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_GemmSimtProbe)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2);

BENCHMARK_MAIN();
