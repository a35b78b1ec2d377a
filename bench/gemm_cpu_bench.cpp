// gemm.random.fp32 end to end (generate, GEMM, verify) against a bare OpenBLAS sgemm of the same
// size on the same inputs, measured in the same iteration: end_to_end_ratio (target <= 1.10) and
// verify_fraction = verification time / GEMM time (target <= 0.05).
// BM_GemmCheckAtSpeed: the same engine's check split into a reference per input set and one pass
// over C per GEMM: checked_over_bare_repeat = bare sgemm time / (GEMM + check) of a repeat on the
// same inputs (target >= 0.9 at n = 2048), checked_over_bare_new = the same for a new input set
// (generation and reference included); reference_over_bare, repeat_check_over_bare and
// engine_gemm_over_bare split the times.
// Run: build/release/bench/gemm_cpu_bench [--benchmark_filter=2048]
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>
#include <thread>

#include "host/backend.hpp"
#include "host/cpu_device.hpp"
#include "host/gemm_inputs.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"

namespace {

void BM_GemmRandomFp32VsSgemm(benchmark::State& state) {
  const uint32_t n = static_cast<uint32_t>(state.range(0));
  auto devices = sdc::make_cpu_devices(1);
  auto* cpu = static_cast<sdc::CpuDevice*>(devices[0].get());
  const int threads = static_cast<int>(cpu->cores().size());
  sdc::GemmSpec spec;
  spec.type = sdc::GemmType::kFp32;
  spec.m = spec.n = spec.k = n;
  spec.seed = 1;
  const sdc::GemmHostInputs in = sdc::generate_gemm_inputs(spec, threads);
  std::vector<float> c(static_cast<size_t>(n) * n);
  const sdc::Probe* probe = sdc::builtin_registry().find("gemm.random.fp32");
  sdc::RunOptions options;
  options.seed = 1;
  options.compute_bytes = uint64_t{n} * n * 12;
  double bare = 0, probe_s = 0, gemm_s = 0, verify_s = 0, generate_s = 0;
  for (auto _ : state) {
    openblas_set_num_threads(threads);
    const auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, reinterpret_cast<const float*>(in.a.data()), n,
                reinterpret_cast<const float*>(in.bt.data()), n, 0.0f, c.data(), n);
    bare += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(c.data());
    // OpenBLAS's worker threads keep spinning for a while after a threaded call; let them go idle
    // so they do not compete with the probe (which never wakes them: it runs OpenBLAS
    // single-threaded on each of its cores).
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ++options.seed;  // new inputs each time: the engine keeps them, and their reference, for a repeat
    const auto t1 = std::chrono::steady_clock::now();
    const sdc::ProbeResult r = sdc::run_probe(*probe, *devices[0], options);
    probe_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    if (r.outcome != sdc::Outcome::kPass) state.SkipWithError("gemm.random.fp32 did not pass");
    gemm_s += r.params["gemm_s"].get<double>();
    verify_s += r.params["verify_s"].get<double>();
    generate_s += r.params["generate_s"].get<double>();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["sgemm_GFLOP/s"] = 2.0 * n * n * n * iters / bare / 1e9;
  state.counters["end_to_end_ratio"] = probe_s / bare;
  state.counters["gemm_ratio"] = gemm_s / bare;
  state.counters["verify_fraction"] = verify_s / gemm_s;
  state.counters["generate_fraction"] = generate_s / gemm_s;
}

void BM_GemmCheckAtSpeed(benchmark::State& state) {
  const uint32_t n = static_cast<uint32_t>(state.range(0));
  auto devices = sdc::make_cpu_devices(1);
  auto* cpu = static_cast<sdc::CpuDevice*>(devices[0].get());
  const int threads = static_cast<int>(cpu->cores().size());
  sdc::GemmEngine& engine = *cpu->gemm();
  sdc::GemmSpec spec;
  spec.type = sdc::GemmType::kFp32;
  spec.m = spec.n = spec.k = n;
  const sdc::GemmHostInputs in = sdc::generate_gemm_inputs(spec, threads);
  std::vector<float> c(static_cast<size_t>(n) * n);
  auto seconds = [](auto t0) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  double bare = 0, repeat = 0, fresh = 0, reference = 0, check = 0, gemm = 0;
  uint64_t seed = 100;
  for (auto _ : state) {
    openblas_set_num_threads(threads);
    auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, reinterpret_cast<const float*>(in.a.data()), n,
                reinterpret_cast<const float*>(in.bt.data()), n, 0.0f, c.data(), n);
    bare += seconds(t0);
    benchmark::DoNotOptimize(c.data());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // OpenBLAS's workers go idle (above)
    spec.seed = ++seed;                                           // a new input set: generation, reference, GEMM, check
    t0 = std::chrono::steady_clock::now();
    const sdc::GemmRun first = engine.run(spec);
    fresh += seconds(t0);
    reference += first.reference_s;
    t0 = std::chrono::steady_clock::now();  // a repeat on the same inputs: GEMM and one pass over C
    const sdc::GemmRun again = engine.run(spec);
    repeat += seconds(t0);
    check += again.check_s;
    gemm += again.gemm_s;
    if (!again.inputs_reused || again.report.mismatches != 0 || first.report.mismatches != 0)
      state.SkipWithError("the repeat did not reuse its reference, or a check failed");
  }
  state.counters["sgemm_GFLOP/s"] = 2.0 * n * n * n * static_cast<double>(state.iterations()) / bare / 1e9;
  state.counters["checked_over_bare_repeat"] = bare / repeat;
  state.counters["checked_over_bare_new"] = bare / fresh;
  state.counters["reference_over_bare"] = reference / bare;
  state.counters["repeat_check_over_bare"] = check / bare;
  state.counters["engine_gemm_over_bare"] = gemm / bare;  // the engine's GEMM (per-core rounds) alone
}

}  // namespace

BENCHMARK(BM_GemmCheckAtSpeed)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

BENCHMARK(BM_GemmRandomFp32VsSgemm)
    ->Arg(512)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(4.0)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

BENCHMARK_MAIN();
