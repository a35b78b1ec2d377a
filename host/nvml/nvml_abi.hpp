// NVML's C ABI as sdcprobe uses it. NVML is loaded at run time (dlopen), like the driver, so the
// build needs no NVML header: these declarations stand in for nvml.h, and
// tests/host/nvml/nvml_abi_check.cpp holds each of them against NVIDIA's nvml.h wherever one is found.
#pragma once

namespace sdc {

using NvmlReturn = int;  // nvmlReturn_t
using NvmlDevice = void*;
using NvmlEventSet = void*;

constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInvalidArgument = 2;
constexpr NvmlReturn kNvmlNotSupported = 3;
constexpr NvmlReturn kNvmlNoPermission = 4;
constexpr NvmlReturn kNvmlInsufficientSize = 7;
constexpr NvmlReturn kNvmlTimeout = 10;
constexpr NvmlReturn kNvmlGpuIsLost = 15;
constexpr NvmlReturn kNvmlResetRequired = 16;

constexpr unsigned kNvmlUuidBytes = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kNvmlNameBytes = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kNvmlMigEnable = 1;   // NVML_DEVICE_MIG_ENABLE

constexpr unsigned kNvmlFieldRecoveryAction = 230;  // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
// nvmlDeviceGpuRecoveryAction_t. 5 came with NVML 595, 6 and 7 with 615 (NVML's change log).
constexpr unsigned kNvmlRecoveryNone = 0;
constexpr unsigned kNvmlRecoveryGpuReset = 1;
constexpr unsigned kNvmlRecoveryNodeReboot = 2;
constexpr unsigned kNvmlRecoveryDrainP2p = 3;
constexpr unsigned kNvmlRecoveryDrainAndReset = 4;
constexpr unsigned kNvmlRecoveryRecoverImexDomain = 5;
constexpr unsigned kNvmlRecoveryBusReset = 6;
constexpr unsigned kNvmlRecoverySystemReboot = 7;

// nvmlValueType_t
constexpr int kNvmlValueUnsignedInt = 1;
constexpr int kNvmlValueUnsignedLong = 2;
constexpr int kNvmlValueUnsignedLongLong = 3;
constexpr unsigned kNvmlMemoryErrorUncorrected = 1;  // nvmlMemoryErrorType_t
constexpr unsigned kNvmlVolatileEcc = 0;             // nvmlEccCounterType_t
// nvmlPageRetirementCause_t
constexpr unsigned kNvmlRetiredMultipleSingleBit = 0;
constexpr unsigned kNvmlRetiredDoubleBit = 1;
constexpr unsigned kNvmlPstateUnknown = 32;                // NVML_PSTATE_UNKNOWN
constexpr unsigned long long kNvmlEventXidCritical = 0x8;  // nvmlEventTypeXidCriticalError
constexpr unsigned kNvmlTemperatureGpu = 0;                // NVML_TEMPERATURE_GPU
constexpr unsigned kNvmlClockSm = 1;                       // NVML_CLOCK_SM
// The clock event reason bits (nvmlClocksEventReason*) are host/burn_conditions.hpp's kClockEvent*,
// which name them; tests/host/nvml/nvml_abi_check.cpp holds them against nvml.h too.

// The record of the unversioned (v1) process lists, nvmlProcessInfo_v1_t: the driver keeps those
// entry points for existing programs.
struct NvmlProcessInfoV1 {
  unsigned int pid;
  unsigned long long used_gpu_memory;
};

struct NvmlFieldValue {  // nvmlFieldValue_t
  unsigned field_id;
  unsigned scope_id;
  long long timestamp;
  long long latency_us;
  int value_type;  // nvmlValueType_t
  NvmlReturn rc;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
  } value;
};

struct NvmlEventData {  // nvmlEventData_t
  NvmlDevice device;
  unsigned long long type;
  unsigned long long data;  // the XID
  unsigned gpu_instance;
  unsigned compute_instance;
};

struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, device_id, subsystem_id;
  char bus_id[32];
};

// An entry point: its exported symbol, and its C signature as F.
template <typename F>
struct NvmlEntry {
  using Fn = F;
  const char* symbol;
};

