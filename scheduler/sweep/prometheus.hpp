// Prometheus textfile output (node_exporter's textfile collector). Device series carry
// dcgm-exporter's label names (gpu, UUID, pci_bus_id, Hostname, modelName) so they join with DCGM's
// metrics in PromQL, and every series is written with an explicit zero rather than left out.
#pragma once

#include <string>
#include <vector>

#include "host/device.hpp"
#include "host/nvml/nvml_health.hpp"
#include "scheduler/sweep/history.hpp"
#include "scheduler/sweep/quarantine.hpp"

namespace sdc {

inline constexpr const char* kPromFile = "sdcprobe.prom";

// The metrics for `devices`, from the history: per device and probe (the union of `probe_ids` and
// every probe the history holds for it) runs, failures and last duration; per device health,
// quarantine and last run time; and the build.
std::string render_prometheus(const History& history, const std::vector<DeviceIdentity>& devices,
                              const std::vector<std::string>& probe_ids, const std::string& host,
                              const QuarantinePolicy& policy, double now);

// The GPUs' own health (host/nvml/nvml_health.hpp), with NVML's labels (gpu is NVML's index, as
// dcgm-exporter's): per GPU and condition, whether it is a fault and whether it was judged at all
// (0 when not supported, not tested or not readable), and each figure read; and whether the driver
// answered. Empty when not applicable (no NVIDIA GPU).
std::string render_health_prometheus(const HealthReport& health, const std::string& host);

// Writes DIR/sdcprobe.prom atomically: a temporary file in DIR, mode 0644, then rename. Removes the
// temporaries of writers that died before their rename.
void write_prometheus(const std::string& dir, const std::string& text);

}  // namespace sdc
