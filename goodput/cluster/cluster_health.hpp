// What the GPUs say about their own health, as `sdcprobe health --json` reports it, for the work
// list: a node whose hang-culprit GPU shows a fault there (an XID, a recovery action the driver asks
// for, ...) is marked as hardware (docs/goodput.md, "Cluster").
#pragma once

#include <map>
#include <string>
#include <vector>

namespace sdc::goodput::cluster {

// A GPU's UUID -> the fields of its conditions in fault ("recovery_action", "xid"), sorted, over every
// report given; GPUs without a fault are absent.
using GpuFaults = std::map<std::string, std::vector<std::string>>;

// Throws InputError naming the file and the field.
GpuFaults read_gpu_faults(const std::vector<std::string>& paths);

}  // namespace sdc::goodput::cluster
