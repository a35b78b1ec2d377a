// GEMM probe throughput on the first CUDA device against a bare cuBLASLt GEMM of the same type and
// size on random operands (never zeros: zeros ran 13% faster on an H200), measured in the same run
// (heuristic's first algorithm, same workspace size), for gemm.random.bf16 and gemm.random.e4m3 at
// n = 8192 (override with SDC_GEMM_BENCH_N), the probe at the same n (gemm_rates refuses another).
// The probe generates, multiplies and verifies on the
// device. Counters: bare_TFLOP/s, probe_TFLOP/s (the probe's GEMM alone), gemm_ratio = probe GEMM
// rate / bare rate, end_to_end_ratio = (generate + GEMM + verify) / bare GEMM, verify_share =
// verify / (generate + GEMM + verify), verify_fraction = verify / GEMM, generate_fraction =
// generate / GEMM, wall_ratio = the probe's whole duration / bare GEMM, host_device_bytes = bytes
// the probe copied between host and device (O(n): summaries and candidates only), and the check's
// figures: check_tile, check_fraction = the check kernels' time / the GEMM's (both from CUDA events
// on the stream), max_ratio = the largest |r|/tau (false alarm at 1) and detectable_multiple = the
// smallest change of one element every check was sure to catch, per rms of C. Goal on an H200:
// end_to_end_ratio <= 1.10 and verify_share <= 0.05 at n = 8192 for bf16; e4m3's verification is
// its per-element check against two INT32 reference GEMMs (check_tile 1), estimated at about 2x
// the fp8 GEMM's time (check_fraction about 2, end_to_end_ratio about 3). BM_GemmBound reports the check's
// figures for the other random types. BM_GemmCheckAtSpeed measures the check at speed per random
// type through the engine, on the fast path (<type>) and on the thin GEMMs' (<type>_thin,
// SDCPROBE_GEMM_CHECK=thin): checked_over_bare_repeat = the pinned cuBLASLt GEMM's own time (CUDA
// events) / the wall time of a batch of repeats on kept inputs, GEMMs and checks, as the burn runs
// them (one engine run; goal >= 0.95), new_over_gemm = the wall time of a new input set (generation,
// the reference, GEMM, check) / the GEMM's (goal <= 1.5; checked_over_bare_new its inverse),
// checked_TFLOP/s of the repeats, reference_ms, check_ms (a repeat's check kernel), max_ratio and
// detectable_multiple; then a batch with 16 elements' signs flipped in its middle repeat
// (planted_repeat): named_repeat is the first repeat the run names (-1: none), planted_caught 1 when
// it is the planted one and the only one. Without a device every benchmark is skipped. Run:
// build/release/bench/gpu_gemm_bench --benchmark_format=json
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/gemm_bench_figures.hpp"
#include "host/backend.hpp"
#include "host/gemm.hpp"
#include "host/injection.hpp"
#include "kernels/common/random.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"

