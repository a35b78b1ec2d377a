#include "host/cuda/cuda_context.hpp"

#include <cuda.h>

namespace sdc {
namespace {

struct ContextEntryPoints {
  CUresult (*get)(CUcontext*) = nullptr;
  CUresult (*set)(CUcontext) = nullptr;
};

// Looked up once per process; both stay null when the driver offers neither.
const ContextEntryPoints& entry_points() noexcept {
  static const ContextEntryPoints points = [] {
    ContextEntryPoints p;
    void* get = nullptr;
    void* set = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess &&
        cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &set, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess) {
      p.get = reinterpret_cast<CUresult (*)(CUcontext*)>(get);
      p.set = reinterpret_cast<CUresult (*)(CUcontext)>(set);
    }
    (void)cudaGetLastError();  // a failed lookup must not resurface in an unrelated check
    return p;
  }();
  return points;
}

}  // namespace

CurrentContext current_cuda_context() noexcept {
  CurrentContext current;
  const ContextEntryPoints& p = entry_points();
  CUcontext context = nullptr;
  if (p.get == nullptr || p.get(&context) != CUDA_SUCCESS) return current;
  current.known = true;
  current.context = context;
  return current;
}

cudaError_t restore_cuda_context(const CurrentContext& previous) noexcept {
  const ContextEntryPoints& p = entry_points();
  if (!previous.known || p.set == nullptr) return cudaErrorNotSupported;
  return p.set(static_cast<CUcontext>(previous.context)) == CUDA_SUCCESS ? cudaSuccess : cudaErrorDeviceUninitialized;
}

}  // namespace sdc
