// Backends enumerate devices. The CPU backend is always present; the CUDA backend is compiled when
// nvcc is found and offers devices only when the driver reports some.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "host/device.hpp"

namespace sdc {

struct BackendOptions {
  std::string backend = "auto";  // auto | cpu | cuda
  int cpu_devices = 1;
};

// The CPU as `count` virtual devices, each a group of cores (cores are shared when count > cores).
std::vector<std::unique_ptr<Device>> make_cpu_devices(int count);

bool cuda_backend_compiled();
// Every CUDA device the driver reports; empty without a driver or device.
std::vector<std::unique_ptr<Device>> make_cuda_devices();
// Why no CUDA device is available (for "could not test" messages).
std::string cuda_unavailable_reason();

// auto: CUDA devices when any, else the CPU. cuda: throws InputError when none is available.
std::vector<std::unique_ptr<Device>> open_devices(const BackendOptions& options);

}  // namespace sdc
