// The goodput reader and ledger over one event log, strict and lenient. The first byte picks
// --keep-checkpoints (1 to 4, or the default 64) so that restores to forgotten checkpoints are
// reached. Properties: a breakdown always sums exactly; a strict error names a line of the log;
// lenient reading accounts for every line (read or skipped) and agrees with a strict read that
// succeeded; and the reader, which reads a piece of lines at once, gives what reading each line alone
// gives, strict and lenient.
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "goodput/analyze.hpp"
#include "host/error.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"
#include "tests/fuzz/line_reading.hpp"
#include "tests/fuzz/properties.hpp"

namespace {

// Lines holding more than spaces, tabs and carriage returns, as the reader counts them.
uint64_t non_blank_lines(const std::string& log, uint64_t& lines) {
  uint64_t non_blank = 0;
  lines = 0;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    ++lines;
    if (log.substr(start, end - start).find_first_not_of(" \t\r") != std::string::npos) ++non_blank;
    start = end + 1;
  }
  return non_blank;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  using namespace sdc::goodput;
  if (size == 0) return 0;
  LedgerOptions options;
  if (data[0] % 5 != 0) options.keep_checkpoints = data[0] % 5;
  const std::string log = fuzz::as_text(data + 1, size - 1);
  uint64_t lines = 0;
  const uint64_t non_blank = non_blank_lines(log, lines);

  std::optional<Breakdown> strict;
  try {
    std::istringstream in(log);
    strict = analyze(in, options, false).breakdown;
    SDC_FUZZ_CHECK(fuzz::sums_exactly(*strict), "strict breakdown does not sum");
  } catch (const InputError& e) {
    SDC_FUZZ_CHECK(fuzz::names_a_line(e.what(), lines), e.what());
  }

  try {
    std::istringstream in(log);
    const Analysis lenient = analyze(in, options, true);
    SDC_FUZZ_CHECK(fuzz::sums_exactly(lenient.breakdown), "lenient breakdown does not sum");
    // Each line is read or skipped; the restore left at the end of the log may be one skip more.
    const uint64_t accounted = lenient.stats.events + lenient.stats.skipped;
    SDC_FUZZ_CHECK(accounted == non_blank || accounted == non_blank + 1,
                   std::to_string(accounted) + " of " + std::to_string(non_blank) + " lines");
    if (strict) {
      SDC_FUZZ_CHECK(lenient.stats.skipped == 0 && lenient.breakdown.same_labels(*strict), "lenient differs");
    } else {
      SDC_FUZZ_CHECK(lenient.stats.skipped > 0, "strict failed, lenient skipped nothing");
      SDC_FUZZ_CHECK(fuzz::names_a_line(lenient.stats.first_skip, lines), lenient.stats.first_skip);
    }
  } catch (const InputError& e) {
    // Only a line longer than the reader's limit stops a lenient read.
    SDC_FUZZ_CHECK(std::string(e.what()).find("line longer than 1 MiB") != std::string::npos, e.what());
  }
  for (const bool lenient_read : {false, true}) {
    SDC_FUZZ_CHECK(fuzz::same(fuzz::read_each_line_alone(log, lenient_read), fuzz::read_with_reader(log, lenient_read)),
                   lenient_read ? "the lenient reader differs from reading each line alone"
                                : "the reader differs from reading each line alone");
  }
  return 0;
}
