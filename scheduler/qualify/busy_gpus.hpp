// No harm to the jobs beside a level: a level takes most of a GPU's free memory, so it tests a GPU
// only when NVML shows no other process on it and could show one (docs/operating.md, "Busy GPUs").
// MIG is refused: sdcprobe tests whole GPUs, and a worker's CUDA_VISIBLE_DEVICES=GPU-<uuid> does
// not select a MIG instance. The process list is a parameter, so that the rule is tested on the CPU.
#pragma once

#include <string>
#include <vector>

#include "host/device.hpp"
#include "host/nvml/nvml_processes.hpp"

namespace sdc {

struct GpuSight {
  std::vector<unsigned> own_pids;  // this run's processes (itself and its ancestors): never "other"
  // NVML lists only the processes of the pid namespace it is asked from: outside the host's, other
  // containers' processes are hidden, and a GPU that looks free may not be.
  bool sees_every_pid = true;
  bool allocated = false;  // the operator states the GPUs were given to this run alone (--allocated)
};

// Why the CUDA devices among `tested` must not be tested, one line; empty when they may be. MIG
// first, then other processes, then a process list that cannot show them. CPU devices never are.
std::string busy_gpu_refusal(const std::vector<DeviceIdentity>& tested, const GpuProcessList& list,
                             const GpuSight& sight);

// The MIG part alone, for the sweep, whose idle check decides the rest before each pass.
std::string mig_refusal(const std::vector<DeviceIdentity>& tested, const GpuProcessList& list);

}  // namespace sdc
