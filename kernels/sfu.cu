// sfu.transcendental's kernel: every thread evaluates the hardware approximations on its elements'
// seeded inputs (kernels/common/sfu.hpp) and writes the float results; the host checks them. The
// intrinsics are explicit, so the build's --fmad=false and precise division and square root (which
// keep the chains IEEE) leave them as they are.
#include "kernels/common/sfu.hpp"
#include "kernels/device_util.cuh"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

__global__ void sfu_kernel(uint64_t seed, uint64_t per_function, float* out) {
  const uint64_t total = per_function * kSfuFunctions;
  const uint64_t stride = grid_stride();
  for (uint64_t i = grid_thread(); i < total; i += stride) {
    const SfuFunction f = sfu_function_of(i, per_function);
    const SfuArgs a = sfu_input(seed, f, i % per_function);
    float v = 0.0f;
    switch (f) {
      case SfuFunction::kSin: v = __sinf(a.x); break;
      case SfuFunction::kCos: v = __cosf(a.x); break;
      case SfuFunction::kExp: v = __expf(a.x); break;
      case SfuFunction::kLog2: v = __log2f(a.x); break;
      case SfuFunction::kRsqrt: v = rsqrtf(a.x); break;
      case SfuFunction::kDivide: v = __fdividef(a.x, a.y); break;
    }
    out[i] = v;
  }
}

}  // namespace

cudaError_t launch_sfu(uint64_t seed, uint64_t per_function, float* out, LaunchShape shape, cudaStream_t stream) {
  if (per_function == 0) return cudaSuccess;
  sfu_kernel<<<blocks_for(per_function * kSfuFunctions, shape), shape.threads, 0, stream>>>(seed, per_function, out);
  return cudaGetLastError();
}

}  // namespace sdc
