#include "host/nvml/nvml_library.hpp"

#include <cstring>

namespace sdc {

NvmlLoadError::NvmlLoadError(const std::string& library, const std::string& reason)
    : NvmlError("cannot load " + library + ": " + reason),
      not_installed_(reason.find("No such file") != std::string::npos) {}

NvmlLibrary::NvmlLibrary(const std::string& library) : handle_(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (handle_ == nullptr) throw NvmlLoadError(library, dlerror());
  try {
    init_ = required(kNvmlInit);
    shutdown_ = required(kNvmlShutdown);
  } catch (...) {
    dlclose(handle_);
    throw;
  }
}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_) shutdown_();
  dlclose(handle_);
}

NvmlReturn NvmlLibrary::init() {
  const NvmlReturn rc = init_();
  initialised_ = rc == kNvmlSuccess;
  return rc;
}

std::string NvmlLibrary::error(const std::string& call, NvmlReturn rc) const {
  return call + ": " + required(kNvmlErrorString)(rc);
}

void NvmlLibrary::check(NvmlReturn rc, const std::string& call) const {
  if (rc != kNvmlSuccess) throw NvmlError(error(call, rc));
}

NvmlReturn NvmlDevices::uuid(NvmlDevice device, std::string& uuid) const {
  char text[kNvmlUuidBytes] = {};
  const NvmlReturn rc = uuid_(device, text, sizeof text);
  if (rc == kNvmlSuccess) uuid = std::string(text, strnlen(text, sizeof text));
  return rc;
}

}  // namespace sdc
