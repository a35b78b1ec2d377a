// The sweep's idle check for GPUs: a node is idle when no process runs on any of its GPUs, except
// the sweep itself (the check's own process and its ancestors). Outside the host's pid namespace
// NVML hides other containers' processes, so no process listed there is "cannot see", never idle.
// A GPU this process may not open (a cgroup gives it to another job) is not its: named, not judged.
// The process list is a parameter, so that the rule is tested on the CPU; `sdcprobe idle` reads it
// from NVML.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "host/nvml/nvml_processes.hpp"

namespace sdc {

struct IdleVerdict {
  bool idle = false;
  bool blind = false;  // not idle because nobody can tell: NVML cannot see other containers' processes
  std::string reason;  // one line: what was seen
};

using GpuProcessSource = std::function<GpuProcessList()>;

// Throws what `source` throws (the driver did not answer): the caller reports that as busy.
IdleVerdict gpu_idle(const GpuProcessSource& source, const std::vector<unsigned>& ignored_pids, bool sees_every_pid);

// This process and its ancestors up to pid 1, from /proc/PID/stat.
std::vector<unsigned> process_and_ancestors();

// Whether this process runs in the host's (the initial) pid namespace, where NVML lists every process.
bool in_host_pid_namespace();

}  // namespace sdc