namespace {

constexpr size_t kWorkspace = size_t{32} << 20;

uint32_t bench_n() {
  const char* env = std::getenv("SDC_GEMM_BENCH_N");
  return env != nullptr ? static_cast<uint32_t>(std::stoul(env)) : 8192u;
}

bool ok(cudaError_t e) { return e == cudaSuccess; }
bool ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

// Random finite operands in [-1, 1): a GEMM's rate depends on its data (zeros or a constant draw
// less power and run faster), and the probe multiplies full-significand random values. Generated
// once per type and seed, since every repetition uploads them again.
cudaError_t upload_random(void* dst, sdc::GemmType type, size_t elements, uint64_t seed) {
  static std::map<std::pair<sdc::GemmType, uint64_t>, std::vector<uint8_t>> cache;
  std::vector<uint8_t>& host = cache[{type, seed}];
  if (host.size() != elements * sdc::gemm_input_bytes(type)) {
    host.resize(elements * sdc::gemm_input_bytes(type));
    for (size_t i = 0; i < elements; ++i) {
      const float v = sdc::random_float(seed, i, -1.0f, 1.0f);
      uint32_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      if (type == sdc::GemmType::kBf16) {
        const uint16_t bf16 = static_cast<uint16_t>(bits >> 16);
        std::memcpy(&host[2 * i], &bf16, sizeof bf16);
      } else {
        // A random E4M3 byte: every value but the NaN encoding 0x7f / 0xff (largest magnitude 448).
        uint8_t byte = static_cast<uint8_t>(sdc::counter_random(seed, i));
        if ((byte & 0x7f) == 0x7f) byte ^= 1;
        host[i] = byte;
      }
    }
  }
  return cudaMemcpy(dst, host.data(), host.size(), cudaMemcpyHostToDevice);
}

// Seconds per bare cuBLASLt GEMM (TN, FP32 output and compute) on random operands, averaged over
// `reps`; < 0 on failure.
double bare_gemm_seconds(sdc::GemmType type, uint32_t n, int reps) {
  const cudaDataType_t in = type == sdc::GemmType::kBf16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
  const size_t in_bytes = static_cast<size_t>(n) * n * sdc::gemm_input_bytes(type);
  void *a = nullptr, *b = nullptr, *c = nullptr, *ws = nullptr;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  double seconds = -1;
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const uint64_t wsb = kWorkspace;
  cublasLtMatmulHeuristicResult_t h{};
  int found = 0;
  const float one = 1, zero = 0;
  float ms = 0;
  if (ok(cudaMalloc(&a, in_bytes)) && ok(cudaMalloc(&b, in_bytes)) && ok(cudaMalloc(&c, size_t{4} * n * n)) &&
      ok(cudaMalloc(&ws, kWorkspace)) && ok(upload_random(a, type, size_t{n} * n, 1)) &&
      ok(upload_random(b, type, size_t{n} * n, 2)) && ok(cublasLtCreate(&lt)) &&
      ok(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
      ok(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
      ok(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
      ok(cublasLtMatrixLayoutCreate(&la, in, n, n, n)) && ok(cublasLtMatrixLayoutCreate(&lb, in, n, n, n)) &&
      ok(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, n, n)) && ok(cublasLtMatmulPreferenceCreate(&pref)) &&
      ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb)) &&
      ok(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &h, &found)) && found > 0 &&
      ok(cudaEventCreate(&start)) && ok(cudaEventCreate(&stop))) {
    bool good = ok(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, c, lc, c, lc, &h.algo, ws, kWorkspace, nullptr));
    good = good && ok(cudaEventRecord(start, nullptr));
    for (int r = 0; r < reps && good; ++r) {
      good = ok(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, c, lc, c, lc, &h.algo, ws, kWorkspace, nullptr));
    }
    good = good && ok(cudaEventRecord(stop, nullptr)) && ok(cudaEventSynchronize(stop)) &&
           ok(cudaEventElapsedTime(&ms, start, stop));
    if (good) seconds = ms / 1e3 / reps;
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (desc) cublasLtMatmulDescDestroy(desc);
  if (lt) cublasLtDestroy(lt);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(ws);
  return seconds;
}

