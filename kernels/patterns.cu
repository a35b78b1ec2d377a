// Memory pattern kernels: fill and March-style verify. Expected words come from pattern_word_of,
// never from a reference buffer. The kind is a template parameter so that the inner loops carry
// no switch, as on the CPU backend.
#include <type_traits>

#include "kernels/common/patterns.hpp"
#include "kernels/device_util.cuh"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

template <PatternKind K>
__device__ __forceinline__ uint64_t word_of(const Pattern& p, uint64_t invert, uint64_t i) {
  return pattern_word_of<K>(p, i) ^ invert;
}

template <PatternKind K>
__global__ void fill_kernel(uint64_t* data, uint64_t words, Pattern p) {
  const uint64_t invert = p.inverted ? ~0ULL : 0;
  const uint64_t stride = grid_stride();
  for (uint64_t i = grid_thread(); i < words; i += stride) data[i] = word_of<K>(p, invert, i);
}

template <PatternKind K>
__device__ __forceinline__ void verify_word(uint64_t* data, uint64_t i, const Pattern& expect, uint64_t invert,
                                            const Pattern& write, bool do_write, DeviceMismatchLog* log) {
  const uint64_t observed = data[i];
  const uint64_t expected = word_of<K>(expect, invert, i);
  // No SM or lane: they are the reader's; the word's address (8 * i) locates the fault.
  record_mismatch_if(observed != expected, log, i, expected, observed, kNoUnit, kNoUnit);
  if (do_write) data[i] = pattern_word(write, i);
}

// Descending order, as far as a parallel device allows: the thread index map is reversed (block 0,
// usually scheduled first, takes the top of the buffer, and a warp's lanes take descending
// addresses), and each thread walks its grid-stride indices from high to low. Threads of
// different warps still interleave, so the order is descending per thread, not globally.
template <PatternKind K>
__global__ void verify_kernel(uint64_t* data, uint64_t words, Pattern expect, Pattern write, bool do_write,
                              bool descending, DeviceMismatchLog* log) {
  const uint64_t invert = expect.inverted ? ~0ULL : 0;
  const uint64_t stride = grid_stride();
  if (!descending) {
    for (uint64_t i = grid_thread(); i < words; i += stride) {
      verify_word<K>(data, i, expect, invert, write, do_write, log);
    }
    return;
  }
  const uint64_t first = stride - 1 - grid_thread();
  if (first >= words) return;
  for (uint64_t i = first + (words - 1 - first) / stride * stride;; i -= stride) {
    verify_word<K>(data, i, expect, invert, write, do_write, log);
    if (i < stride) break;
  }
}

// Calls f with the pattern kind as a compile-time constant.
template <typename F>
void with_kind(PatternKind kind, F&& f) {
  switch (kind) {
    case PatternKind::kOwnAddress: f(std::integral_constant<PatternKind, PatternKind::kOwnAddress>{}); break;
    case PatternKind::kWalkingOnes: f(std::integral_constant<PatternKind, PatternKind::kWalkingOnes>{}); break;
    case PatternKind::kWalkingZeros: f(std::integral_constant<PatternKind, PatternKind::kWalkingZeros>{}); break;
    case PatternKind::kSolid: f(std::integral_constant<PatternKind, PatternKind::kSolid>{}); break;
    case PatternKind::kCheckerboard: f(std::integral_constant<PatternKind, PatternKind::kCheckerboard>{}); break;
    case PatternKind::kWalking8: f(std::integral_constant<PatternKind, PatternKind::kWalking8>{}); break;
    case PatternKind::kModulo20: f(std::integral_constant<PatternKind, PatternKind::kModulo20>{}); break;
    case PatternKind::kRandom: f(std::integral_constant<PatternKind, PatternKind::kRandom>{}); break;
    case PatternKind::kRandomBlocks: f(std::integral_constant<PatternKind, PatternKind::kRandomBlocks>{}); break;
  }
}

}  // namespace

cudaError_t launch_fill(uint64_t* data, uint64_t words, const Pattern& p, LaunchShape shape, cudaStream_t stream) {
  if (words == 0) return cudaSuccess;
  if (static_cast<uint32_t>(p.kind) >= kPatternKinds) return cudaErrorInvalidValue;
  with_kind(p.kind, [&](auto kind) {
    fill_kernel<decltype(kind)::value><<<blocks_for(words, shape), shape.threads, 0, stream>>>(data, words, p);
  });
  return cudaGetLastError();
}

cudaError_t launch_verify(uint64_t* data, uint64_t words, const Pattern& expect, const Pattern* then_write,
                          bool descending, DeviceMismatchLog* log, LaunchShape shape, cudaStream_t stream) {
  if (static_cast<uint32_t>(expect.kind) >= kPatternKinds) return cudaErrorInvalidValue;
  const cudaError_t reset = cudaMemsetAsync(log, 0, sizeof(DeviceMismatchLog), stream);
  if (reset != cudaSuccess || words == 0) return reset;
  const Pattern write = then_write ? *then_write : expect;
  with_kind(expect.kind, [&](auto kind) {
    verify_kernel<decltype(kind)::value><<<blocks_for(words, shape), shape.threads, 0, stream>>>(
        data, words, expect, write, then_write != nullptr, descending, log);
  });
  return cudaGetLastError();
}

}  // namespace sdc
