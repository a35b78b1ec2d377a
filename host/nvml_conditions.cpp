#include "host/nvml_conditions.hpp"

#include <dlfcn.h>

#include <cmath>
#include <memory>
#include <stdexcept>

namespace sdc {
namespace {

// NVML's C ABI, declared here so that the build needs no NVML header.
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr unsigned kNvmlClockSm = 1;         // NVML_CLOCK_SM

class NvmlConditions {
 public:
  // Resolves every entry point and finds the GPU; throws std::runtime_error saying what failed.
  NvmlConditions(const std::string& library, const std::string& uuid) {
    handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error("cannot load " + library + ": " + dlerror());
    try {
      auto init = symbol<NvmlReturn (*)()>("nvmlInit_v2");
      shutdown_ = symbol<NvmlReturn (*)()>("nvmlShutdown");
      auto by_uuid = symbol<NvmlReturn (*)(const char*, NvmlDevice*)>("nvmlDeviceGetHandleByUUID");
      temperature_ = symbol<NvmlReturn (*)(NvmlDevice, unsigned, unsigned*)>("nvmlDeviceGetTemperature");
      clock_ = symbol<NvmlReturn (*)(NvmlDevice, unsigned, unsigned*)>("nvmlDeviceGetClockInfo");
      auto max_clock = symbol<NvmlReturn (*)(NvmlDevice, unsigned, unsigned*)>("nvmlDeviceGetMaxClockInfo");
      power_ = symbol<NvmlReturn (*)(NvmlDevice, unsigned*)>("nvmlDeviceGetPowerUsage");
      limit_ = symbol<NvmlReturn (*)(NvmlDevice, unsigned*)>("nvmlDeviceGetEnforcedPowerLimit");
      auto default_limit = symbol<NvmlReturn (*)(NvmlDevice, unsigned*)>("nvmlDeviceGetPowerManagementDefaultLimit");
      // The event reasons' entry point before R535 had the "throttle" name.
      reasons_ = reinterpret_cast<Reasons>(dlsym(handle_, "nvmlDeviceGetCurrentClocksEventReasons"));
      if (reasons_ == nullptr)
        reasons_ = reinterpret_cast<Reasons>(dlsym(handle_, "nvmlDeviceGetCurrentClocksThrottleReasons"));
      if (init() != kNvmlSuccess) throw std::runtime_error("nvmlInit_v2 failed");
      initialised_ = true;
      if (by_uuid(uuid.c_str(), &device_) != kNvmlSuccess) throw std::runtime_error("NVML has no GPU " + uuid);
      max_sm_clock_mhz_ = read(max_clock, kNvmlClockSm);
      default_limit_w_ = read(default_limit) / 1e3;
    } catch (...) {
      close();
      throw;
    }
  }
  ~NvmlConditions() { close(); }
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
  using Reasons = NvmlReturn (*)(NvmlDevice, unsigned long long*);
  template <typename F>
  F symbol(const char* name) {
    void* address = dlsym(handle_, name);
    if (address == nullptr) throw std::runtime_error(std::string("NVML has no ") + name);
    return reinterpret_cast<F>(address);
  }
  // A value the driver does not give is NaN.
  double read(NvmlReturn (*fn)(NvmlDevice, unsigned, unsigned*), unsigned which) const {
    unsigned v = 0;
    return fn(device_, which, &v) == kNvmlSuccess ? v : NAN;
  }
  double read(NvmlReturn (*fn)(NvmlDevice, unsigned*)) const {
    unsigned v = 0;
    return fn(device_, &v) == kNvmlSuccess ? v : NAN;
  }
  void close() {
    if (initialised_) shutdown_();
    initialised_ = false;
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
  }

  void* handle_ = nullptr;
  bool initialised_ = false;
  NvmlDevice device_ = nullptr;
  NvmlReturn (*shutdown_)() = nullptr;
  NvmlReturn (*temperature_)(NvmlDevice, unsigned, unsigned*) = nullptr;
  NvmlReturn (*clock_)(NvmlDevice, unsigned, unsigned*) = nullptr;
  NvmlReturn (*power_)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*limit_)(NvmlDevice, unsigned*) = nullptr;
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