void BM_GemmProbeVsCublasLt(benchmark::State& state, sdc::GemmType type, const char* probe_id) {
  auto devices = sdc::make_cuda_devices();
  if (devices.empty()) {
    state.SkipWithError("no CUDA device");
    for (auto _ : state) {
    }
    return;
  }
  const uint32_t n = bench_n();
  const sdc::Probe* probe = sdc::builtin_registry().find(probe_id);
  if (!probe->included_at(sdc::Level::kStandard, devices[0]->identity())) {
    state.SkipWithError("device lacks this data type");
    for (auto _ : state) {
    }
    return;
  }
  sdc::RunOptions options;
  options.seed = 1;
  options.level = sdc::Level::kStandard;
  options.gemm_n = n;  // the bare GEMM's size (a working-set size would shrink fp8's: its reference)
  // Warm-up: module loading, the heuristic's choice (pinned by the engine), first allocations.
  (void)sdc::run_probe(*probe, *devices[0], options);
  (void)bare_gemm_seconds(type, n, 1);
  double bare = 0, gemm = 0, verify = 0, generate = 0, total = 0, bytes = 0, check = 0, ratio = 0, detectable = 0;
  sdc::GemmShape probe_shape;
  for (auto _ : state) {
    const double b = bare_gemm_seconds(type, n, 10);
    if (b <= 0) {
      state.SkipWithError("bare cuBLASLt GEMM failed");
      break;
    }
    ++options.seed;  // a probe run: new inputs (the engine would keep the same ones and their reference)
    const sdc::ProbeResult r = sdc::run_probe(*probe, *devices[0], options);
    if (r.outcome != sdc::Outcome::kPass) {
      state.SkipWithError(("probe did not pass: " + r.reason).c_str());
      break;
    }
    bare += b;
    gemm += r.params["gemm_s"].get<double>();
    verify += r.params["verify_s"].get<double>();
    generate += r.params["generate_s"].get<double>();
    total += r.duration_s;
    bytes += static_cast<double>(r.host_device_bytes);
    check += r.params["check_s"].get<double>();
    ratio = std::max(ratio, r.params["max_ratio"].get<double>());
    detectable = std::max(detectable, r.params["detectable_multiple"].get<double>());
    probe_shape = {r.params["m"].get<uint32_t>(), r.params["n"].get<uint32_t>(), r.params["k"].get<uint32_t>()};
    state.counters["n"] = r.params["n"].get<double>();
    state.counters["check_tile"] = r.params["check_tile"].get<double>();
  }
  if (bare <= 0 || gemm <= 0) return;
  const double iters = static_cast<double>(state.iterations());
  sdc::GemmRates rates;
  try {
    rates = sdc::gemm_rates({n, n, n}, probe_shape, iters, bare, gemm);
  } catch (const std::invalid_argument& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.counters["bare_TFLOP/s"] = rates.bare_tflops;
  state.counters["probe_TFLOP/s"] = rates.probe_tflops;
  state.counters["gemm_ratio"] = rates.gemm_ratio;
  state.counters["verify_fraction"] = verify / gemm;
  state.counters["generate_fraction"] = generate / gemm;
  state.counters["verify_share"] = verify / (generate + gemm + verify);
  state.counters["end_to_end_ratio"] = (generate + gemm + verify) / bare;
  state.counters["wall_ratio"] = total / bare;
  state.counters["host_device_bytes"] = bytes / iters;
  state.counters["check_fraction"] = check / gemm;
  state.counters["max_ratio"] = ratio;
  state.counters["detectable_multiple"] = detectable;
}

// The check's figures alone at the level's size (no bare GEMM to compare with).
void BM_GemmBound(benchmark::State& state, const char* probe_id) {
  auto devices = sdc::make_cuda_devices();
  const sdc::Probe* probe = sdc::builtin_registry().find(probe_id);
  if (devices.empty() || !probe->included_at(sdc::Level::kStandard, devices[0]->identity())) {
    state.SkipWithError(devices.empty() ? "no CUDA device" : "device lacks this data type");
    for (auto _ : state) {
    }
    return;
  }
  sdc::RunOptions options;
  options.seed = 1;
  options.level = sdc::Level::kStandard;
  options.gemm_n = bench_n();
  (void)sdc::run_probe(*probe, *devices[0], options);  // warm-up
  double gemm = 0, check = 0, ratio = 0, detectable = 0;
  for (auto _ : state) {
    ++options.seed;  // new inputs, as a probe run has
    const sdc::ProbeResult r = sdc::run_probe(*probe, *devices[0], options);
    if (r.outcome != sdc::Outcome::kPass) {
      state.SkipWithError(("probe did not pass: " + r.reason).c_str());
      break;
    }
    gemm += r.params["gemm_s"].get<double>();
    check += r.params["check_s"].get<double>();
    ratio = std::max(ratio, r.params["max_ratio"].get<double>());
    detectable = std::max(detectable, r.params["detectable_multiple"].get<double>());
    state.counters["n"] = r.params["n"].get<double>();
    state.counters["check_tile"] = r.params["check_tile"].get<double>();
  }
  if (gemm <= 0) return;
  const double iters = static_cast<double>(state.iterations());
  state.counters["gemm_ms"] = 1e3 * gemm / iters;
  state.counters["check_ms"] = 1e3 * check / iters;
  state.counters["check_fraction"] = check / gemm;
  state.counters["max_ratio"] = ratio;
  state.counters["detectable_multiple"] = detectable;
}

// The check at speed (engine level): one new input set, then kRepeats GEMMs on it, per iteration.
void BM_GemmCheckAtSpeed(benchmark::State& state, sdc::GemmType type, const char* path) {
  constexpr int kRepeats = 10;
  // The path for this benchmark alone: the others take the default.
  struct Path {
    explicit Path(const char* p) { setenv("SDCPROBE_GEMM_CHECK", p, 1); }
    ~Path() { unsetenv("SDCPROBE_GEMM_CHECK"); }
  } chosen(path);
  auto devices = sdc::make_cuda_devices();
  sdc::GemmEngine* engine = devices.empty() ? nullptr : devices[0]->gemm();
  if (engine == nullptr || !engine->supports(type, sdc::GemmPath::kLibrary)) {
    state.SkipWithError(devices.empty() ? "no CUDA device" : "device lacks this data type");
    for (auto _ : state) {
    }
    return;
  }
  sdc::GemmSpec spec;
  spec.type = type;
  spec.m = spec.n = spec.k = bench_n();
  spec.seed = 1000;
  sdc::GemmSpec batch = spec;
  batch.repeats = kRepeats;
  batch.compare_repeats = false;
  (void)engine->run(batch);  // warm-up: the pinned algorithm, modules, allocations
  double new_wall = 0, new_gemm = 0, reference = 0, wall = 0, gemm = 0, check = 0, ratio = 0, detectable = 0;
  bool reused = true;
  for (auto _ : state) {
    batch.seed = ++spec.seed;
    auto t0 = std::chrono::steady_clock::now();
    const sdc::GemmRun fresh = engine->run(spec);
    new_wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    new_gemm += fresh.gemm_s;
    reference += fresh.reference_s;
    t0 = std::chrono::steady_clock::now();
    const sdc::GemmRun run = engine->run(batch);
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gemm += run.gemm_s;
    check += run.check_s;
    reused = reused && run.inputs_reused;
    if (run.report.mismatches != 0) state.SkipWithError("a clean repeat failed its check");
    ratio = std::max(ratio, run.max_ratio);
    detectable = std::max(detectable, run.c_rms > 0 ? run.detectable / run.c_rms : 0.0);
  }
  if (!reused) state.SkipWithError("a repeat did not reuse the kept reference");
  // A fault in the middle repeat of a batch: 16 elements' signs flipped, some surely beyond the
  // bound; the run must name that repeat alone.
  constexpr uint32_t kPlanted = kRepeats / 2;
  const unsigned sign = sdc::gemm_output_bytes(type) * 8 - 1;
  sdc::Injector planted(sdc::parse_injection_specs("model=bitflip,count=16,mode=transient,bit=" + std::to_string(sign) +
                                                   ",after=" + std::to_string(kPlanted)),
                        spec.seed);
  devices[0]->set_injection(&planted, "bench");
  const sdc::GemmRun faulty = engine->run(batch);
  devices[0]->set_injection(nullptr, "");
  const double named = faulty.failed_repeats.empty() ? -1.0 : faulty.failed_repeats.front();
  state.counters["planted_repeat"] = kPlanted;
  state.counters["named_repeat"] = named;
  state.counters["planted_caught"] =
      faulty.failed_repeats == std::vector<uint32_t>{kPlanted} && faulty.report.mismatches > 0 ? 1 : 0;
  if (wall <= 0 || new_gemm <= 0) return;
  const double iters = static_cast<double>(state.iterations());
  const double flops = 2.0 * spec.m * spec.n * spec.k;
  state.counters["n"] = spec.n;
  state.counters["checked_over_bare_repeat"] = gemm / wall;
  state.counters["new_over_gemm"] = new_wall / new_gemm;
  state.counters["checked_over_bare_new"] = new_gemm / new_wall;
  state.counters["checked_TFLOP/s"] = flops * kRepeats * iters / wall / 1e12;
  state.counters["bare_TFLOP/s"] = flops * kRepeats * iters / gemm / 1e12;
  state.counters["reference_ms"] = 1e3 * reference / iters;
  state.counters["check_ms"] = 1e3 * check / (kRepeats * iters);
  state.counters["max_ratio"] = ratio;
  state.counters["detectable_multiple"] = detectable;
}

}  // namespace

BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, fp64, sdc::GemmType::kFp64, "fast")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, fp64_thin, sdc::GemmType::kFp64, "thin")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, fp32, sdc::GemmType::kFp32, "fast")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, fp32_thin, sdc::GemmType::kFp32, "thin")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, tf32, sdc::GemmType::kTf32, "fast")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, tf32_thin, sdc::GemmType::kTf32, "thin")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, fp16, sdc::GemmType::kFp16, "fast")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, fp16_thin, sdc::GemmType::kFp16, "thin")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, bf16, sdc::GemmType::kBf16, "fast")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, bf16_thin, sdc::GemmType::kBf16, "thin")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, e4m3, sdc::GemmType::kE4m3, "fast")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, e4m3_thin, sdc::GemmType::kE4m3, "thin")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, e5m2, sdc::GemmType::kE5m2, "fast")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_GemmCheckAtSpeed, e5m2_thin, sdc::GemmType::kE5m2, "thin")->Unit(benchmark::kMillisecond)->Iterations(2);

BENCHMARK_CAPTURE(BM_GemmProbeVsCublasLt, bf16, sdc::GemmType::kBf16, "gemm.random.bf16")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_GemmProbeVsCublasLt, e4m3, sdc::GemmType::kE4m3, "gemm.random.e4m3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

BENCHMARK_CAPTURE(BM_GemmBound, fp64, "gemm.random.fp64")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK_CAPTURE(BM_GemmBound, fp32, "gemm.random.fp32")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK_CAPTURE(BM_GemmBound, tf32, "gemm.random.tf32")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK_CAPTURE(BM_GemmBound, fp16, "gemm.random.fp16")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK_CAPTURE(BM_GemmBound, e5m2, "gemm.random.e5m2")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

BENCHMARK_MAIN();
