// The GPUs' own health (host/nvml/nvml_health.hpp) around a level, as `sdcprobe health` prints it, as the
// "health" field of a JSON report, and as a level's verdict names it.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "host/device.hpp"
#include "host/nvml/nvml_health.hpp"

namespace sdc {

// The health of the CUDA devices among `devices` (host/nvml/nvml_health.hpp), read before and after
// `probes` runs; not applicable without one (the CPU backend). `probes` runs exactly once.
HealthReport level_health(const std::vector<DeviceIdentity>& devices, const std::function<void()>& probes);

// {"verdict", "watched", "error"?, "gpus": [{index, uuid, pci_bus_id, name, verdict, conditions:
// {FIELD: {state, detail, readings: {NAME: VALUE}}}}]}.
nlohmann::json health_json(const HealthReport& report);

// A line per GPU (its verdict), a line per condition under it, and a last line with the verdict.
std::string health_text(const HealthReport& report);

// node-problem-detector's verdict, at most 80 characters: "OK: N GPUs healthy", "SDC: <UUID> health
// <field>" (+N more) or "UNKNOWN: could not test: <why>".
std::string health_npd_verdict(const HealthReport& report);

// The faults, for a level's verdict line: "GPU-… health: row_remap (a row remap is pending …); …";
// empty without one.
std::string health_faults(const HealthReport& report);

}  // namespace sdc
