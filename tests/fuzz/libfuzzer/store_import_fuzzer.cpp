// The store import's reading of a JSON report (`fleet import`): the fleet reader's checks, then the
// run's own readers (identity_from_json, result_from_json), then the rows. Properties, as the seeded
// FleetFuzz test: the report becomes whole rows (every line a JSON object of this schema version,
// ending in a newline) or is refused with an InputError whose message starts with its name; never
// another exception. Seeds (corpus/store_import/): the single reports of corpus/fleet/, whose header
// in fleet_fuzzer.cpp says how the real binary wrote them.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fleet/store_import.hpp"
#include "host/error.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  std::vector<StoreFile> files;
  try {
    files = report_store_files("node.json", fuzz::as_text(data, size));
  } catch (const InputError& e) {
    SDC_FUZZ_CHECK(std::string(e.what()).rfind("node.json: ", 0) == 0, e.what());
    return 0;
  }
  for (const StoreFile& f : files) {
    SDC_FUZZ_CHECK(!f.rows.empty() && f.rows.back() == '\n', f.table);
    size_t start = 0;
    for (size_t end; (end = f.rows.find('\n', start)) != std::string::npos; start = end + 1) {
      const nlohmann::json row = nlohmann::json::parse(f.rows.substr(start, end - start), nullptr, false);
      SDC_FUZZ_CHECK(row.is_object() && row.value("schema_version", 0) == kStoreSchemaVersion,
                     f.rows.substr(start, end - start));
    }
  }
  return 0;
}
