#include "host/cuda/cuda_error.hpp"

#include <cstdio>
#include <string>

namespace sdc {

bool is_sticky_cuda_error(cudaError_t code) {
  // The runtime documents each of these as leaving the process in an inconsistent state, or as an
  // uncorrectable hardware error: every later call fails, so the device needs a fresh process.
  // cudaErrorContained (226) and cudaErrorTensorMemoryLeak (721) are matched by value: older
  // toolkits that a GPU machine may carry do not name them.
  switch (static_cast<int>(code)) {
    case 226:
    case 721:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice: return true;
    default: return false;
  }
}

namespace {

std::string describe_cuda(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code);
}

std::string describe_cublas(cublasStatus_t status) {
  return std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status);
}

}  // namespace

void throw_cuda_error(cudaError_t code, const char* expression, const char* file, int line) {
  throw CudaError(static_cast<int>(code), is_sticky_cuda_error(code), expression, file, line, describe_cuda(code));
}

void throw_cublas_error(cublasStatus_t status, const char* expression, const char* file, int line) {
  // cuBLAS reports a failed kernel as EXECUTION_FAILED; the context's own error says whether it
  // was sticky. Peeking does not clear it.
  const cudaError_t context = cudaPeekAtLastError();
  std::string message = describe_cublas(status);
  if (context != cudaSuccess) message += " (CUDA: " + describe_cuda(context) + ")";
  throw CudaError(static_cast<int>(status), is_sticky_cuda_error(context), expression, file, line, message,
                  CudaError::Source::kCublas);
}

// No allocation here: these run in destructors and must not throw.
void log_cuda_error(cudaError_t code, const char* expression, const char* file, int line) noexcept {
  std::fprintf(stderr, "sdcprobe: %s: %s%s (%s at %s:%d)\n", cudaGetErrorName(code), cudaGetErrorString(code),
               is_sticky_cuda_error(code) ? " [sticky]" : "", expression, file, line);
}

void log_cublas_error(cublasStatus_t status, const char* expression, const char* file, int line) noexcept {
  std::fprintf(stderr, "sdcprobe: %s: %s (%s at %s:%d)\n", cublasGetStatusName(status), cublasGetStatusString(status),
               expression, file, line);
}

}  // namespace sdc
