// Linked when the CUDA backend is not built (SDC_CUDA=OFF, or no nvcc at build time).
#include "host/backend.hpp"
#include "host/byte_digest.hpp"
#include "host/error.hpp"

namespace sdc {

bool cuda_backend_compiled() { return false; }
std::vector<std::unique_ptr<Device>> make_cuda_devices() { return {}; }
std::unique_ptr<Device> open_cuda_device(int /*ordinal*/) {
  throw NoDeviceError("this sdcprobe was built without the CUDA backend (SDC_CUDA=OFF or no nvcc)");
}
void digest_cuda_bytes(const void* /*data*/, size_t /*bytes*/, Digest128* /*device_out*/, void* /*stream*/) {
  throw NoDeviceError("this sdcprobe was built without the CUDA backend (SDC_CUDA=OFF or no nvcc)");
}
std::string cuda_unavailable_reason() {
  return "this sdcprobe was built without the CUDA backend (SDC_CUDA=OFF or no nvcc)";
}

}  // namespace sdc
