// Device-side helpers shared by the kernels in this directory.
#pragma once

#include <cstdint>

#include "kernels/common/device_mismatch.hpp"
#include "kernels/launch.hpp"

namespace sdc {

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ __forceinline__ unsigned lane_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}

// Producer tag stored per chain copy: SM id above, lane in the low 5 bits.
__device__ __forceinline__ uint32_t producer_tag() { return (sm_id() << 5) | lane_id(); }

__device__ __forceinline__ uint64_t grid_thread() {
  return static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ uint64_t grid_stride() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }

// Counts the mismatch and, while slots remain, records it in the slot its count claimed.
__device__ __forceinline__ void record_mismatch(DeviceMismatchLog* log, uint64_t index, uint64_t expected,
                                                uint64_t observed, unsigned unit, unsigned lane) {
  const unsigned long long slot = atomicAdd(&log->mismatches, 1ULL);
  if (slot < kDeviceMismatchSlots) log->records[slot] = DeviceMismatch{index, expected, observed, unit, lane};
}

// Enough blocks for `n` elements at one per thread, at most shape.max_blocks, at least one.
inline unsigned blocks_for(uint64_t n, LaunchShape shape) {
  const uint64_t wanted = (n + shape.threads - 1) / shape.threads;
  if (wanted == 0) return 1;
  return wanted < shape.max_blocks ? static_cast<unsigned>(wanted) : shape.max_blocks;
}

}  // namespace sdc
