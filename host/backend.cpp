#include "host/backend.hpp"

#include <algorithm>

#include "host/cpu_device.hpp"
#include "host/cpu_parallel.hpp"
#include "host/error.hpp"

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
    auto device = std::make_unique<CpuDevice>(static_cast<int>(d), group);
    if (std::find(fail_open.begin(), fail_open.end(), static_cast<int>(d)) != fail_open.end()) {
      devices.push_back(make_failed_device(
          device->identity(), "could not open " + device->identity().label() + ": failure injected (test seam)"));
    } else {
      devices.push_back(std::move(device));
    }
  }
  return devices;
}

std::vector<std::unique_ptr<Device>> open_devices(const BackendOptions& options) {
  if (options.backend == "cpu") return make_cpu_devices(options.cpu_devices);
  auto gpus = make_cuda_devices();
  if (!gpus.empty()) return gpus;
  if (options.backend == "cuda") throw NoDeviceError("--backend cuda: " + cuda_unavailable_reason());
  return make_cpu_devices(options.cpu_devices);
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
