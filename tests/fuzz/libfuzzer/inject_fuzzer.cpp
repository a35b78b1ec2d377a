// The --inject grammar (docs/injection.md). Properties: a spec parses with every field in range and
// plans corruption inside the probe's elements, or the error names the field or clause.
#include <cstdint>
#include <string>
#include <vector>

#include "host/error.hpp"
#include "host/injection.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"
#include "tests/fuzz/properties.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  const std::string text = fuzz::as_text(data, size);
  const std::vector<std::string> probes = {"alu.fma32", "mem.own_address"};
  const std::vector<std::pair<int, std::string>> devices = {{0, "CPU-a"}, {1, "CPU-b"}};
  std::vector<InjectionSpec> specs;
  try {
    specs = parse_injection_specs(text);
    check_injection_targets(specs, probes, devices);
  } catch (const InputError& e) {
    SDC_FUZZ_CHECK(fuzz::names_an_inject_field(e.what()), e.what());
    return 0;
  }
  bool plannable = true;
  for (const auto& s : specs) {
    SDC_FUZZ_CHECK(s.bit >= -1 && s.bit <= 63, text);
    SDC_FUZZ_CHECK(s.bits >= 2 && s.bits <= 64, text);
    SDC_FUZZ_CHECK(s.count >= 1 && s.count <= (1u << 20), text);
    SDC_FUZZ_CHECK(s.lane < s.lanes, text);
    SDC_FUZZ_CHECK(s.probability > 0 && s.probability <= 1, text);
    plannable = plannable && s.model != FaultModel::kHang && s.model != FaultModel::kCrash && s.count <= 4096;
  }
  if (!plannable) return 0;
  Injector injector(specs, size);
  for (const auto& probe : probes) {
    for (const auto& [index, uuid] : devices) {
      InjectionPoint point;
      point.probe = probe;
      point.device_index = index;
      point.device_uuid = uuid;
      point.elements = 1 + size % 97;
      point.width_bits = size % 2 ? 32 : 64;
      const Corruption c = injector.plan(point);
      for (const auto& x : c.xors) SDC_FUZZ_CHECK(x.index < point.elements, text);
      if (c.stuck) {
        SDC_FUZZ_CHECK(c.stuck_index < point.elements, text);
        SDC_FUZZ_CHECK(c.stuck_bit < point.width_bits, text);
      }
    }
  }
  return 0;
}
