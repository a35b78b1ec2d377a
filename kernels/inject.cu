// Fault injection on the GPU: the injector's plan is applied to the output buffer in device memory,
// between a probe's computation and its verification.
#include "kernels/common/corruption.hpp"
#include "kernels/device_util.cuh"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

// One thread, in plan order, so that XORs on a repeated index compose exactly as on the host.
__global__ void xor_kernel(void* data, unsigned width_bits, uint64_t elements, const XorEntry* xors, uint64_t count) {
  for (uint64_t k = 0; k < count; ++k) {
    const XorEntry x = xors[k];
    if (x.index < elements) store_element(data, x.index, width_bits, load_element(data, x.index, width_bits) ^ x.mask);
  }
}

__global__ void lane_mask_kernel(void* data, unsigned width_bits, uint64_t elements, uint64_t group, uint32_t lane,
                                 uint32_t lanes, uint64_t mask) {
  const uint64_t stride = grid_stride();
  for (uint64_t i = grid_thread(); i < elements; i += stride) {
    if (lane_of(i, group, lanes) == lane) store_element(data, i, width_bits, load_element(data, i, width_bits) ^ mask);
  }
}

__global__ void stuck_kernel(void* data, unsigned width_bits, uint64_t index, unsigned bit, bool value) {
  store_element(data, index, width_bits, stuck_bit(load_element(data, index, width_bits), bit, value));
}

}  // namespace

cudaError_t launch_corruption(void* data, unsigned width_bits, uint64_t elements, const CorruptionPlan& plan,
                              LaunchShape shape, cudaStream_t stream) {
  if (elements == 0) return cudaSuccess;
  if (plan.xor_count > 0) {
    xor_kernel<<<1, 1, 0, stream>>>(data, width_bits, elements, plan.device_xors, plan.xor_count);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  if (plan.stuck && plan.stuck_index < elements) {
    stuck_kernel<<<1, 1, 0, stream>>>(data, width_bits, plan.stuck_index, plan.stuck_bit, plan.stuck_value);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  if (plan.lane_mask && plan.lanes > 0 && plan.group > 0) {
    lane_mask_kernel<<<blocks_for(elements, shape), shape.threads, 0, stream>>>(data, width_bits, elements, plan.group,
                                                                                plan.lane, plan.lanes, plan.mask);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

}  // namespace sdc
