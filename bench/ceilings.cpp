#include "bench/ceilings.hpp"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sdc::bench {
namespace {

template <typename F>
double best_seconds(int repeats, F&& f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Buffers as the CPU backend gives the memory probes theirs: aligned to 2 MiB and asked for
// transparent huge pages. memcpy over 4 KiB pages ran 7-10% slower on a VM with huge pages on
// request, which would flatter every ratio to it.
char* allocate_like_probe_buffer(size_t bytes) {
  constexpr size_t kHugePage = 2u << 20;
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  char* p = static_cast<char*>(std::aligned_alloc(kHugePage, rounded));
#if defined(MADV_HUGEPAGE)
  if (p != nullptr) ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

#if defined(__x86_64__)
// Twelve independent accumulators per core cover the FMA latency on two ports.
__attribute__((target("avx2,fma"))) float fma_loop(long iterations) {
  __m256 acc[12];
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  for (long j = 0; j < iterations; ++j) {
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  return out[0];
}
constexpr double kFlopsPerIteration = 12 * 8 * 2;
#else
float fma_loop(long iterations) {
  float acc[32];
  for (int i = 0; i < 32; ++i) acc[i] = static_cast<float>(i);
  for (long j = 0; j < iterations; ++j) {
#pragma omp simd
    for (int i = 0; i < 32; ++i) acc[i] = __builtin_fmaf(acc[i], 0.999f, 0.001f);
  }
  return acc[0];
}
constexpr double kFlopsPerIteration = 32 * 2;
#endif

}  // namespace

double memcpy_bytes_per_second(size_t bytes) {
  char* src = allocate_like_probe_buffer(bytes);
  char* dst = allocate_like_probe_buffer(bytes);
  const int threads = omp_get_max_threads();
  auto copy = [&] {
#pragma omp parallel num_threads(threads)
    {
      const size_t t = static_cast<size_t>(omp_get_thread_num());
      const size_t lo = bytes * t / threads / 64 * 64, hi = bytes * (t + 1) / threads / 64 * 64;
      std::memcpy(dst + lo, src + lo, hi - lo);
    }
  };
  std::memset(src, 1, bytes);
  std::memset(dst, 2, bytes);
  copy();
  const double seconds = best_seconds(5, copy);
  std::free(src);
  std::free(dst);
  return 2.0 * static_cast<double>(bytes) / seconds;
}

namespace {

// Best seconds of f(lo, hi) over [0, bytes) split among every thread, on a buffer touched first.
template <typename F>
double best_split_seconds(char* buffer, size_t bytes, F&& f) {
  const int threads = omp_get_max_threads();
  auto pass = [&] {
#pragma omp parallel num_threads(threads)
    {
      const size_t t = static_cast<size_t>(omp_get_thread_num());
      f(buffer, bytes * t / threads / 64 * 64, bytes * (t + 1) / threads / 64 * 64);
    }
  };
  pass();
  return best_seconds(5, pass);
}

}  // namespace

double read_bytes_per_second(size_t bytes) {
  char* buffer = allocate_like_probe_buffer(bytes);
  std::memset(buffer, 1, bytes);
  volatile uint64_t sink = 0;
  const double seconds = best_split_seconds(buffer, bytes, [&](char* b, size_t lo, size_t hi) {
    const auto* w = reinterpret_cast<const uint64_t*>(b);
    uint64_t acc = 0;
#pragma omp simd reduction(| : acc)
    for (size_t i = lo / 8; i < hi / 8; ++i) acc |= w[i];
    sink = sink | acc;
  });
  std::free(buffer);
  return static_cast<double>(bytes) / seconds;
}

double write_bytes_per_second(size_t bytes) {
  char* buffer = allocate_like_probe_buffer(bytes);
  std::memset(buffer, 1, bytes);
  const double seconds =
      best_split_seconds(buffer, bytes, [](char* b, size_t lo, size_t hi) { std::memset(b + lo, 2, hi - lo); });
  std::free(buffer);
  return static_cast<double>(bytes) / seconds;
}

double peak_fma32_flops() {
  const long iterations = 4000000;
  volatile float sink = 0;
  const int threads = omp_get_max_threads();
  const double seconds = best_seconds(3, [&] {
#pragma omp parallel num_threads(threads)
    sink = sink + fma_loop(iterations);
  });
  return kFlopsPerIteration * static_cast<double>(iterations) * threads / seconds;
}

}  // namespace sdc::bench
