// A GPU's burn conditions (host/burn_conditions.hpp) read through NVML, loaded at run time (dlopen)
// like the driver, as host/nvml/nvml_processes.cpp does.
#pragma once

#include <string>

#include "host/burn_conditions.hpp"

namespace sdc {

// The sampler of the GPU whose NVML UUID is `uuid`, from `library` (nvml_library_name()); without
// one (no NVML, no such GPU, an entry point missing) `unavailable` says why. NVML stays loaded
// while the sampler lives.
ConditionsSource nvml_conditions(const std::string& library, const std::string& uuid);

}  // namespace sdc
