// The failed checks of a GEMM check pass as a list of flag indices, so that only the few flagged
// ones cross the bus, not a byte per (line, tile): those are O(n^2 / tile), and random inputs take
// narrow tiles.
#include "kernels/device_util.cuh"
#include "kernels/gemm_launch.hpp"

namespace sdc {
namespace {

__global__ void gemm_flag_list_kernel(const uint8_t* flags, uint64_t count, unsigned long long* list, uint64_t cap,
                                      unsigned long long* listed) {
  const uint64_t stride = grid_stride();
  for (uint64_t f = grid_thread(); f < count; f += stride) {
    if (flags[f] == 0) continue;
    const unsigned long long slot = atomicAdd(listed, 1ull);
    if (slot < cap) list[slot] = f;
  }
}

}  // namespace

cudaError_t launch_gemm_flag_list(const uint8_t* flags, uint64_t count, unsigned long long* list, uint64_t cap,
                                  unsigned long long* listed, cudaStream_t stream) {
  const cudaError_t e = cudaMemsetAsync(listed, 0, sizeof(unsigned long long), stream);
  if (e != cudaSuccess) return e;
  const LaunchShape shape{4096, 256};
  gemm_flag_list_kernel<<<blocks_for(count, shape), shape.threads, 0, stream>>>(flags, count, list, cap, listed);
  return cudaGetLastError();
}

}  // namespace sdc
