#include "host/nvml/nvml_processes.hpp"

#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "host/error.hpp"
#include "host/nvml/nvml_abi.hpp"
#include "host/nvml/nvml_library.hpp"

namespace sdc {
namespace {

class Nvml {
 public:
  // Resolves every entry point before NVML is initialised.
  explicit Nvml(const std::string& library)
      : nvml_(library),
        devices_(nvml_),
        // The unversioned (v1) process lists, whose record is {pid, used memory}: the driver keeps
        // them for existing programs, and sdcprobe reads only the pid.
        compute_(nvml_.required(kNvmlDeviceGetComputeRunningProcesses)),
        graphics_(nvml_.required(kNvmlDeviceGetGraphicsRunningProcesses)),
        // Drivers before MIG (R450) have no MIG query, and so no GPU in MIG mode.
        mig_mode_(nvml_.optional(kNvmlDeviceGetMigMode)) {
    nvml_.check(nvml_.init(), "nvmlInit_v2");
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  GpuProcessList processes() {
    GpuProcessList list;
    list.driver_present = true;
    unsigned count = 0;
    nvml_.check(devices_.count(&count), "nvmlDeviceGetCount_v2");
    for (unsigned i = 0; i < count; ++i) {
      NvmlDevice device = nullptr;
      const NvmlReturn rc = devices_.handle(i, &device);
      if (rc == kNvmlNoPermission) {
        list.denied.push_back(i);
        continue;
      }
      nvml_.check(rc, "nvmlDeviceGetHandleByIndex_v2");
      std::string uuid;
      nvml_.check(devices_.uuid(device, uuid), "nvmlDeviceGetUUID");
      list.gpus.push_back(uuid);
      if (mig_enabled(device)) list.mig_gpus.push_back(uuid);
      for (unsigned pid : pids(compute_, device, "nvmlDeviceGetComputeRunningProcesses")) add(list, uuid, pid);
      // A GPU without graphics may not support its graphics list: then it has no graphics process.
      for (unsigned pid : pids(graphics_, device, "nvmlDeviceGetGraphicsRunningProcesses", kNvmlNotSupported)) {
        add(list, uuid, pid);
      }
    }
    return list;
  }

 private:
  using ProcessList = decltype(kNvmlDeviceGetComputeRunningProcesses)::Fn;
  using MigMode = decltype(kNvmlDeviceGetMigMode)::Fn;

  // A GPU that cannot have MIG answers "not supported".
  bool mig_enabled(NvmlDevice device) {
    if (mig_mode_ == nullptr) return false;
    unsigned current = 0, pending = 0;
    const NvmlReturn rc = mig_mode_(device, &current, &pending);
    if (rc == kNvmlNotSupported) return false;
    nvml_.check(rc, "nvmlDeviceGetMigMode");
    return current == kNvmlMigEnable;
  }
  // The list can grow between the call that sizes it and the one that fills it: ask again.
  // `empty_on` (when not success) is a status that means an empty list.
  std::vector<unsigned> pids(ProcessList list_fn, NvmlDevice device, const char* call,
                             NvmlReturn empty_on = kNvmlSuccess) {
    std::vector<NvmlProcessInfoV1> infos(16);
    for (int attempt = 0; attempt < 8; ++attempt) {
      unsigned count = static_cast<unsigned>(infos.size());
      const NvmlReturn rc = list_fn(device, &count, infos.data());
      if (rc == kNvmlInsufficientSize) {
        infos.resize(count + 16);
        continue;
      }
      if (rc != kNvmlSuccess && rc == empty_on) return {};
      nvml_.check(rc, call);
      std::vector<unsigned> out;
      for (unsigned i = 0; i < count && i < infos.size(); ++i) out.push_back(infos[i].pid);
      return out;
    }
    throw NvmlError(std::string(call) + ": the process list kept growing");
  }
  static void add(GpuProcessList& list, const std::string& uuid, unsigned pid) {
    for (const GpuProcess& p : list.processes) {
      if (p.gpu_uuid == uuid && p.pid == pid) return;
    }
    list.processes.push_back({uuid, pid});
  }

  NvmlLibrary nvml_;
  NvmlDevices devices_;
  ProcessList compute_;
  ProcessList graphics_;
  MigMode mig_mode_;
};

}  // namespace

std::string nvml_library_name() {
  const char* name = std::getenv("SDCPROBE_NVML_LIBRARY");
  return name != nullptr && *name != '\0' ? name : "libnvidia-ml.so.1";
}

GpuProcessList nvml_gpu_processes(const std::string& library) {
  std::unique_ptr<Nvml> nvml;
  try {
    nvml = std::make_unique<Nvml>(library);
  } catch (const NvmlLoadError& e) {
    // Not installed: no driver, so no NVIDIA GPU to be in use. Any other failure is an answer nobody has.
    if (e.not_installed()) return {};
    throw;
  }
  return nvml->processes();
}

}  // namespace sdc
