#include "scheduler/qualify/busy_gpus.hpp"

#include <algorithm>

namespace sdc {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool contains_pid(const std::vector<unsigned>& v, unsigned pid) {
  return std::find(v.begin(), v.end(), pid) != v.end();
}

std::vector<const DeviceIdentity*> opened_gpus(const std::vector<DeviceIdentity>& tested) {
  std::vector<const DeviceIdentity*> gpus;
  for (const DeviceIdentity& d : tested) {
    if (d.backend == "cuda" && d.open_error.empty()) gpus.push_back(&d);
  }
  return gpus;
}

std::string mig_refusal(const DeviceIdentity& d, const GpuProcessList& list) {
  if (list.mig_gpus.empty()) return "";
  const bool whole = contains(list.mig_gpus, d.uuid);
  // A CUDA device that NVML does not list as a GPU, on a node with MIG on, is one of its instances.
  if (!whole && contains(list.gpus, d.uuid)) return "";
  const std::string gpu = whole ? d.uuid : list.mig_gpus.front();
  return "MIG mode is enabled on GPU " + gpu +
         (whole ? " (" + d.label() + ")" : " (CUDA lists its instance " + d.label() + " [" + d.uuid + "])") +
         ": sdcprobe tests whole GPUs; disable MIG (nvidia-smi -i " + gpu + " -mig 0) to test it";
}

}  // namespace

std::string mig_refusal(const std::vector<DeviceIdentity>& tested, const GpuProcessList& list) {
  for (const DeviceIdentity* d : opened_gpus(tested)) {
    const std::string why = mig_refusal(*d, list);
    if (!why.empty()) return why;
  }
  return "";
}

std::string busy_gpu_refusal(const std::vector<DeviceIdentity>& tested, const GpuProcessList& list,
                             const GpuSight& sight) {
  const std::vector<const DeviceIdentity*> gpus = opened_gpus(tested);
  if (gpus.empty()) return "";
  const std::string mig = mig_refusal(tested, list);
  if (!mig.empty()) return mig;
  std::string busy;
  for (const DeviceIdentity* d : gpus) {
    std::string pids;
    size_t others = 0;
    for (const GpuProcess& p : list.processes) {
      if (p.gpu_uuid != d->uuid || contains_pid(sight.own_pids, p.pid)) continue;
      pids += (pids.empty() ? "pid " : ", pid ") + std::to_string(p.pid);
      ++others;
    }
    if (others == 0) continue;
    busy += std::string(busy.empty() ? "busy: " : "; ") + std::to_string(others) + " other process" +
            (others == 1 ? "" : "es") + " on " + d->label() + " [" + d->uuid + "] (" + pids + ")";
  }
  if (!busy.empty()) return busy + ": not tested, as a level takes most of a GPU's free memory";
  if (sight.allocated) return "";
  if (!list.driver_present) return "cannot see the GPUs' processes: no NVML (" + nvml_library_name() + ")";
  if (!sight.sees_every_pid) {
    return "cannot see other containers' GPU processes outside the host's pid namespace (a pod needs hostPID: "
           "true; GPUs given to this run alone: --allocated)";
  }
  return "";
}

}  // namespace sdc
