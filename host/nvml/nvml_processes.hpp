// The processes the NVIDIA driver lists on each GPU, through NVML's process lists. NVML is loaded
// at run time (dlopen), like the driver, so a machine without the driver still runs sdcprobe.
#pragma once

#include <string>
#include <vector>

namespace sdc {

struct GpuProcess {
  std::string gpu_uuid;
  unsigned pid = 0;  // in the driver's (the host's) pid namespace
};

struct GpuProcessList {
  bool driver_present = false;        // false: no NVML library to load, so no NVIDIA GPU to be in use
  std::vector<std::string> gpus;      // every GPU's UUID, in NVML's order
  std::vector<GpuProcess> processes;  // compute and graphics, each (GPU, pid) once
  std::vector<std::string> mig_gpus;  // the GPUs whose current MIG mode is enabled
  // The NVML indices of the GPUs this process may not open (NVML_ERROR_NO_PERMISSION: a cgroup, as
  // Slurm's ConstrainDevices or a container's, gives them to another job): not its, never listed above.
  // `{}`: aggregate initialisers that stop before it need no -Wmissing-field-initializers exception.
  std::vector<unsigned> denied{};
};

// The NVML library sdcprobe loads: $SDCPROBE_NVML_LIBRARY when set, else libnvidia-ml.so.1.
std::string nvml_library_name();

// Every GPU's compute and graphics processes, and its MIG mode, but for the GPUs this process may
// not open. Throws NvmlError when NVML loads but does not answer (initialisation, a device or a list
// fails): then nobody can tell whether the GPUs are idle.
GpuProcessList nvml_gpu_processes(const std::string& library);

}  // namespace sdc
