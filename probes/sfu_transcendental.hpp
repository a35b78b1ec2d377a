// sfu.transcendental's FP64 reference, kept per input set: for repeated and inline runs of one seed
// the host's check is a subtraction and a division per element, not an FP64 libm call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "probes/reference_cache.hpp"

namespace sdc {

// Element i (sfu_transcendental.cpp's layout): the FP64 result and the error its bound allows.
struct SfuReferenceSet {
  std::vector<double> reference;
  std::vector<double> allowed;
  size_t bytes() const { return (reference.size() + allowed.size()) * sizeof(double); }
};

// The last kSfuCacheSets input sets are kept, up to kSfuCacheBytes in all. A sweep pass draws a new
// seed, so a new pass gets a new input set.
inline constexpr size_t kSfuCacheSets = 2;
inline constexpr size_t kSfuCacheBytes = 256u << 20;

// The reference of input set (seed, per_function), computed on the host from the seeded inputs
// alone, never from a device's output. nullptr for a set larger than kSfuCacheBytes: the probe then
// computes each element's reference as it checks it, holding none of them. `beat` is the device's
// heartbeat, called as the reference progresses.
std::shared_ptr<const SfuReferenceSet> sfu_reference_set(uint64_t seed, uint64_t per_function,
                                                         const std::function<void()>& beat = {});
ReferenceCacheStats sfu_reference_cache_stats();

}  // namespace sdc
