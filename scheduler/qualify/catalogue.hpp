#pragma once

#include "probes/probe.hpp"

namespace sdc {

// The built-in probes, registered once per process.
const ProbeRegistry& builtin_registry();

}  // namespace sdc