constexpr NvmlEntry<NvmlReturn (*)()> kNvmlInit{"nvmlInit_v2"};
constexpr NvmlEntry<NvmlReturn (*)()> kNvmlShutdown{"nvmlShutdown"};
constexpr NvmlEntry<const char* (*)(NvmlReturn)> kNvmlErrorString{"nvmlErrorString"};
constexpr NvmlEntry<NvmlReturn (*)(unsigned*)> kNvmlDeviceGetCount{"nvmlDeviceGetCount_v2"};
constexpr NvmlEntry<NvmlReturn (*)(unsigned, NvmlDevice*)> kNvmlDeviceGetHandleByIndex{"nvmlDeviceGetHandleByIndex_v2"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, char*, unsigned)> kNvmlDeviceGetUuid{"nvmlDeviceGetUUID"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, char*, unsigned)> kNvmlDeviceGetName{"nvmlDeviceGetName"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, NvmlPciInfo*)> kNvmlDeviceGetPciInfo{"nvmlDeviceGetPciInfo_v3"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*, unsigned*)> kNvmlDeviceGetMigMode{"nvmlDeviceGetMigMode"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*, NvmlProcessInfoV1*)> kNvmlDeviceGetComputeRunningProcesses{
    "nvmlDeviceGetComputeRunningProcesses"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*, NvmlProcessInfoV1*)> kNvmlDeviceGetGraphicsRunningProcesses{
    "nvmlDeviceGetGraphicsRunningProcesses"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, int, NvmlFieldValue*)> kNvmlDeviceGetFieldValues{
    "nvmlDeviceGetFieldValues"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*, unsigned*, unsigned*, unsigned*)> kNvmlDeviceGetRemappedRows{
    "nvmlDeviceGetRemappedRows"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned, unsigned, unsigned long long*)> kNvmlDeviceGetTotalEccErrors{
    "nvmlDeviceGetTotalEccErrors"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned, unsigned*, unsigned long long*)> kNvmlDeviceGetRetiredPages{
    "nvmlDeviceGetRetiredPages"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetRetiredPagesPendingStatus{
    "nvmlDeviceGetRetiredPagesPendingStatus"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetPcieReplayCounter{
    "nvmlDeviceGetPcieReplayCounter"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetCurrPcieLinkGeneration{
    "nvmlDeviceGetCurrPcieLinkGeneration"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetMaxPcieLinkGeneration{
    "nvmlDeviceGetMaxPcieLinkGeneration"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetCurrPcieLinkWidth{
    "nvmlDeviceGetCurrPcieLinkWidth"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetMaxPcieLinkWidth{
    "nvmlDeviceGetMaxPcieLinkWidth"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetPerformanceState{
    "nvmlDeviceGetPerformanceState"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlEventSet*)> kNvmlEventSetCreate{"nvmlEventSetCreate"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned long long, NvmlEventSet)> kNvmlDeviceRegisterEvents{
    "nvmlDeviceRegisterEvents"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlEventSet, NvmlEventData*, unsigned)> kNvmlEventSetWait{"nvmlEventSetWait_v2"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlEventSet)> kNvmlEventSetFree{"nvmlEventSetFree"};
constexpr NvmlEntry<NvmlReturn (*)(const char*, NvmlDevice*)> kNvmlDeviceGetHandleByUuid{"nvmlDeviceGetHandleByUUID"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned, unsigned*)> kNvmlDeviceGetTemperature{
    "nvmlDeviceGetTemperature"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned, unsigned*)> kNvmlDeviceGetClockInfo{"nvmlDeviceGetClockInfo"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned, unsigned*)> kNvmlDeviceGetMaxClockInfo{
    "nvmlDeviceGetMaxClockInfo"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetPowerUsage{"nvmlDeviceGetPowerUsage"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetEnforcedPowerLimit{
    "nvmlDeviceGetEnforcedPowerLimit"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned*)> kNvmlDeviceGetPowerManagementDefaultLimit{
    "nvmlDeviceGetPowerManagementDefaultLimit"};
// The clock event reasons; before R535 the entry point had the "throttle" name.
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned long long*)> kNvmlDeviceGetCurrentClocksEventReasons{
    "nvmlDeviceGetCurrentClocksEventReasons"};
constexpr NvmlEntry<NvmlReturn (*)(NvmlDevice, unsigned long long*)> kNvmlDeviceGetCurrentClocksThrottleReasons{
    "nvmlDeviceGetCurrentClocksThrottleReasons"};

}  // namespace sdc
