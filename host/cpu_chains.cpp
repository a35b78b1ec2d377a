// The CPU's chain kernels: AVX2/FMA vector code where the processor has it, portable code
// elsewhere. Either way each copy is the same IEEE computation as the host's scalar golden.
#include <cstring>
#include <vector>

#include "host/cpu_device.hpp"
#include "kernels/common/chains.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sdc {
namespace {

// Copies per vector block: 8 AVX2 vectors of fp32 (or 16 of fp64 in two halves), enough
// independent chains to cover the FMA latency on two ports.
constexpr uint64_t kBlock = 64;

bool have_avx2_fma() {
#if defined(__x86_64__)
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return have;
#else
  return false;
#endif
}

template <typename T>
struct SeedTable {
  std::vector<T> x, y, s;
};

template <typename T>
SeedTable<T> rotation_seeds(const ChainJob& job) {
  SeedTable<T> t;
  t.x.resize(job.seeds);
  t.y.resize(job.seeds);
  t.s.resize(job.seeds);
  for (uint32_t k = 0; k < job.seeds; ++k) {
    const RotationChain<T> c = rotation_chain_seed<T>(job.seed, k);
    t.x[k] = c.x;
    t.y[k] = c.y;
    t.s[k] = c.s;
  }
  return t;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void rotation_block_avx2(float* x, float* y, const float* s, uint32_t iterations) {
  __m256 vx[8], vy[8], vs[8];
  for (int v = 0; v < 8; ++v) {
    vx[v] = _mm256_loadu_ps(x + 8 * v);
    vy[v] = _mm256_loadu_ps(y + 8 * v);
    vs[v] = _mm256_loadu_ps(s + 8 * v);
  }
  for (uint32_t j = 0; j < iterations; ++j) {
    for (int v = 0; v < 8; ++v) {
      vx[v] = _mm256_fnmadd_ps(vs[v], vy[v], vx[v]);  // fma(-s, y, x)
      vy[v] = _mm256_fmadd_ps(vs[v], vx[v], vy[v]);   // fma(s, x, y)
    }
  }
  for (int v = 0; v < 8; ++v) {
    _mm256_storeu_ps(x + 8 * v, vx[v]);
    _mm256_storeu_ps(y + 8 * v, vy[v]);
  }
}

__attribute__((target("avx2,fma"))) void rotation_block_avx2(double* x, double* y, const double* s,
                                                             uint32_t iterations) {
  // 64 fp64 copies as two halves of 8 vectors, to keep x and y in registers.
  for (int half = 0; half < 2; ++half) {
    double* hx = x + 32 * half;
    double* hy = y + 32 * half;
    const double* hs = s + 32 * half;
    __m256d vx[8], vy[8], vs[8];
    for (int v = 0; v < 8; ++v) {
      vx[v] = _mm256_loadu_pd(hx + 4 * v);
      vy[v] = _mm256_loadu_pd(hy + 4 * v);
      vs[v] = _mm256_loadu_pd(hs + 4 * v);
    }
    for (uint32_t j = 0; j < iterations; ++j) {
      for (int v = 0; v < 8; ++v) {
        vx[v] = _mm256_fnmadd_pd(vs[v], vy[v], vx[v]);
        vy[v] = _mm256_fmadd_pd(vs[v], vx[v], vy[v]);
      }
    }
    for (int v = 0; v < 8; ++v) {
      _mm256_storeu_pd(hx + 4 * v, vx[v]);
      _mm256_storeu_pd(hy + 4 * v, vy[v]);
    }
  }
}
#endif

template <typename T>
void rotation_block_portable(T* x, T* y, const T* s, uint32_t iterations) {
  for (uint32_t j = 0; j < iterations; ++j) {
#pragma omp simd
    for (uint64_t i = 0; i < kBlock; ++i) rotation_step(x[i], y[i], s[i]);
  }
}

template <typename T>
void rotation_chains(const ChainJob& job, uint64_t lo, uint64_t hi, T* out) {
  const SeedTable<T> seeds = rotation_seeds<T>(job);
  alignas(64) T x[kBlock], y[kBlock], s[kBlock];
  for (uint64_t c0 = lo; c0 < hi; c0 += kBlock) {
    const uint64_t n = std::min<uint64_t>(kBlock, hi - c0);
    for (uint64_t i = 0; i < kBlock; ++i) {
      const uint64_t k = (c0 + i) % job.seeds;
      x[i] = seeds.x[k];
      y[i] = seeds.y[k];
      s[i] = seeds.s[k];
    }
#if defined(__x86_64__)
    if (have_avx2_fma()) {
      rotation_block_avx2(x, y, s, job.iterations);
    } else {
      rotation_block_portable(x, y, s, job.iterations);
    }
#else
    rotation_block_portable(x, y, s, job.iterations);
#endif
    for (uint64_t i = 0; i < n; ++i) {
      out[2 * (c0 + i)] = x[i];
      out[2 * (c0 + i) + 1] = y[i];
    }
  }
}

// Eight copies advance together: their steps are independent, so the core overlaps them instead
// of waiting on one copy's long dependency chain.
constexpr uint64_t kInt64Interleave = 8;

__attribute__((always_inline)) inline void int64_chains_body(const ChainJob& job, uint64_t lo, uint64_t hi,
                                                             uint64_t* out) {
  for (uint64_t c0 = lo; c0 < hi; c0 += kInt64Interleave) {
    const uint64_t n = std::min(kInt64Interleave, hi - c0);
    Int64Chain chains[kInt64Interleave];
    for (uint64_t i = 0; i < kInt64Interleave; ++i) chains[i] = int64_chain_seed(job.seed, (c0 + i) % job.seeds);
    for (uint32_t j = 0; j < job.iterations; ++j) {
      for (uint64_t i = 0; i < kInt64Interleave; ++i) int64_step(chains[i].x, chains[i].y, chains[i].k);
    }
    for (uint64_t i = 0; i < n; ++i) {
      out[2 * (c0 + i)] = chains[i].x;
      out[2 * (c0 + i) + 1] = chains[i].y;
    }
  }
}

void int64_chains_portable(const ChainJob& job, uint64_t lo, uint64_t hi, uint64_t* out) {
  int64_chains_body(job, lo, hi, out);
}

#if defined(__x86_64__)
// With the POPCNT instruction; the baseline build would call a table-driven library routine.
__attribute__((target("popcnt"))) void int64_chains_popcnt(const ChainJob& job, uint64_t lo, uint64_t hi,
                                                           uint64_t* out) {
  int64_chains_body(job, lo, hi, out);
}
#endif

void int64_chains(const ChainJob& job, uint64_t lo, uint64_t hi, uint64_t* out) {
#if defined(__x86_64__)
  static const bool have_popcnt = __builtin_cpu_supports("popcnt");
  if (have_popcnt) return int64_chains_popcnt(job, lo, hi, out);
#endif
  int64_chains_portable(job, lo, hi, out);
}

}  // namespace

unsigned cpu_simd_lanes(unsigned width_bits) {
  const unsigned vector_bits = have_avx2_fma() ? 256 : 128;
  return vector_bits / width_bits;
}

void cpu_compute_chains(const ChainJob& job, uint64_t lo, uint64_t hi, void* out) {
  switch (job.kind) {
    case ChainKind::kFma32: rotation_chains(job, lo, hi, static_cast<float*>(out)); break;
    case ChainKind::kFma64: rotation_chains(job, lo, hi, static_cast<double*>(out)); break;
    case ChainKind::kInt64: int64_chains(job, lo, hi, static_cast<uint64_t*>(out)); break;
    case ChainKind::kDivSqrt32: {
      auto* o = static_cast<uint64_t*>(out);
#pragma omp simd
      for (uint64_t c = lo; c < hi; ++c) {
        divsqrt_chain_run(divsqrt_chain_seed<float>(job.seed, c % job.seeds), job.iterations, o + 2 * c);
      }
      break;
    }
    case ChainKind::kDivSqrt64: {
      auto* o = static_cast<uint64_t*>(out);
#pragma omp simd
      for (uint64_t c = lo; c < hi; ++c) {
        divsqrt_chain_run(divsqrt_chain_seed<double>(job.seed, c % job.seeds), job.iterations, o + 2 * c);
      }
      break;
    }
  }
}

}  // namespace sdc
