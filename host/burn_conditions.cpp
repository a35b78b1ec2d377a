#include "host/burn_conditions.hpp"

namespace sdc {

std::vector<std::string> clock_event_reason_names(uint64_t mask) {
  static const struct {
    uint64_t bit;
    const char* name;
  } kNames[] = {{kClockEventGpuIdle, "gpu_idle"},
                {kClockEventApplicationsClocks, "applications_clocks_setting"},
                {kClockEventSwPowerCap, "sw_power_cap"},
                {kClockEventHwSlowdown, "hw_slowdown"},
                {kClockEventSyncBoost, "sync_boost"},
                {kClockEventSwThermal, "sw_thermal_slowdown"},
                {kClockEventHwThermal, "hw_thermal_slowdown"},
                {kClockEventHwPowerBrake, "hw_power_brake_slowdown"},
                {kClockEventDisplayClocks, "display_clock_setting"}};
  std::vector<std::string> names;
  uint64_t known = 0;
  for (const auto& n : kNames) {
    known |= n.bit;
    if (mask & n.bit) names.emplace_back(n.name);
  }
  for (int b = 0; b < 64; ++b) {
    if ((mask >> b & 1) && !(known >> b & 1)) names.push_back("bit " + std::to_string(b));
  }
  return names;
}

}  // namespace sdc
