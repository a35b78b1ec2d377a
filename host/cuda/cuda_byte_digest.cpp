// sdc_digest_cuda: the digest kernel on the caller's stream, over the caller's memory.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "host/backend.hpp"
#include "host/byte_digest.hpp"
#include "host/cuda/cuda_error.hpp"
#include "host/cuda/cuda_raii.hpp"
#include "host/error.hpp"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

constexpr unsigned kThreadsPerBlock = 256;
constexpr unsigned kBlocksPerSm = 8;

// The device that holds `p`; InputError naming `what` when it is host memory.
int device_of(const void* p, const char* what) {
  cudaPointerAttributes a{};
  SDC_CUDA_TRY(cudaPointerGetAttributes(&a, p));
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) {
    throw InputError(std::string(what) + " is not CUDA device memory");
  }
  return a.device;
}

}  // namespace

void digest_cuda_bytes(const void* data, size_t bytes, Digest128* device_out, void* stream) {
  const std::string unavailable = cuda_unavailable_reason();
  if (!unavailable.empty()) throw NoDeviceError(unavailable);
  // The kernel loads whole words; a misaligned view is copied by the caller (the Python package does).
  if (reinterpret_cast<uintptr_t>(data) % 8 != 0 || reinterpret_cast<uintptr_t>(device_out) % 8 != 0) {
    throw InputError("data and out must be 8-byte aligned");
  }
  const int device = device_of(data, "data");
  if (device_of(device_out, "out") != device) throw InputError("data and out are on different devices");
  DeviceGuard guard(device);
  if (stream != nullptr) {
    int owner = -1;
    SDC_CUDA_TRY(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &owner));
    if (owner != device) {
      throw InputError("stream belongs to device " + std::to_string(owner) + ", data to device " +
                       std::to_string(device));
    }
  }
  int sms = 1;
  SDC_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const LaunchShape shape{static_cast<unsigned>(sms > 0 ? sms : 1) * kBlocksPerSm, kThreadsPerBlock};
  SDC_CUDA_TRY(launch_digest_bytes(data, bytes, device_out, shape, static_cast<cudaStream_t>(stream)));
}

}  // namespace sdc
