// The driver context current on the calling thread, read and restored without creating one. The
// runtime cannot tell "no context" from "device 0" (cudaGetDevice answers 0 on a fresh thread), and
// since CUDA 12 cudaSetDevice(0) initialises GPU 0, so the guards ask the driver directly, through
// entry points the runtime hands out: no link to libcuda, which machines without a driver lack.
#pragma once

#include <cuda_runtime_api.h>

namespace sdc {

struct CurrentContext {
  bool known = false;       // false when the driver's entry points are unavailable (old driver)
  void* context = nullptr;  // CUcontext; null when none is current
};

CurrentContext current_cuda_context() noexcept;
// Makes `context` (possibly null: none) current on this thread again.
cudaError_t restore_cuda_context(const CurrentContext& previous) noexcept;

}  // namespace sdc
