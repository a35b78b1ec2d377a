// sdcprobe's own NVML declarations (host/nvml/nvml_abi.hpp, and the clock event reason bits of
// host/burn_conditions.hpp) held against NVIDIA's nvml.h: the size and offsets of each record it
// reads, the value of each constant, each entry point's symbol and signature. Built only where
// nvml.h is found (tests/CMakeLists.txt); a mismatch fails the build.
// The unversioned process lists are the v1 entry points sdcprobe loads, not nvml.h's macros for v3.
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#include "host/burn_conditions.hpp"
#include "host/nvml/nvml_abi.hpp"

namespace sdc {
namespace {

template <typename T, typename = void>
struct IsComplete : std::false_type {};
template <typename T>
struct IsComplete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

// Whether A (ours) passes as B (nvml.h's) does: integers and enums of one size, pointers to such,
// records of one size (their members are checked below), and void for NVML's opaque handles.
template <typename A, typename B>
constexpr bool same_abi() {
  if constexpr (std::is_pointer_v<A> && std::is_pointer_v<B>) {
    using PA = std::remove_pointer_t<A>;
    using PB = std::remove_pointer_t<B>;
    using UA = std::remove_cv_t<PA>;
    using UB = std::remove_cv_t<PB>;
    if constexpr (std::is_const_v<PA> != std::is_const_v<PB>) {
      return false;
    } else if constexpr (std::is_void_v<UA> || std::is_void_v<UB>) {
      return (std::is_void_v<UA> || !IsComplete<UA>::value) && (std::is_void_v<UB> || !IsComplete<UB>::value);
    } else {
      return same_abi<UA, UB>();
    }
  } else if constexpr ((std::is_integral_v<A> || std::is_enum_v<A>)&&(std::is_integral_v<B> || std::is_enum_v<B>)) {
    return sizeof(A) == sizeof(B);
  } else if constexpr (std::is_class_v<A> && std::is_class_v<B>) {
    return sizeof(A) == sizeof(B) && alignof(A) == alignof(B);
  } else {
    return std::is_same_v<A, B>;
  }
}

template <typename R1, typename... A1, typename R2, typename... A2>
constexpr bool same_signature(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2)) {
    return false;
  } else {
    return same_abi<R1, R2>() && (same_abi<A1, A2>() && ...);
  }
}

