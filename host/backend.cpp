#include "host/backend.hpp"

#include <algorithm>
#include <cstdio>

#include "host/cpu_device.hpp"
#include "host/cpu_parallel.hpp"
#include "host/error.hpp"
#include "host/pci_inventory.hpp"

namespace sdc {

std::vector<std::unique_ptr<Device>> make_cpu_devices(int count, const std::vector<int>& fail_open) {
  if (count < 1) throw InputError("--cpu-devices must be at least 1");
  const std::vector<int> cores = available_cores();
  std::vector<std::unique_ptr<Device>> devices;
  const size_t n = static_cast<size_t>(count);
  for (size_t d = 0; d < n; ++d) {
    std::vector<int> group;
    if (n <= cores.size()) {
      // Contiguous, near-equal groups.
      for (size_t c = cores.size() * d / n; c < cores.size() * (d + 1) / n; ++c) group.push_back(cores[c]);
    } else {
      group.push_back(cores[d % cores.size()]);
    }
    auto device = std::make_unique<CpuDevice>(static_cast<int>(d), group, count);
    if (std::find(fail_open.begin(), fail_open.end(), static_cast<int>(d)) != fail_open.end()) {
      devices.push_back(make_failed_device(
          device->identity(), "could not open " + device->identity().label() + ": failure injected (test seam)"));
    } else {
      devices.push_back(std::move(device));
    }
  }
  return devices;
}

namespace {

// What is known of a GPU that CUDA does not show: its bus id, and its model and UUID when the driver
// lists it.
DeviceIdentity unseen_gpu_identity(const PciGpu& gpu, int index) {
  DeviceIdentity id;
  id.backend = "cuda";
  id.index = index;
  char device[16];
  std::snprintf(device, sizeof(device), "%04x", gpu.pci_device);
  id.name = !gpu.model.empty() ? gpu.model : "NVIDIA GPU (PCI device " + std::string(device) + ")";
  id.uuid = !gpu.uuid.empty() ? gpu.uuid : "GPU-unseen-" + gpu.pci_bus_id;
  id.pci_bus_id = gpu.pci_bus_id;
  return id;
}

}  // namespace

std::vector<std::unique_ptr<Device>> open_devices(const BackendOptions& options) {
  if (options.backend == "cpu") return make_cpu_devices(options.cpu_devices);
  const std::vector<PciGpu> on_bus = gpus_on_bus(system_root());
  const size_t expected = options.expect_gpus >= 0 ? static_cast<size_t>(options.expect_gpus) : on_bus.size();
  auto gpus = make_cuda_devices();
  if (expected == 0) {
    if (!gpus.empty()) return gpus;
    if (options.backend == "cuda") throw NoDeviceError("--backend cuda: " + cuda_unavailable_reason());
    return make_cpu_devices(options.cpu_devices);
  }
  if (gpus.size() >= expected) return gpus;
  std::vector<DeviceIdentity> seen;
  for (const auto& g : gpus) seen.push_back(g->identity());
  const std::string why = gpus.empty() ? cuda_unavailable_reason()
                                       : "CUDA shows " + std::to_string(gpus.size()) + " of the " +
                                             std::to_string(expected) + " GPUs expected";
  for (const PciGpu& gpu : gpus_not_seen(on_bus, seen)) {
    const DeviceIdentity id = unseen_gpu_identity(gpu, static_cast<int>(gpus.size()));
    gpus.push_back(
        make_failed_device(id, "GPU " + gpu.pci_bus_id + " is on the PCI bus but CUDA does not show it (" + why + ")"));
  }
  // Expected beyond what the bus holds (--expect-gpus): gone from the bus, no bus id to name.
  while (gpus.size() < expected) {
    PciGpu gone;
    gone.pci_bus_id = "absent-" + std::to_string(gpus.size());
    gpus.push_back(make_failed_device(unseen_gpu_identity(gone, static_cast<int>(gpus.size())),
                                      std::to_string(expected) + " GPUs expected but only " +
                                          std::to_string(on_bus.size()) + " on the PCI bus (" + why + ")"));
  }
  return gpus;
}

std::unique_ptr<Device> open_device(const BackendOptions& options, int index) {
  const bool cuda = options.backend == "cuda" || (options.backend != "cpu" && cuda_unavailable_reason().empty());
  if (cuda) {
    if (!cuda_backend_compiled()) throw NoDeviceError("--backend cuda: " + cuda_unavailable_reason());
    return open_cuda_device(index);
  }
  if (index < 0 || index >= options.cpu_devices) {
    throw NoDeviceError("CPU device " + std::to_string(index) + " does not exist (" +
                        std::to_string(options.cpu_devices) + " virtual devices)");
  }
  // Only `index` is kept; CPU devices hold nothing until used, so making the others costs nothing.
  auto devices = make_cpu_devices(options.cpu_devices);
  return std::move(devices[static_cast<size_t>(index)]);
}

}  // namespace sdc
