// The order-independent digest (kernels/common/digest.hpp) of a caller's byte range, on the host or
// on a CUDA device: what the C ABI's sdc_digest_host and sdc_digest_cuda compute. Both give the same
// digest for the same bytes; a partial last word is zero-padded (digest_tail_word).
#pragma once

#include <cstddef>

#include "kernels/common/digest.hpp"

namespace sdc {

// On the calling thread; `data` needs no alignment. Throws InputError when data is null or
// bytes is 0.
Digest128 digest_host_bytes(const void* data, size_t bytes);

// Enqueues the digest kernel on `stream` (a cudaStream_t of the device that holds `data`; null is
// that device's legacy default stream) writing *device_out (device memory) in stream order; never
// waits. The caller (the C ABI) has refused null pointers and a zero length. Throws InputError when
// a pointer is not device memory, not 8-byte aligned or on another device than the stream's;
// NoDeviceError without the CUDA backend.
void digest_cuda_bytes(const void* data, size_t bytes, Digest128* device_out, void* stream);

}  // namespace sdc
