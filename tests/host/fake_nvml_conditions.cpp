// A stand-in for libnvidia-ml.so.1 with the NVML entry points a burn's conditions read
// (host/nvml_conditions.cpp): one GPU, GPU-fake-conditions, at 71 C, SM clock 1755 of 1980 MHz,
// power usage not supported, an enforced power limit of 500 W against a default of 700 W, and the
// clock event reasons sw_power_cap and hw_thermal_slowdown. Every other UUID is unknown.
#include <cstring>

extern "C" {
int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  if (std::strcmp(uuid, "GPU-fake-conditions") != 0) return 6;  // NVML_ERROR_NOT_FOUND
  *device = reinterpret_cast<void*>(1);
  return 0;
}
int nvmlDeviceGetTemperature(void*, unsigned sensor, unsigned* t) {
  if (sensor != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *t = 71;
  return 0;
}
int nvmlDeviceGetClockInfo(void*, unsigned type, unsigned* mhz) {
  *mhz = type == 1 ? 1755 : 1000;
  return 0;
}
int nvmlDeviceGetMaxClockInfo(void*, unsigned type, unsigned* mhz) {
  *mhz = type == 1 ? 1980 : 1000;
  return 0;
}
int nvmlDeviceGetPowerUsage(void*, unsigned*) { return 3; }  // NVML_ERROR_NOT_SUPPORTED
int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned* mw) {
  *mw = 500000;
  return 0;
}
int nvmlDeviceGetPowerManagementDefaultLimit(void*, unsigned* mw) {
  *mw = 700000;
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void*, unsigned long long* reasons) {
  *reasons = 0x4 | 0x40;
  return 0;
}
}
