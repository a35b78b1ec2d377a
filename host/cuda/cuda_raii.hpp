// Move-only owners of CUDA resources. Constructors throw CudaError; destructors release under the
// owning device, log failures (SDC_CUDA_LOG) and never throw.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "host/cuda/cuda_context.hpp"
#include "host/cuda/cuda_error.hpp"

namespace sdc {

namespace detail {

// Makes `device` current unless it already is, and puts back exactly the context that was current
// before (none, on a fresh thread: restoring "device 0" there would initialise GPU 0). Without the
// driver's entry points it falls back to the runtime's current device.
class ContextSwitch {
 public:
  // Failures are returned, not thrown, so destructors can use it.
  cudaError_t enter(int device) noexcept {
    previous_ = current_cuda_context();
    if (!previous_.known) {
      const cudaError_t got = cudaGetDevice(&previous_device_);
      if (got != cudaSuccess) return got;
      if (previous_device_ == device) return cudaSuccess;
    } else if (previous_.context != nullptr) {
      int current = -1;
      const cudaError_t got = cudaGetDevice(&current);
      if (got != cudaSuccess) return got;
      if (current == device) return cudaSuccess;
    }
    const cudaError_t set = cudaSetDevice(device);
    switched_ = set == cudaSuccess;
    return set;
  }
  cudaError_t leave() noexcept {
    if (!switched_) return cudaSuccess;
    switched_ = false;
    return previous_.known ? restore_cuda_context(previous_) : cudaSetDevice(previous_device_);
  }

 private:
  CurrentContext previous_;
  int previous_device_ = 0;
  bool switched_ = false;
};

}  // namespace detail

// Makes `device` current for the scope and restores what was current before; throws CudaError.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) { SDC_CUDA_TRY(switch_.enter(device)); }
  ~DeviceGuard() { SDC_CUDA_LOG(switch_.leave()); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  detail::ContextSwitch switch_;
};

// The same for destructors and cleanup paths: failures are logged, nothing throws. ok() says
// whether `device` is current.
class NothrowDeviceGuard {
 public:
  explicit NothrowDeviceGuard(int device) noexcept {
    const cudaError_t entered = switch_.enter(device);
    ok_ = entered == cudaSuccess;
    if (!ok_) log_cuda_error(entered, "cudaSetDevice(device)", __FILE__, __LINE__);
  }
  ~NothrowDeviceGuard() { SDC_CUDA_LOG(switch_.leave()); }
  NothrowDeviceGuard(const NothrowDeviceGuard&) = delete;
  NothrowDeviceGuard& operator=(const NothrowDeviceGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  detail::ContextSwitch switch_;
  bool ok_ = false;
};

namespace detail {

// Runs `release` with `device` current, for destructors: failures are logged, nothing throws.
template <typename Release>
void release_on(int device, Release&& release) noexcept {
  NothrowDeviceGuard guard(device);
  release();
}

// Move-only ownership of one handle; Traits::release(handle) frees it (logging, not throwing).
template <typename Traits>
class Owner {
 public:
  using Handle = typename Traits::Handle;

  Owner() = default;
  ~Owner() { reset(); }
  Owner(Owner&& other) noexcept : device_(other.device_), handle_(std::exchange(other.handle_, Handle{})) {}
  Owner& operator=(Owner&& other) noexcept {
    if (this != &other) {
      reset();
      device_ = other.device_;
      handle_ = std::exchange(other.handle_, Handle{});
    }
    return *this;
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;

  Handle get() const { return handle_; }
  int device() const { return device_; }

 protected:
  Owner(int device, Handle handle) : device_(device), handle_(handle) {}

 private:
  void reset() noexcept {
    if (handle_ == Handle{}) return;
    const Handle h = std::exchange(handle_, Handle{});
    release_on(device_, [h] { Traits::release(h); });
  }

  int device_ = -1;
  Handle handle_{};
};

struct StreamTraits {
  using Handle = cudaStream_t;
  static Handle create() {
    Handle h{};
    SDC_CUDA_TRY(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking));
    return h;
  }
  static void release(Handle h) noexcept { SDC_CUDA_LOG(cudaStreamDestroy(h)); }
};

struct EventTraits {
  using Handle = cudaEvent_t;
  static Handle create() {
    Handle h{};
    SDC_CUDA_TRY(cudaEventCreate(&h));
    return h;
  }
  static void release(Handle h) noexcept { SDC_CUDA_LOG(cudaEventDestroy(h)); }
};

struct CublasTraits {
  using Handle = cublasHandle_t;
  static Handle create() {
    Handle h{};
    SDC_CUBLAS_TRY(cublasCreate(&h));
    return h;
  }
  static void release(Handle h) noexcept { SDC_CUBLAS_LOG(cublasDestroy(h)); }
};

struct CublasLtTraits {
  using Handle = cublasLtHandle_t;
  static Handle create() {
    Handle h{};
    SDC_CUBLAS_TRY(cublasLtCreate(&h));
    return h;
  }
  static void release(Handle h) noexcept { SDC_CUBLAS_LOG(cublasLtDestroy(h)); }
};

// Creates the handle with `device` current, since streams, events and cuBLAS handles bind to the
// device current at creation.
template <typename Traits>
class DeviceOwner : public Owner<Traits> {
 public:
  DeviceOwner() = default;
  explicit DeviceOwner(int device) : Owner<Traits>(device, create_on(device)) {}

 private:
  static typename Traits::Handle create_on(int device) {
    DeviceGuard guard(device);
    return Traits::create();
  }
};

}  // namespace detail

using Stream = detail::DeviceOwner<detail::StreamTraits>;
using Event = detail::DeviceOwner<detail::EventTraits>;
using CublasHandle = detail::DeviceOwner<detail::CublasTraits>;
using CublasLtHandle = detail::DeviceOwner<detail::CublasLtTraits>;

// Device memory from cudaMalloc on `device`. Zero bytes allocate nothing (get() is null), since
// cudaMalloc's answer for a zero size is not one to rely on.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(int device, size_t bytes) : device_(device), bytes_(bytes) {
    if (bytes == 0) return;
    DeviceGuard guard(device);
    SDC_CUDA_TRY(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceMemory() { reset(); }
  DeviceMemory(DeviceMemory&& other) noexcept
      : device_(other.device_), ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& other) noexcept {
    if (this != &other) {
      reset();
      device_ = other.device_;
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void reset() noexcept {
    if (ptr_ == nullptr) return;
    void* p = std::exchange(ptr_, nullptr);
    bytes_ = 0;
    detail::release_on(device_, [p] { SDC_CUDA_LOG(cudaFree(p)); });
  }

  int device_ = -1;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace sdc
