#include "scheduler/qualify/catalogue.hpp"

namespace sdc {

const ProbeRegistry& builtin_registry() {
  static const ProbeRegistry registry = [] {
    ProbeRegistry r;
    register_builtin_probes(r);
    return r;
  }();
  return registry;
}

}  // namespace sdc
