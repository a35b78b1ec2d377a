// Peak FP32 FMA rate: independent dependency chains per thread hide the FMA latency, so the loop
// runs at the FMA pipes' throughput. The benchmark's ceiling for the FMA chain probe.
#include "kernels/device_util.cuh"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

__global__ void peak_fma32_kernel(float* out, uint32_t iterations) {
  const uint64_t t = grid_thread();
  float acc[kPeakFmaChains];
#pragma unroll
  for (unsigned k = 0; k < kPeakFmaChains; ++k) acc[k] = static_cast<float>(t + k) * 1e-7f;
  // Multiplier just below 1 and a small addend keep the values finite and normal.
  const float a = 0.999999f;
  const float b = 1e-6f;
  for (uint32_t j = 0; j < iterations; ++j) {
#pragma unroll
    for (unsigned k = 0; k < kPeakFmaChains; ++k) acc[k] = fmaf(acc[k], a, b);
  }
  float sum = 0.0f;
#pragma unroll
  for (unsigned k = 0; k < kPeakFmaChains; ++k) sum += acc[k];
  out[t] = sum;  // keeps the loop live
}

}  // namespace

cudaError_t launch_peak_fma32(float* out, uint32_t iterations, LaunchShape shape, cudaStream_t stream) {
  peak_fma32_kernel<<<shape.max_blocks, shape.threads, 0, stream>>>(out, iterations);
  return cudaGetLastError();
}

}  // namespace sdc
