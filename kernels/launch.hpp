// Host-callable launchers for the CUDA kernels. Each enqueues its work on `stream` and returns the
// launch status (cudaGetLastError); the caller synchronises and turns errors into exceptions.
// Pointers named `device_*` or documented as device memory must point to device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/device_mismatch.hpp"
#include "kernels/common/digest.hpp"
#include "kernels/common/patterns.hpp"

namespace sdc {

// Kernels grid-stride, so any grid is correct; `max_blocks` only bounds the grid to what fills the
// device. `threads` must be a multiple of 32 so that element i of a grid-stride loop runs on lane
// i % 32 (the lane-mask injection model and lane attribution rely on it).
struct LaunchShape {
  unsigned max_blocks = 1;
  unsigned threads = 256;
};

enum class ChainKernel : uint32_t { kFma32, kFma64, kInt64, kDivSqrt32, kDivSqrt64 };

struct XorEntry {
  uint64_t index;
  uint64_t mask;
};

// A fault plan in the kernels' terms, applied in the CPU backend's order: XORs one after another
// (so repeated indices compose as on the host), then the stuck bit, then the lane mask.
struct CorruptionPlan {
  const XorEntry* device_xors = nullptr;
  uint64_t xor_count = 0;
  bool lane_mask = false;
  uint64_t group = 1;
  uint32_t lane = 0;
  uint32_t lanes = 32;
  uint64_t mask = 0;
  bool stuck = false;
  uint64_t stuck_index = 0;
  unsigned stuck_bit = 0;
  bool stuck_value = true;
};

// Writes pattern_word(p, i) to words [0, words). `data` must be 16-byte aligned (as cudaMalloc's
// pointers are): cudaErrorInvalidValue otherwise.
cudaError_t launch_fill(uint64_t* data, uint64_t words, const Pattern& p, LaunchShape shape, cudaStream_t stream);

// Compares every word with pattern_word(expect, i); when `then_write` is not null, rewrites each
// word with pattern_word(*then_write, i) after reading it. Each thread reads a group of 16-byte
// vectors, then checks and rewrites them in turn; `descending` walks each thread's vectors from
// high to low, with the grid's index map reversed (kernels/common/sweep.hpp). `data` must be
// 16-byte aligned. Resets `log` (device memory) first.
cudaError_t launch_verify(uint64_t* data, uint64_t words, const Pattern& expect, const Pattern* then_write,
                          bool descending, DeviceMismatchLog* log, LaunchShape shape, cudaStream_t stream);

// Runs `copies` chain copies; copy c starts from seed index c % seeds and writes
// kChainOutputsPerCopy elements at out + c * kChainOutputsPerCopy (floats for kFma32, doubles for
// kFma64, uint64 otherwise). producers[c] receives (smid << 5) | laneid of the thread that ran it.
cudaError_t launch_chains(ChainKernel kind, uint64_t seed, uint32_t seeds, uint64_t copies, uint32_t iterations,
                          void* out, uint32_t* producers, LaunchShape shape, cudaStream_t stream);

// Checks the chain outputs (elements of `width_bits`) against device_goldens, kChainOutputsPerCopy
// zero-extended words per seed, attributing each mismatch to the copy's producer. Resets `log`.
cudaError_t launch_check_chains(const void* out, unsigned width_bits, uint64_t copies, const uint64_t* device_goldens,
                                uint32_t seeds, const uint32_t* producers, DeviceMismatchLog* log, LaunchShape shape,
                                cudaStream_t stream);

// Order-independent digest of words [0, words) into *device_digest (reset first).
cudaError_t launch_digest(const uint64_t* data, uint64_t words, Digest128* device_digest, LaunchShape shape,
                          cudaStream_t stream);

// The same digest of `bytes` bytes at `data` (8-byte aligned device memory), a partial last word
// zero-padded (digest_tail_word), into *device_digest (reset first).
cudaError_t launch_digest_bytes(const void* data, uint64_t bytes, Digest128* device_digest, LaunchShape shape,
                                cudaStream_t stream);

// Applies `plan` to `elements` elements of `width_bits` (8, 16, 32 or 64) at `data`.
cudaError_t launch_corruption(void* data, unsigned width_bits, uint64_t elements, const CorruptionPlan& plan,
                              LaunchShape shape, cudaStream_t stream);

// sfu.transcendental: writes the six hardware approximations of kernels/common/sfu.hpp for
// `per_function` seeded inputs each to out (device memory, kSfuFunctions * per_function floats;
// function f at [f * per_function, (f + 1) * per_function)). Element i runs on lane i % 32.
cudaError_t launch_sfu(uint64_t seed, uint64_t per_function, float* out, LaunchShape shape, cudaStream_t stream);

// Peak FP32 FMA loop: every thread of exactly shape.max_blocks x shape.threads runs
// kPeakFmaChains independent chains of `iterations` FMAs and writes one float to out[thread].
inline constexpr unsigned kPeakFmaChains = 8;
cudaError_t launch_peak_fma32(float* out, uint32_t iterations, LaunchShape shape, cudaStream_t stream);

}  // namespace sdc
