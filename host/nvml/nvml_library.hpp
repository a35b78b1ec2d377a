// NVML loaded at run time (dlopen), like the driver: the library, its entry points (host/nvml/nvml_abi.hpp),
// its initialisation and its wording of a status. What each reader asks of it is that reader's.
#pragma once

#include <dlfcn.h>

#include <string>

#include "host/error.hpp"
#include "host/nvml/nvml_abi.hpp"

namespace sdc {

// dlopen's failure to load the library.
class NvmlLoadError : public NvmlError {
 public:
  NvmlLoadError(const std::string& library, const std::string& reason);
  // No such file: no driver installed, as opposed to a library that is there but does not load.
  bool not_installed() const { return not_installed_; }

 private:
  bool not_installed_;
};

class NvmlLibrary {
 public:
  // Loads `library` and resolves nvmlInit_v2 and nvmlShutdown; throws NvmlLoadError, or NvmlError
  // naming a missing entry point.
  explicit NvmlLibrary(const std::string& library);
  ~NvmlLibrary();  // nvmlShutdown after an init() that succeeded, then the library unloaded
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // nvmlInit_v2's status.
  NvmlReturn init();

  // An entry point; throws NvmlError "NVML has no <symbol>" when the library lacks it.
  template <typename F>
  F required(NvmlEntry<F> entry) const {
    const F f = optional(entry);
    if (f == nullptr) throw NvmlError(std::string("NVML has no ") + entry.symbol);
    return f;
  }
  // An entry point older drivers may lack: null then.
  template <typename F>
  F optional(NvmlEntry<F> entry) const {
    return reinterpret_cast<F>(dlsym(handle_, entry.symbol));
  }

  // "<call>: <nvmlErrorString(rc)>".
  std::string error(const std::string& call, NvmlReturn rc) const;
  // Throws NvmlError error(call, rc) unless `rc` is success.
  void check(NvmlReturn rc, const std::string& call) const;

 private:
  void* handle_;
  decltype(kNvmlInit)::Fn init_ = nullptr;
  decltype(kNvmlShutdown)::Fn shutdown_ = nullptr;
  bool initialised_ = false;
};

// The GPUs NVML enumerates: their count, and each one's handle and UUID, the entry points resolved
// (NvmlLibrary::required) when made. Each returns NVML's status: the caller decides what a failure is.
class NvmlDevices {
 public:
  explicit NvmlDevices(const NvmlLibrary& nvml)
      : count_(nvml.required(kNvmlDeviceGetCount)),
        handle_(nvml.required(kNvmlDeviceGetHandleByIndex)),
        uuid_(nvml.required(kNvmlDeviceGetUuid)) {}

  NvmlReturn count(unsigned* n) const { return count_(n); }
  NvmlReturn handle(unsigned index, NvmlDevice* device) const { return handle_(index, device); }
  NvmlReturn uuid(NvmlDevice device, std::string& uuid) const;

 private:
  decltype(kNvmlDeviceGetCount)::Fn count_;
  decltype(kNvmlDeviceGetHandleByIndex)::Fn handle_;
  decltype(kNvmlDeviceGetUuid)::Fn uuid_;
};

}  // namespace sdc
