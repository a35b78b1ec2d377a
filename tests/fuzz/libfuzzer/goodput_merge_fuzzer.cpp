// The per-rank merge with Slurm's accounting. The input is parts separated by "\n--\n": the first is
// sacct's JSON (left out when empty), the others the event logs of ranks 0, 1, 2 (by file name).
// Properties: a breakdown always sums exactly, strict and lenient; every error names the file it is
// about, and a line of it (from 1) or a sacct record (jobs[i]).
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "goodput/merge.hpp"
#include "goodput/sacct.hpp"
#include "host/error.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"

namespace {

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + separator.size()) {
    parts.push_back(text.substr(start, at - start));
  }
  parts.push_back(text.substr(start));
  return parts;
}

// "PATH: line N: ..." with N >= 1, "PATH: jobs[i]...", "PATH: ..." for a whole file, or the merge's
// own "no file of rank 0".
bool names_where(const std::string& message, const std::vector<std::string>& paths) {
  if (message.rfind("no file of rank 0", 0) == 0) return true;
  static const std::regex line("^: line [1-9][0-9]*: .");
  for (const auto& path : paths) {
    if (message.rfind(path + ": ", 0) != 0) continue;
    const std::string rest = message.substr(path.size());
    if (rest.rfind(": line ", 0) == 0) return std::regex_search(rest, line);
    return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  using namespace sdc::goodput;
  const std::vector<std::string> parts = split(fuzz::as_text(data, size), "\n--\n");
  if (parts.size() < 2 || parts.size() > 4) return 0;
  const std::string sacct_path = fuzz::write_scratch("sacct.json", parts[0]);
  std::vector<std::string> paths;
  for (size_t i = 1; i < parts.size(); ++i) {
    paths.push_back(fuzz::write_scratch("events.rank" + std::to_string(i - 1) + ".jsonl", parts[i]));
  }
  std::vector<std::string> all_paths = paths;
  all_paths.push_back(sacct_path);

  std::vector<SlurmRecord> records;
  const bool with_sacct = !parts[0].empty();
  if (with_sacct) {
    try {
      records = read_sacct_json(sacct_path);
    } catch (const InputError& e) {
      SDC_FUZZ_CHECK(names_where(e.what(), {sacct_path}), e.what());
      return 0;
    }
    for (size_t i = 0; i < records.size(); ++i) {
      SDC_FUZZ_CHECK(records[i].start_s > 0 && (records[i].end_s == 0 || records[i].end_s >= records[i].start_s),
                     "record out of order");
      if (i > 0) SDC_FUZZ_CHECK(records[i - 1].end_s != 0 && records[i - 1].end_s <= records[i].start_s, "overlap");
    }
  }
  for (const bool lenient : {false, true}) {
    try {
      const Analysis a = analyze_files(paths, {}, lenient, with_sacct ? &records : nullptr, sacct_path);
      SDC_FUZZ_CHECK(fuzz::sums_exactly(a.breakdown), "breakdown does not sum");
      if (a.stats.skipped > 0) SDC_FUZZ_CHECK(names_where(a.stats.first_skip, all_paths), a.stats.first_skip);
    } catch (const InputError& e) {
      SDC_FUZZ_CHECK(names_where(e.what(), all_paths), e.what());
    }
  }
  return 0;
}
