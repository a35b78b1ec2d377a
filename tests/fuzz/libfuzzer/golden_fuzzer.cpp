// The golden file loader (docs/consensus.md). Properties: a file loads with its sizes and
// iterations in the CLI's ranges, or the error names the file and the field.
#include <cstdint>
#include <string>

#include "host/error.hpp"
#include "probes/probe.hpp"
#include "scheduler/consensus/golden.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"
#include "tests/fuzz/properties.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  const std::string path = fuzz::write_scratch("golden.json", fuzz::as_text(data, size));
  try {
    const GoldenFile g = load_golden(path);
    SDC_FUZZ_CHECK(!g.iterations || (*g.iterations >= 1 && *g.iterations <= kMaxIterations), "iterations");
    SDC_FUZZ_CHECK(!g.size_bytes || (*g.size_bytes >= 8 && *g.size_bytes <= kMaxGoldenSizeBytes), "size_bytes");
  } catch (const InputError& e) {
    SDC_FUZZ_CHECK(fuzz::names_a_golden_field(e.what(), path), e.what());
  }
  return 0;
}
