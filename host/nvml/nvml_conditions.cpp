#include "host/nvml/nvml_conditions.hpp"

#include <cmath>
#include <memory>
#include <stdexcept>

#include "host/nvml/nvml_abi.hpp"
#include "host/nvml/nvml_library.hpp"

namespace sdc {
namespace {

class NvmlConditions {
 public:
  // Resolves every entry point and finds the GPU; throws std::runtime_error saying what failed.
  NvmlConditions(const std::string& library, const std::string& uuid) : nvml_(library) {
    auto by_uuid = nvml_.required(kNvmlDeviceGetHandleByUuid);
    temperature_ = nvml_.required(kNvmlDeviceGetTemperature);
    clock_ = nvml_.required(kNvmlDeviceGetClockInfo);
    auto max_clock = nvml_.required(kNvmlDeviceGetMaxClockInfo);
    power_ = nvml_.required(kNvmlDeviceGetPowerUsage);
    limit_ = nvml_.required(kNvmlDeviceGetEnforcedPowerLimit);
    auto default_limit = nvml_.required(kNvmlDeviceGetPowerManagementDefaultLimit);
    // The event reasons' entry point before R535 had the "throttle" name.
    reasons_ = nvml_.optional(kNvmlDeviceGetCurrentClocksEventReasons);
    if (reasons_ == nullptr) reasons_ = nvml_.optional(kNvmlDeviceGetCurrentClocksThrottleReasons);
    if (nvml_.init() != kNvmlSuccess) throw std::runtime_error("nvmlInit_v2 failed");
    if (by_uuid(uuid.c_str(), &device_) != kNvmlSuccess) throw std::runtime_error("NVML has no GPU " + uuid);
    max_sm_clock_mhz_ = read(max_clock, kNvmlClockSm);
    default_limit_w_ = read(default_limit) / 1e3;
  }
  NvmlConditions(const NvmlConditions&) = delete;
  NvmlConditions& operator=(const NvmlConditions&) = delete;

  BurnConditions sample() const {
    BurnConditions c;
    c.temperature_c = read(temperature_, kNvmlTemperatureGpu);
    c.sm_clock_mhz = read(clock_, kNvmlClockSm);
    c.max_sm_clock_mhz = max_sm_clock_mhz_;
    c.power_w = read(power_) / 1e3;
    c.power_limit_w = read(limit_) / 1e3;
    c.default_power_limit_w = default_limit_w_;
    unsigned long long reasons = 0;
    if (reasons_ != nullptr && reasons_(device_, &reasons) == kNvmlSuccess) c.clock_event_reasons = reasons;
    return c;
  }

 private:
  // (device, which, value): the temperature's and the clocks' entry points.
  using ReadWhich = decltype(kNvmlDeviceGetTemperature)::Fn;
  // (device, value): the power usage's and limits'.
  using ReadOne = decltype(kNvmlDeviceGetPowerUsage)::Fn;
  using Reasons = decltype(kNvmlDeviceGetCurrentClocksEventReasons)::Fn;
  // A value the driver does not give is NaN.
  double read(ReadWhich fn, unsigned which) const {
    unsigned v = 0;
    return fn(device_, which, &v) == kNvmlSuccess ? v : NAN;
  }
  double read(ReadOne fn) const {
    unsigned v = 0;
    return fn(device_, &v) == kNvmlSuccess ? v : NAN;
  }
  NvmlLibrary nvml_;
  NvmlDevice device_ = nullptr;
  ReadWhich temperature_ = nullptr;
  ReadWhich clock_ = nullptr;
  ReadOne power_ = nullptr;
  ReadOne limit_ = nullptr;
  Reasons reasons_ = nullptr;
  double max_sm_clock_mhz_ = NAN, default_limit_w_ = NAN;
};

}  // namespace

ConditionsSource nvml_conditions(const std::string& library, const std::string& uuid) {
  try {
    auto nvml = std::make_shared<NvmlConditions>(library, uuid);
    return {[nvml] { return nvml->sample(); }, ""};
  } catch (const std::exception& e) {
    return {nullptr, std::string("NVML: ") + e.what()};
  }
}

}  // namespace sdc
