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

__device__ __forceinline__ uint64_t grid_thread() {
  return static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ uint64_t grid_stride() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }

// Called by every active lane of the warp, mismatch or not: the lanes that found one share one
// atomicAdd (warp_slot), so a fault in every word costs one atomic per warp, not per word, and
// records go only to the slots that exist. The count stays exact.
__device__ __forceinline__ void record_mismatch_if(bool mismatch, DeviceMismatchLog* log, uint64_t index,
                                                   uint64_t expected, uint64_t observed, unsigned unit, unsigned lane) {
  const unsigned active = __activemask();
  const unsigned hits = __ballot_sync(active, mismatch);
  if (hits == 0) return;
  if (!mismatch) return;
  // From here only the hit lanes run: the leader's atomic result is shared among exactly them.
  const unsigned me = lane_id();
  const unsigned leader = warp_leader(hits);
  unsigned long long base = 0;
  if (me == leader) base = atomicAdd(&log->mismatches, static_cast<unsigned long long>(popcount32(hits)));
  base = __shfl_sync(hits, base, leader);
  const unsigned long long slot = warp_slot(base, hits, me);
  if (slot_recorded(slot)) log->records[slot] = DeviceMismatch{index, expected, observed, unit, lane};
}

// Enough blocks for `n` elements at one per thread, at most shape.max_blocks, at least one.
inline unsigned blocks_for(uint64_t n, LaunchShape shape) {
  const uint64_t wanted = (n + shape.threads - 1) / shape.threads;
  if (wanted == 0) return 1;
  return wanted < shape.max_blocks ? static_cast<unsigned>(wanted) : shape.max_blocks;
}

// blocks_for(n, shape), and no more blocks of `kernel` than the device holds at once: a
// grid-stride kernel then runs as one wave, each SM busy to the end, where a grid of a fixed
// number of blocks per SM leaves a partial last wave (and idle SMs) whenever fewer fit. Errors
// of the occupancy query fall back to blocks_for; the launch reports its own.
template <typename Kernel>
unsigned one_wave_blocks(Kernel kernel, uint64_t n, LaunchShape shape) {
  const unsigned wanted = blocks_for(n, shape);
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(shape.threads), 0) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return wanted;
  }
  const uint64_t resident = static_cast<uint64_t>(sms) * static_cast<uint64_t>(per_sm);
  return resident > 0 && resident < wanted ? static_cast<unsigned>(resident) : wanted;
}

}  // namespace sdc
