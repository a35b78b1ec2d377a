#include "host/backend.hpp"

#include "host/cpu_device.hpp"
#include "host/cpu_parallel.hpp"
#include "host/error.hpp"

namespace sdc {

std::vector<std::unique_ptr<Device>> make_cpu_devices(int count) {
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
    devices.push_back(std::make_unique<CpuDevice>(static_cast<int>(d), group));
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

}  // namespace sdc
