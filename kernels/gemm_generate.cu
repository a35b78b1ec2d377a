// Generation of the gemm.* inputs on the device: one thread per element calls the SDC_HD generator
// the host calls (gemm_elements.hpp), so the same seed gives the same bits on both, and no input
// crosses the bus.
#include "kernels/device_util.cuh"
#include "kernels/gemm_launch.hpp"

namespace sdc {
namespace {

__global__ void gemm_generate_kernel(GemmGenerator g, GemmType store, uint64_t elements, void* out) {
  const uint64_t stride = grid_stride();
  for (uint64_t i = grid_thread(); i < elements; i += stride) {
    if (store == g.type) {
      gemm_generate_element(g, out, i);
    } else {
      gemm_store_input(store, out, i, gemm_generated_float(g, i));
    }
  }
}

}  // namespace

cudaError_t launch_gemm_generate(const GemmGenerator& g, GemmType store, uint64_t rows, void* out,
                                 cudaStream_t stream) {
  const uint64_t elements = rows * g.k;
  LaunchShape shape{65535u * 16, 256};
  gemm_generate_kernel<<<blocks_for(elements, shape), shape.threads, 0, stream>>>(g, store, elements, out);
  return cudaGetLastError();
}

}  // namespace sdc
