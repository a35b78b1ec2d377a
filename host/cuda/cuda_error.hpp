// CUDA and cuBLAS status checks. SDC_CUDA_TRY / SDC_CUBLAS_TRY throw sdc::CudaError carrying the
// code, the sticky flag, the expression, file and line. Destructors use SDC_CUDA_LOG /
// SDC_CUBLAS_LOG, which report a failure on stderr and never throw.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "host/error.hpp"

namespace sdc {

// True for errors that leave the CUDA context unusable: the process must exit and the device be
// retested in a fresh one (illegal address, ECC, launch failure, ...).
bool is_sticky_cuda_error(cudaError_t code);

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* expression, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expression, const char* file, int line);
void log_cuda_error(cudaError_t code, const char* expression, const char* file, int line) noexcept;
void log_cublas_error(cublasStatus_t status, const char* expression, const char* file, int line) noexcept;

}  // namespace sdc

#define SDC_CUDA_TRY(expr)                                                                                     \
  do {                                                                                                         \
    const cudaError_t sdc_cuda_status_ = (expr);                                                               \
    if (sdc_cuda_status_ != cudaSuccess) ::sdc::throw_cuda_error(sdc_cuda_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define SDC_CUDA_LOG(expr)                                                                                   \
  do {                                                                                                       \
    const cudaError_t sdc_cuda_status_ = (expr);                                                             \
    if (sdc_cuda_status_ != cudaSuccess) ::sdc::log_cuda_error(sdc_cuda_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define SDC_CUBLAS_TRY(expr)                                                    \
  do {                                                                          \
    const cublasStatus_t sdc_cublas_status_ = (expr);                           \
    if (sdc_cublas_status_ != CUBLAS_STATUS_SUCCESS)                            \
      ::sdc::throw_cublas_error(sdc_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define SDC_CUBLAS_LOG(expr)                                                  \
  do {                                                                        \
    const cublasStatus_t sdc_cublas_status_ = (expr);                         \
    if (sdc_cublas_status_ != CUBLAS_STATUS_SUCCESS)                          \
      ::sdc::log_cublas_error(sdc_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)
