// The fleet aggregates reader (`fleet sdc --aggregates`, and --store after the engine): the tables an
// engine wrote, as a case of tests/fuzz/aggregates_case.hpp. Properties, as the seeded FleetFuzz
// test: the tables are read, or refused with an InputError naming a file under the folder; never
// another exception. Seeds: corpus/fleet_aggregates/ (aggregates_case.hpp says how they were made).
#include <unistd.h>

#include <cstdint>
#include <string>

#include "fleet/fleet_aggregates.hpp"
#include "host/error.hpp"
#include "tests/fuzz/aggregates_case.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  static const std::string dir =
      (std::filesystem::temp_directory_path() / ("fleet_aggregates_fuzzer_" + std::to_string(::getpid()))).string();
  fuzz::write_aggregates_case(dir, fuzz::as_text(data, size));
  try {
    read_fleet_aggregates(dir);
  } catch (const InputError& e) {
    SDC_FUZZ_CHECK(std::string(e.what()).find(dir) != std::string::npos, e.what());
  }
  return 0;
}
