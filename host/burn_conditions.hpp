// What a sustained burn records about the device once a second: temperature, SM clock, power
// against its limit and the clock-event reasons (power cap, thermal and hardware slowdown), which
// fleets find SDC to depend on. A backend that cannot read them says so; nothing is made up.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sdc {

// One sample. A field the driver did not answer is NaN (reasons: nullopt).
struct BurnConditions {
  double temperature_c = 0;
  double sm_clock_mhz = 0;
  double max_sm_clock_mhz = 0;  // the SM clock the GPU can reach (NVML's maximum)
  double power_w = 0;
  double power_limit_w = 0;                     // the limit enforced now
  double default_power_limit_w = 0;             // the board's default: an enforced limit below it is a cap
  std::optional<uint64_t> clock_event_reasons;  // NVML's clock event reason bits
};

// Samples the device's conditions now.
using ConditionsSampler = std::function<BurnConditions()>;

// A device's sampler, or why it has none (sample empty).
struct ConditionsSource {
  ConditionsSampler sample;
  std::string unavailable;
};

// NVML's clock event reason bits (nvmlClocksEventReason*).
inline constexpr uint64_t kClockEventGpuIdle = 0x1;
inline constexpr uint64_t kClockEventApplicationsClocks = 0x2;
inline constexpr uint64_t kClockEventSwPowerCap = 0x4;
inline constexpr uint64_t kClockEventHwSlowdown = 0x8;
inline constexpr uint64_t kClockEventSyncBoost = 0x10;
inline constexpr uint64_t kClockEventSwThermal = 0x20;
inline constexpr uint64_t kClockEventHwThermal = 0x40;
inline constexpr uint64_t kClockEventHwPowerBrake = 0x80;
inline constexpr uint64_t kClockEventDisplayClocks = 0x100;

// The names of the bits set in `mask` ("sw_power_cap", "hw_thermal_slowdown", ...; unknown bits as
// "bit N").
std::vector<std::string> clock_event_reason_names(uint64_t mask);

}  // namespace sdc
