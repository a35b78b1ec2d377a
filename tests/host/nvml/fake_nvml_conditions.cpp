// A stand-in for libnvidia-ml.so.1 with the NVML entry points a burn's conditions read
// (host/nvml/nvml_conditions.cpp): one GPU, GPU-fake-conditions, at 71 C, SM clock 1755 of 1980 MHz,
// power usage not supported, an enforced power limit of 500 W against a default of 700 W, and the
// clock event reasons sw_power_cap and hw_thermal_slowdown. Every other UUID is unknown.
#include <cstring>
#include <type_traits>

#include "host/burn_conditions.hpp"
#include "host/nvml/nvml_abi.hpp"

using sdc::NvmlDevice;
using sdc::NvmlReturn;

extern "C" {
NvmlReturn nvmlInit_v2() { return sdc::kNvmlSuccess; }
NvmlReturn nvmlShutdown() { return sdc::kNvmlSuccess; }
NvmlReturn nvmlDeviceGetHandleByUUID(const char* uuid, NvmlDevice* device) {
  if (std::strcmp(uuid, "GPU-fake-conditions") != 0) return 6;  // NVML_ERROR_NOT_FOUND
  *device = reinterpret_cast<NvmlDevice>(1);
  return sdc::kNvmlSuccess;
}
NvmlReturn nvmlDeviceGetTemperature(NvmlDevice, unsigned sensor, unsigned* t) {
  if (sensor != sdc::kNvmlTemperatureGpu) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *t = 71;
  return sdc::kNvmlSuccess;
}
NvmlReturn nvmlDeviceGetClockInfo(NvmlDevice, unsigned type, unsigned* mhz) {
  *mhz = type == sdc::kNvmlClockSm ? 1755 : 1000;
  return sdc::kNvmlSuccess;
}
NvmlReturn nvmlDeviceGetMaxClockInfo(NvmlDevice, unsigned type, unsigned* mhz) {
  *mhz = type == sdc::kNvmlClockSm ? 1980 : 1000;
  return sdc::kNvmlSuccess;
}
NvmlReturn nvmlDeviceGetPowerUsage(NvmlDevice, unsigned*) { return sdc::kNvmlNotSupported; }
NvmlReturn nvmlDeviceGetEnforcedPowerLimit(NvmlDevice, unsigned* mw) {
  *mw = 500000;
  return sdc::kNvmlSuccess;
}
NvmlReturn nvmlDeviceGetPowerManagementDefaultLimit(NvmlDevice, unsigned* mw) {
  *mw = 700000;
  return sdc::kNvmlSuccess;
}
NvmlReturn nvmlDeviceGetCurrentClocksEventReasons(NvmlDevice, unsigned long long* reasons) {
  *reasons = sdc::kClockEventSwPowerCap | sdc::kClockEventHwThermal;
  return sdc::kNvmlSuccess;
}
}

// Each entry point has the signature sdcprobe loads it with.
template <typename F, typename G>
constexpr bool loads_as(F, sdc::NvmlEntry<G>) {
  return std::is_same_v<F, G>;
}
static_assert(loads_as(&nvmlInit_v2, sdc::kNvmlInit));
static_assert(loads_as(&nvmlShutdown, sdc::kNvmlShutdown));
static_assert(loads_as(&nvmlDeviceGetHandleByUUID, sdc::kNvmlDeviceGetHandleByUuid));
static_assert(loads_as(&nvmlDeviceGetTemperature, sdc::kNvmlDeviceGetTemperature));
static_assert(loads_as(&nvmlDeviceGetClockInfo, sdc::kNvmlDeviceGetClockInfo));
static_assert(loads_as(&nvmlDeviceGetMaxClockInfo, sdc::kNvmlDeviceGetMaxClockInfo));
static_assert(loads_as(&nvmlDeviceGetPowerUsage, sdc::kNvmlDeviceGetPowerUsage));
static_assert(loads_as(&nvmlDeviceGetEnforcedPowerLimit, sdc::kNvmlDeviceGetEnforcedPowerLimit));
static_assert(loads_as(&nvmlDeviceGetPowerManagementDefaultLimit, sdc::kNvmlDeviceGetPowerManagementDefaultLimit));
static_assert(loads_as(&nvmlDeviceGetCurrentClocksEventReasons, sdc::kNvmlDeviceGetCurrentClocksEventReasons));
