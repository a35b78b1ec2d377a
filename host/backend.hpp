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
  // How many GPUs CUDA must show; -1: every GPU on the PCI bus (gpus_on_bus). Set it where fewer
  // are visible on purpose (CUDA_VISIBLE_DEVICES, a container's device set).
  int expect_gpus = -1;
};

// The CPU as `count` virtual devices, each a group of cores (cores are shared when count > cores).
// Those in `fail_open` are failed devices (make_failed_device), as a GPU on which no context can be
// made: a test seam proving that one bad device leaves the others tested.
std::vector<std::unique_ptr<Device>> make_cpu_devices(int count, const std::vector<int>& fail_open = {});

bool cuda_backend_compiled();
// Every CUDA device the driver reports; empty without a driver or device. A GPU that cannot be
// read becomes a failed device (make_failed_device), never an exception. No context is made here:
// each device makes its own on first use.
std::vector<std::unique_ptr<Device>> make_cuda_devices();
// CUDA device `ordinal` alone, reading no other GPU and making no context until first use.
// Throws NoDeviceError when the ordinal does not exist, CudaError when its properties cannot be read.
std::unique_ptr<Device> open_cuda_device(int ordinal);
// Why no CUDA device is available (for "could not test" messages).
std::string cuda_unavailable_reason();

// cpu: the CPU. auto and cuda, when GPUs are expected (on the PCI bus, or expect_gpus): the CUDA
// devices, and a failed device (make_failed_device) for each GPU on the bus that CUDA does not show
// when it shows fewer than expected, with CUDA's error text: a broken driver or a GPU off the bus is a
// fault of the node, never a CPU run. No GPU expected: auto is CUDA when it shows any, else the CPU;
// cuda throws NoDeviceError when it shows none.
std::vector<std::unique_ptr<Device>> open_devices(const BackendOptions& options);
// Device `index` alone (a CUDA ordinal, or a CPU virtual device of options.cpu_devices), chosen as
// open_devices chooses the backend. Throws NoDeviceError when it does not exist.
std::unique_ptr<Device> open_device(const BackendOptions& options, int index);

}  // namespace sdc
