// Digest kernel: each thread sums its words' digest terms, warps reduce with shuffles, and lane 0
// adds the warp's sum to the result atomically. Addition modulo 2^64 commutes, so the digest does
// not depend on the grid, the schedule or the order of the atomics.
#include "kernels/common/digest.hpp"
#include "kernels/device_util.cuh"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

constexpr unsigned kDigestUnroll = 4;  // 16-byte loads in flight per thread

// `data` is 8-byte aligned. Words go in 16-byte vectors, kDigestUnroll per thread at a time, all
// loaded before any is mixed; thread 0 adds the words outside the vectors (split_into_vectors) and
// the last `tail` (0 to 7) bytes after the whole words, a zero-padded partial word.
__global__ void digest_kernel(const uint64_t* data, uint64_t words, unsigned tail, Digest128* result) {
  const VectorSplit split = split_into_vectors(reinterpret_cast<uintptr_t>(data), words);
  const auto* vectors = reinterpret_cast<const ulonglong2*>(data + split.head);
  Digest128 d;
  const uint64_t stride = grid_stride();
  for (uint64_t base = grid_thread(); base < split.pairs; base += kDigestUnroll * stride) {
    ulonglong2 v[kDigestUnroll];
#pragma unroll
    for (unsigned u = 0; u < kDigestUnroll; ++u) {
      if (base + u * stride < split.pairs) v[u] = vectors[base + u * stride];
    }
#pragma unroll
    for (unsigned u = 0; u < kDigestUnroll; ++u) {
      const uint64_t pair = base + u * stride;
      if (pair >= split.pairs) break;
      const uint64_t key = digest_key(split.head + 2 * pair);
      digest_add_keyed(d, v[u].x, key);
      digest_add_keyed(d, v[u].y, key + kDigestKeyStep);
    }
  }
  if (grid_thread() == 0) {
    if (split.head != 0) digest_add(d, data[0], 0);
    if (split.rest != 0) digest_add(d, data[words - 1], words - 1);
    if (tail != 0) digest_add(d, digest_tail_word(reinterpret_cast<const unsigned char*>(data + words), tail), words);
  }
  // Every lane reaches the shuffles: blocks are whole warps and no thread leaves the loop early.
  unsigned long long lo = d.lo;
  unsigned long long hi = d.hi;
  for (int offset = 16; offset > 0; offset /= 2) {
    lo += __shfl_down_sync(0xffffffffu, lo, offset);
    hi += __shfl_down_sync(0xffffffffu, hi, offset);
  }
  if (lane_id() == 0) {
    atomicAdd(reinterpret_cast<unsigned long long*>(&result->lo), lo);
    atomicAdd(reinterpret_cast<unsigned long long*>(&result->hi), hi);
  }
}

}  // namespace

cudaError_t launch_digest_bytes(const void* data, uint64_t bytes, Digest128* device_digest, LaunchShape shape,
                                cudaStream_t stream) {
  const cudaError_t reset = cudaMemsetAsync(device_digest, 0, sizeof(Digest128), stream);
  if (reset != cudaSuccess || bytes == 0) return reset;
  const uint64_t words = bytes / 8;
  digest_kernel<<<blocks_for(words / (2 * kDigestUnroll) + 1, shape), shape.threads, 0, stream>>>(
      static_cast<const uint64_t*>(data), words, static_cast<unsigned>(bytes % 8), device_digest);
  return cudaGetLastError();
}

cudaError_t launch_digest(const uint64_t* data, uint64_t words, Digest128* device_digest, LaunchShape shape,
                          cudaStream_t stream) {
  return launch_digest_bytes(data, words * 8, device_digest, shape, stream);
}

}  // namespace sdc
