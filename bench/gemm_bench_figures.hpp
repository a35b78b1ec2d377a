// The rates gpu_gemm_bench reports for a GEMM probe against a bare cuBLASLt GEMM: each from its own
// shape's flops, and only for the same shape (a probe sized below the bare GEMM would report an
// impossible rate: the first GPU run's e4m3 row, a probe at n = 4096 counted as 8192).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sdc {

struct GemmShape {
  uint32_t m = 0, n = 0, k = 0;
};

inline double gemm_flops(const GemmShape& s) { return 2.0 * s.m * s.n * s.k; }

struct GemmRates {
  double bare_tflops = 0, probe_tflops = 0;
  double gemm_ratio = 0;  // probe GEMM rate / bare rate
};

// From `runs` bare GEMMs of `bare` taking bare_s in all and `runs` probe GEMMs of `probe` taking
// gemm_s in all. Throws std::invalid_argument for different shapes or no time.
inline GemmRates gemm_rates(const GemmShape& bare, const GemmShape& probe, double runs, double bare_s, double gemm_s) {
  if (bare.m != probe.m || bare.n != probe.n || bare.k != probe.k) {
    throw std::invalid_argument("the probe ran " + std::to_string(probe.m) + " x " + std::to_string(probe.n) + " x " +
                                std::to_string(probe.k) + ", the bare GEMM " + std::to_string(bare.m) + " x " +
                                std::to_string(bare.n) + " x " + std::to_string(bare.k));
  }
  if (runs <= 0 || bare_s <= 0 || gemm_s <= 0) throw std::invalid_argument("no GEMM time measured");
  GemmRates r;
  r.bare_tflops = gemm_flops(bare) * runs / bare_s / 1e12;
  r.probe_tflops = gemm_flops(probe) * runs / gemm_s / 1e12;
  r.gemm_ratio = r.probe_tflops / r.bare_tflops;
  return r;
}

}  // namespace sdc