constexpr bool same_text(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

// `entry` loads the symbol `name`, with nvml.h's signature of it.
#define SDC_NVML_ENTRY(entry, name)                                      \
  static_assert(same_text(entry.symbol, #name), #entry " loads " #name); \
  static_assert(same_signature(std::remove_cv_t<decltype(entry)>::Fn{}, &::name), #entry ": the signature of " #name)

// Our member `ours` of `Ours` lies where nvml.h's `theirs` of `Theirs` does, with its size.
#define SDC_NVML_MEMBER(Ours, ours, Theirs, theirs)                                               \
  static_assert(offsetof(Ours, ours) == offsetof(Theirs, theirs) &&                               \
                    sizeof(std::declval<Ours&>().ours) == sizeof(std::declval<Theirs&>().theirs), \
                #Theirs "::" #theirs)

static_assert(kNvmlSuccess == NVML_SUCCESS);
static_assert(kNvmlInvalidArgument == NVML_ERROR_INVALID_ARGUMENT);
static_assert(kNvmlNotSupported == NVML_ERROR_NOT_SUPPORTED);
static_assert(kNvmlNoPermission == NVML_ERROR_NO_PERMISSION);
static_assert(kNvmlInsufficientSize == NVML_ERROR_INSUFFICIENT_SIZE);
static_assert(kNvmlTimeout == NVML_ERROR_TIMEOUT);
static_assert(kNvmlGpuIsLost == NVML_ERROR_GPU_IS_LOST);
static_assert(kNvmlResetRequired == NVML_ERROR_RESET_REQUIRED);
static_assert(sizeof(NvmlReturn) == sizeof(nvmlReturn_t));

static_assert(kNvmlUuidBytes == NVML_DEVICE_UUID_V2_BUFFER_SIZE);
static_assert(kNvmlNameBytes == NVML_DEVICE_NAME_V2_BUFFER_SIZE);
static_assert(kNvmlMigEnable == NVML_DEVICE_MIG_ENABLE);

// The recovery action came with NVML 565; every CUDA toolkit's nvml.h that has it (12.8 on) has these.
#ifdef NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
static_assert(kNvmlFieldRecoveryAction == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION);
static_assert(kNvmlRecoveryNone == NVML_GPU_RECOVERY_ACTION_NONE);
static_assert(kNvmlRecoveryGpuReset == NVML_GPU_RECOVERY_ACTION_GPU_RESET);
static_assert(kNvmlRecoveryNodeReboot == NVML_GPU_RECOVERY_ACTION_NODE_REBOOT);
static_assert(kNvmlRecoveryDrainP2p == NVML_GPU_RECOVERY_ACTION_DRAIN_P2P);
static_assert(kNvmlRecoveryDrainAndReset == NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET);
#endif

static_assert(kNvmlValueUnsignedInt == NVML_VALUE_TYPE_UNSIGNED_INT);
static_assert(kNvmlValueUnsignedLong == NVML_VALUE_TYPE_UNSIGNED_LONG);
static_assert(kNvmlValueUnsignedLongLong == NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
static_assert(kNvmlMemoryErrorUncorrected == NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
static_assert(kNvmlVolatileEcc == NVML_VOLATILE_ECC);
static_assert(kNvmlRetiredMultipleSingleBit == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS);
static_assert(kNvmlRetiredDoubleBit == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR);
static_assert(kNvmlPstateUnknown == NVML_PSTATE_UNKNOWN);
static_assert(kNvmlEventXidCritical == nvmlEventTypeXidCriticalError);
static_assert(kNvmlTemperatureGpu == NVML_TEMPERATURE_GPU);
static_assert(kNvmlClockSm == NVML_CLOCK_SM);

// nvml.h has the three hardware slowdowns under their "throttle" names only.
static_assert(kClockEventGpuIdle == nvmlClocksEventReasonGpuIdle);
static_assert(kClockEventApplicationsClocks == nvmlClocksEventReasonApplicationsClocksSetting);
static_assert(kClockEventSwPowerCap == nvmlClocksEventReasonSwPowerCap);
static_assert(kClockEventHwSlowdown == nvmlClocksThrottleReasonHwSlowdown);
static_assert(kClockEventSyncBoost == nvmlClocksEventReasonSyncBoost);
static_assert(kClockEventSwThermal == nvmlClocksEventReasonSwThermalSlowdown);
static_assert(kClockEventHwThermal == nvmlClocksThrottleReasonHwThermalSlowdown);
static_assert(kClockEventHwPowerBrake == nvmlClocksThrottleReasonHwPowerBrakeSlowdown);
static_assert(kClockEventDisplayClocks == nvmlClocksEventReasonDisplayClockSetting);

static_assert(sizeof(NvmlProcessInfoV1) == sizeof(nvmlProcessInfo_v1_t));
SDC_NVML_MEMBER(NvmlProcessInfoV1, pid, nvmlProcessInfo_v1_t, pid);
SDC_NVML_MEMBER(NvmlProcessInfoV1, used_gpu_memory, nvmlProcessInfo_v1_t, usedGpuMemory);

static_assert(sizeof(NvmlFieldValue) == sizeof(nvmlFieldValue_t));
SDC_NVML_MEMBER(NvmlFieldValue, field_id, nvmlFieldValue_t, fieldId);
SDC_NVML_MEMBER(NvmlFieldValue, scope_id, nvmlFieldValue_t, scopeId);
SDC_NVML_MEMBER(NvmlFieldValue, timestamp, nvmlFieldValue_t, timestamp);
SDC_NVML_MEMBER(NvmlFieldValue, latency_us, nvmlFieldValue_t, latencyUsec);
SDC_NVML_MEMBER(NvmlFieldValue, value_type, nvmlFieldValue_t, valueType);
SDC_NVML_MEMBER(NvmlFieldValue, rc, nvmlFieldValue_t, nvmlReturn);
SDC_NVML_MEMBER(NvmlFieldValue, value, nvmlFieldValue_t, value);
SDC_NVML_MEMBER(NvmlFieldValue, value.ui, nvmlFieldValue_t, value.uiVal);
SDC_NVML_MEMBER(NvmlFieldValue, value.ul, nvmlFieldValue_t, value.ulVal);
SDC_NVML_MEMBER(NvmlFieldValue, value.ull, nvmlFieldValue_t, value.ullVal);

static_assert(sizeof(NvmlEventData) == sizeof(nvmlEventData_t));
SDC_NVML_MEMBER(NvmlEventData, device, nvmlEventData_t, device);
SDC_NVML_MEMBER(NvmlEventData, type, nvmlEventData_t, eventType);
SDC_NVML_MEMBER(NvmlEventData, data, nvmlEventData_t, eventData);
SDC_NVML_MEMBER(NvmlEventData, gpu_instance, nvmlEventData_t, gpuInstanceId);
SDC_NVML_MEMBER(NvmlEventData, compute_instance, nvmlEventData_t, computeInstanceId);

static_assert(sizeof(NvmlPciInfo) == sizeof(nvmlPciInfo_t));
SDC_NVML_MEMBER(NvmlPciInfo, bus_id_legacy, nvmlPciInfo_t, busIdLegacy);
SDC_NVML_MEMBER(NvmlPciInfo, domain, nvmlPciInfo_t, domain);
SDC_NVML_MEMBER(NvmlPciInfo, bus, nvmlPciInfo_t, bus);
SDC_NVML_MEMBER(NvmlPciInfo, device, nvmlPciInfo_t, device);
SDC_NVML_MEMBER(NvmlPciInfo, device_id, nvmlPciInfo_t, pciDeviceId);
SDC_NVML_MEMBER(NvmlPciInfo, subsystem_id, nvmlPciInfo_t, pciSubSystemId);
SDC_NVML_MEMBER(NvmlPciInfo, bus_id, nvmlPciInfo_t, busId);

SDC_NVML_ENTRY(kNvmlInit, nvmlInit_v2);
SDC_NVML_ENTRY(kNvmlShutdown, nvmlShutdown);
SDC_NVML_ENTRY(kNvmlErrorString, nvmlErrorString);
SDC_NVML_ENTRY(kNvmlDeviceGetCount, nvmlDeviceGetCount_v2);
SDC_NVML_ENTRY(kNvmlDeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex_v2);
SDC_NVML_ENTRY(kNvmlDeviceGetUuid, nvmlDeviceGetUUID);
SDC_NVML_ENTRY(kNvmlDeviceGetName, nvmlDeviceGetName);
SDC_NVML_ENTRY(kNvmlDeviceGetPciInfo, nvmlDeviceGetPciInfo_v3);
SDC_NVML_ENTRY(kNvmlDeviceGetMigMode, nvmlDeviceGetMigMode);
SDC_NVML_ENTRY(kNvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetComputeRunningProcesses);
SDC_NVML_ENTRY(kNvmlDeviceGetGraphicsRunningProcesses, nvmlDeviceGetGraphicsRunningProcesses);
SDC_NVML_ENTRY(kNvmlDeviceGetFieldValues, nvmlDeviceGetFieldValues);
SDC_NVML_ENTRY(kNvmlDeviceGetRemappedRows, nvmlDeviceGetRemappedRows);
SDC_NVML_ENTRY(kNvmlDeviceGetTotalEccErrors, nvmlDeviceGetTotalEccErrors);
SDC_NVML_ENTRY(kNvmlDeviceGetRetiredPages, nvmlDeviceGetRetiredPages);
SDC_NVML_ENTRY(kNvmlDeviceGetRetiredPagesPendingStatus, nvmlDeviceGetRetiredPagesPendingStatus);
SDC_NVML_ENTRY(kNvmlDeviceGetPcieReplayCounter, nvmlDeviceGetPcieReplayCounter);
SDC_NVML_ENTRY(kNvmlDeviceGetCurrPcieLinkGeneration, nvmlDeviceGetCurrPcieLinkGeneration);
SDC_NVML_ENTRY(kNvmlDeviceGetMaxPcieLinkGeneration, nvmlDeviceGetMaxPcieLinkGeneration);
SDC_NVML_ENTRY(kNvmlDeviceGetCurrPcieLinkWidth, nvmlDeviceGetCurrPcieLinkWidth);
SDC_NVML_ENTRY(kNvmlDeviceGetMaxPcieLinkWidth, nvmlDeviceGetMaxPcieLinkWidth);
SDC_NVML_ENTRY(kNvmlDeviceGetPerformanceState, nvmlDeviceGetPerformanceState);
SDC_NVML_ENTRY(kNvmlEventSetCreate, nvmlEventSetCreate);
SDC_NVML_ENTRY(kNvmlDeviceRegisterEvents, nvmlDeviceRegisterEvents);
SDC_NVML_ENTRY(kNvmlEventSetWait, nvmlEventSetWait_v2);
SDC_NVML_ENTRY(kNvmlEventSetFree, nvmlEventSetFree);
SDC_NVML_ENTRY(kNvmlDeviceGetHandleByUuid, nvmlDeviceGetHandleByUUID);
SDC_NVML_ENTRY(kNvmlDeviceGetTemperature, nvmlDeviceGetTemperature);
SDC_NVML_ENTRY(kNvmlDeviceGetClockInfo, nvmlDeviceGetClockInfo);
SDC_NVML_ENTRY(kNvmlDeviceGetMaxClockInfo, nvmlDeviceGetMaxClockInfo);
SDC_NVML_ENTRY(kNvmlDeviceGetPowerUsage, nvmlDeviceGetPowerUsage);
SDC_NVML_ENTRY(kNvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetEnforcedPowerLimit);
SDC_NVML_ENTRY(kNvmlDeviceGetPowerManagementDefaultLimit, nvmlDeviceGetPowerManagementDefaultLimit);
SDC_NVML_ENTRY(kNvmlDeviceGetCurrentClocksEventReasons, nvmlDeviceGetCurrentClocksEventReasons);
SDC_NVML_ENTRY(kNvmlDeviceGetCurrentClocksThrottleReasons, nvmlDeviceGetCurrentClocksThrottleReasons);

}  // namespace
}  // namespace sdc
