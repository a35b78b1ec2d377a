// fleet sdc --topology (docs/consensus.md, "Topology"): the line format and Slurm's topology.conf with
// hostlist expressions. Properties: a well-formed topology, or an error naming a line of the input.
#include <algorithm>
#include <cstdint>
#include <string>

#include "fleet/fleet_topology.hpp"
#include "host/error.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"
#include "tests/fuzz/properties.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  const std::string text = fuzz::as_text(data, size);
  const uint64_t lines = static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  try {
    SDC_FUZZ_CHECK(fuzz::topology_well_formed(parse_topology("t", text)), text);
  } catch (const InputError& e) {
    SDC_FUZZ_CHECK(fuzz::names_a_topology_line(e.what(), "t", lines), e.what());
  }
  return 0;
}
