// One flight-recorder dump (a pickle or its JSON form, as torch 2.15 writes them) read as both
// ranks of a job of two. Properties: the pickle reader and the dump's checks refuse with an
// InputError only (a pickle's error names its byte, a field's the dump), and the attribution
// names as culprits only the two dumped ranks and agrees with its verdict.
// Seeds in corpus/flight_recorder/: dumps of tests/goodput/data/flight_recorder/ (record.py).
#include <cstdint>
#include <string>

#include "goodput/flight_recorder.hpp"
#include "goodput/hang_attribution.hpp"
#include "goodput/pickle_reader.hpp"
#include "host/error.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  using namespace sdc::goodput;
  const std::string bytes = fuzz::as_text(data, size);
  nlohmann::json parsed;
  if (!bytes.empty() && static_cast<uint8_t>(bytes[0]) == 0x80) {
    try {
      parsed = read_pickle(bytes);
    } catch (const InputError& e) {
      SDC_FUZZ_CHECK(std::string(e.what()).rfind("byte ", 0) == 0, e.what());
      return 0;
    }
  } else {
    parsed = nlohmann::json::parse(bytes, nullptr, false);
    if (parsed.is_discarded()) return 0;
  }
  try {
    const FrDump a = parse_fr_dump(parsed, "dump", 0);
    const FrDump b = parse_fr_dump(parsed, "dump", 1);
    const HangReport report = attribute_hang({a, b}, 0);
    for (const HangRank& r : report.culprits) SDC_FUZZ_CHECK(r.rank == 0 || r.rank == 1, r.why);
    SDC_FUZZ_CHECK((report.verdict == HangReport::Verdict::kCulprit) == !report.culprits.empty(), "verdict");
  } catch (const InputError& e) {
    SDC_FUZZ_CHECK(std::string(e.what()).rfind("dump: ", 0) == 0, e.what());
  }
  return 0;
}
