// The replica check's digest on the CPU (sdc_digest_host, one core) as a ratio of memcpy's read
// bandwidth on one core, measured in the same run; and what a check over a 1 GB parameter set costs
// per step under the "auto" cadence (sdc_choose_every) at several step times, against the budget.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "sdcprobe/sdcprobe.h"

namespace {

constexpr size_t kBufferBytes = size_t{64} << 20;  // well past the caches
constexpr size_t kParameterBytes = size_t{1} << 30;
constexpr double kBudget = 0.01;

std::vector<unsigned char>& source() {
  static std::vector<unsigned char> buf = [] {
    std::vector<unsigned char> b(kBufferBytes);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>(i * 131 + 7);
    return b;
  }();
  return buf;
}

// Bytes read per second by memcpy on one core: the ceiling the digest is judged against.
double memcpy_read_bytes_per_s() {
  static const double rate = [] {
    std::vector<unsigned char> dst(kBufferBytes);
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(dst.data(), source().data(), kBufferBytes);
      benchmark::DoNotOptimize(dst.data());
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, static_cast<double>(kBufferBytes) / s);
    }
    return best;
  }();
  return rate;
}

double digest_bytes_per_s(const unsigned char* data, size_t bytes, int reps) {
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    sdc_digest d{};
    const auto t0 = std::chrono::steady_clock::now();
    if (sdc_digest_host(data, bytes, &d) != SDC_OK) return 0;
    benchmark::DoNotOptimize(d);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  return best;
}

void BM_MemcpyRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(memcpy_read_bytes_per_s());
  state.counters["read_GB/s"] = memcpy_read_bytes_per_s() / 1e9;
}

void BM_DigestHost(benchmark::State& state) {
  const size_t bytes = kBufferBytes - static_cast<size_t>(state.range(0));  // 0 or an odd tail
  for (auto _ : state) {
    sdc_digest d{};
    if (sdc_digest_host(source().data(), bytes, &d) != SDC_OK) state.SkipWithError(sdc_last_error());
    benchmark::DoNotOptimize(d);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  const double rate = digest_bytes_per_s(source().data(), bytes, 3);
  state.counters["GB/s"] = rate / 1e9;
  state.counters["ratio_to_memcpy_read"] = rate / memcpy_read_bytes_per_s();  // goal >= 0.5 (one core)
}

// The check over a 1 GB parameter set (digest only: the exchange is 24 bytes per rank), and the
// "auto" cadence's interval and overhead for it at step times from 0.1 s to 10 s.
void BM_CheckCost1GB(benchmark::State& state) {
  std::vector<unsigned char> params(kParameterBytes, 0x3c);
  double cost = 0;
  for (auto _ : state) {
    cost = static_cast<double>(kParameterBytes) / digest_bytes_per_s(params.data(), params.size(), 1);
  }
  state.counters["check_s"] = cost;
  for (double step_s : {0.1, 1.0, 10.0}) {
    int64_t every = 0;
    if (sdc_choose_every(step_s, cost, 0, kBudget, &every) != SDC_OK) {
      state.SkipWithError(sdc_last_error());
      return;
    }
    const double overhead = cost / (static_cast<double>(every) * step_s);
    std::printf(
        "1 GB check: %.3f s; step %.1f s: auto checks every %lld steps, overhead %.4f of step time "
        "(budget %.2f)%s\n",
        cost, step_s, static_cast<long long>(every), overhead, kBudget, overhead <= kBudget ? "" : " OVER");
    char name[32];
    std::snprintf(name, sizeof name, "overhead_at_%gs", step_s);
    state.counters[name] = overhead;
  }
}

}  // namespace

BENCHMARK(BM_MemcpyRead)->Iterations(1);
BENCHMARK(BM_DigestHost)->Arg(0)->Arg(5)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_CheckCost1GB)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
