// Seeded mutation fuzzing of the goodput reader and ledger. Each case starts from a corpus log in
// tests/fuzz/goodput/ and applies a few mutations aimed at what broke before: extreme and invalid
// times, extreme steps, reordered, repeated and missing lines, other event names, and raw bytes.
// Every case must either be accepted with labels that sum exactly to the wall time, or fail with an
// InputError naming its line; nothing else (no other exception, no crash, no hang: ctest's timeout).
// A sample of the cases also runs through `sdcprobe goodput`: exit 0 with balanced JSON, or exit 2
// with one `sdcprobe: error: ... line N: ...` line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "goodput/analyze.hpp"
#include "goodput/merge.hpp"
#include "goodput/sacct.hpp"
#include "host/error.hpp"
#include "tests/fuzz/line_reading.hpp"
#include "tests/fuzz/mutate.hpp"

namespace sdc::goodput {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeed = 20261201;
constexpr int kCases = 3000;
constexpr int kCliEvery = 50;  // every 50th case also through the binary: 60 processes

std::vector<std::string> corpus() {
  std::vector<std::string> logs;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(SDC_SOURCE_DIR) / "tests/fuzz/goodput")) {
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // the seed alone decides the cases
  for (const auto& f : files) {
    std::ifstream in(f);
    logs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return logs;
}

std::vector<std::string> split_lines(const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::string mutate(const std::string& log) {
    std::vector<std::string> lines = split_lines(log);
    const int n = 1 + static_cast<int>(pick(3));
    for (int i = 0; i < n && !lines.empty(); ++i) mutate_once(lines);
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    if (!out.empty() && pick(8) == 0) out.resize(pick(out.size()));  // truncated mid-line
    return out;
  }

 private:
  uint64_t pick(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  template <size_t N>
  const char* one_of(const char* const (&items)[N]) {
    return items[pick(N)];
  }

  // Replaces the value after `"key":` in `line` (a number, or a quoted string) by `value`.
  static bool replace_value(std::string& line, const std::string& key, const std::string& value) {
    const size_t k = line.find("\"" + key + "\":");
    if (k == std::string::npos) return false;
    const size_t begin = k + key.size() + 3;
    size_t end = begin;
    if (end < line.size() && line[end] == '"') {
      end = line.find('"', end + 1);
      end = end == std::string::npos ? line.size() : end + 1;
    } else {
      while (end < line.size() && line[end] != ',' && line[end] != '}') ++end;
    }
    line.replace(begin, end - begin, value);
    return true;
  }

  void mutate_once(std::vector<std::string>& lines) {
    static const char* const kTimes[] = {"0",
                                         "-1",
                                         "1",
                                         "9223372036854775807",
                                         "-9223372036854775808",
                                         "9223372036854775808",
                                         "1e30",
                                         "1.5",
                                         "-0",
                                         "18446744073709551615",
                                         "4611686018427387904",
                                         "1798761600000000000",
                                         "\"0000-01-01T00:00:00Z\"",
                                         "\"2027-02-31T00:00:00Z\"",
                                         "\"2027-02-29T00:00:00Z\"",
                                         "\"2028-02-29T00:00:00Z\"",
                                         "\"1677-09-21T00:12:43.145224192Z\"",
                                         "\"1969-12-31T23:59:59.999999999Z\"",
                                         "\"2262-04-11T23:47:16.854775807Z\"",
                                         "\"2262-04-11T23:47:16.854775808Z\"",
                                         "\"9999-12-31T23:59:60Z\"",
                                         "\"2027-01-01T00:00:00+99:99\"",
                                         "\"2027-01-01T00:00:00.0000000000000000001Z\"",
                                         "\"2027-13-01T00:00:00Z\"",
                                         "\"1970-01-01T00:00:00+00:01\"",
                                         "\"2027-01-01T24:00:00Z\"",
                                         "\"2027-01-01T00:00:00\"",
                                         "\"\"",
                                         "null",
                                         "true",
                                         "[]",
                                         "{}"};
    static const char* const kSteps[] = {"0",
                                         "-1",
                                         "1",
                                         "2",
                                         "3",
                                         "9223372036854775807",
                                         "-9223372036854775808",
                                         "9223372036854775806",
                                         "18446744073709551616",
                                         "2.0",
                                         "\"4\"",
                                         "null"};
    static const char* const kEvents[] = {"job_eligible",    "alloc_granted",
                                          "alloc_released",  "job_end",
                                          "process_start",   "init_begin",
                                          "init_end",        "restore_begin",
                                          "restore_end",     "step_begin",
                                          "step_end",        "ckpt_begin",
                                          "ckpt_end",        "ckpt_commit",
                                          "eval_begin",      "eval_end",
                                          "data_wait_begin", "data_wait_end",
                                          "probe_begin",     "probe_end",
                                          "fault_detected",  "sdc_detected",
                                          "teardown_end",    "node_quarantined",
                                          "coffee_break",    ""};
    std::string& line = lines[pick(lines.size())];
    switch (pick(11)) {
      case 0: replace_value(line, "t", one_of(kTimes)); break;
      case 1:
        if (!replace_value(line, "step", one_of(kSteps))) line.insert(line.size() - 1, ",\"step\":1");
        break;
      case 2: replace_value(line, "event", std::string("\"") + one_of(kEvents) + "\""); break;
      case 3: lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(pick(lines.size()))); break;
      case 4: lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(pick(lines.size())), line); break;
      case 5: std::swap(line, lines[pick(lines.size())]); break;
      case 6:
        if (!line.empty()) line[pick(line.size())] = static_cast<char>(pick(256));
        break;
      case 7:
        if (!line.empty()) line.erase(pick(line.size()), 1 + pick(8));
        break;
      case 8: {
        // A new event with a time near the neighbours' or an extreme one.
        std::string extra = pick(2) ? ",\"step\":" + std::string(one_of(kSteps)) : "";
        if (pick(4) == 0) extra += ",\"last_good_step\":" + std::string(one_of(kSteps));
        // process_start's rank record, and its attempt (a malformed one is an error on it alone).
        if (pick(4) == 0) extra += ",\"attempt\":" + std::string(one_of(kSteps));
        if (pick(4) == 0) {
          extra += std::string(",\"host\":\"n1\",\"device\":") +
                   (pick(2) ? "\"GPU-1\",\"pci_bus_id\":\"00000000:19:00.0\"" : "\"cpu\"");
        }
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(pick(lines.size() + 1)),
                     "{\"t\":" + std::string(pick(2) ? one_of(kTimes) : std::to_string(pick(4000))) + ",\"event\":\"" +
                         one_of(kEvents) + "\"" + extra + "}");
        break;
      }
      case 9: replace_value(line, "last_good_step", one_of(kSteps)); break;
      default: line += pick(2) ? "\r" : " x"; break;
    }
  }

  std::mt19937_64 rng_;
};

// "line N: ..." with 1 <= N <= the number of lines (a last line without '\n' counts too).
::testing::AssertionResult names_a_line(const std::string& message, const std::string& log) {
  static const std::regex kLine("^line ([0-9]+): .+");
  std::smatch m;
  if (!std::regex_search(message, m, kLine)) return ::testing::AssertionFailure() << "no line: " << message;
  const uint64_t n = std::stoull(m[1]);
  const uint64_t lines =
      static_cast<uint64_t>(std::count(log.begin(), log.end(), '\n')) + (!log.empty() && log.back() != '\n' ? 1 : 0);
  if (n < 1 || n > lines) return ::testing::AssertionFailure() << "line " << n << " of " << lines << ": " << message;
  return ::testing::AssertionSuccess();
}

// No event of the log could be a start (process_start, alloc_granted).
bool without_start(const std::string& log) {
  return log.find("process_start") == std::string::npos && log.find("alloc_granted") == std::string::npos;
}

::testing::AssertionResult sums_exactly(const Breakdown& b) {
  int64_t sum = b.productive_ns;
  int64_t sdc = 0;
  for (const CategoryNs& c : b.categories) {
    if (c.ns < 0 || c.sdc_ns < 0 || c.sdc_ns > c.ns) return ::testing::AssertionFailure() << "bad category";
    sum += c.ns;
    sdc += c.sdc_ns;
  }
  if (b.wall_ns < 0 || b.productive_ns < 0 || sum != b.wall_ns || sdc != b.sdc_lost_ns()) {
    return ::testing::AssertionFailure() << "labels " << sum << " != wall " << b.wall_ns;
  }
  return ::testing::AssertionSuccess();
}

// One case, in process: accepted and balanced, or an InputError naming a line. Lenient reading of
// the same log never throws for a bad line and is balanced too.
void check_in_process(const std::string& log, int index) {
  SCOPED_TRACE("case " + std::to_string(index) + ":\n" + log);
  std::istringstream in(log);
  try {
    EXPECT_TRUE(sums_exactly(analyze(in).breakdown));
  } catch (const InputError& e) {
    // A log with no start that would be all queue is refused as a whole, by no line.
    if (e.what() != std::string(kNoStart) || !without_start(log)) {
      EXPECT_TRUE(names_a_line(e.what(), log));
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception: " << e.what();
  }
  std::istringstream again(log);
  try {
    EXPECT_TRUE(sums_exactly(analyze(again, {}, true).breakdown));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "lenient: unexpected exception: " << e.what();
  }
}

TEST(GoodputFuzz, MutatedLogsAreReadExactlyOrRejectedWithTheirLine) {
  const std::vector<std::string> seeds = corpus();
  ASSERT_GE(seeds.size(), 3u);
  for (const auto& s : seeds) check_in_process(s, -1);  // the corpus itself is valid
  Mutator mutator(kSeed);
  for (int i = 0; i < kCases; ++i) {
    check_in_process(mutator.mutate(seeds[static_cast<size_t>(i) % seeds.size()]), i);
    if (::testing::Test::HasFailure()) break;  // one reproducible case is enough to report
  }
}

// The reader indexes whole pieces of a log at once and falls back to reading a line alone where a
// piece is not one event a line. Whatever a log holds, it must give what reading each line alone
// gives: the same events from the same lines, the same error or skips. The sink refuses some events,
// as the ledger would. Besides the usual mutations, these join and split lines, add blank lines,
// white space and a second value on a line, which is what the pieces' reading must notice.
TEST(GoodputFuzz, TheReaderGivesWhatReadingEachLineAloneGives) {
  using fuzz::read_each_line_alone;
  using fuzz::read_with_reader;
  using fuzz::Reading;
  const std::vector<std::string> seeds = corpus();
  Mutator mutator(kSeed + 2);
  std::mt19937_64 rng(kSeed + 2);
  int with_bad_lines = 0;  // cases where the reader must fall back to one line at a time
  for (int i = 0; i < kCases; ++i) {
    std::string log = mutator.mutate(seeds[static_cast<size_t>(i) % seeds.size()]);
    for (int k = static_cast<int>(rng() % 3); k > 0 && !log.empty(); --k) {
      const size_t at = rng() % log.size();
      switch (rng() % 6) {
        case 0: {  // two lines joined
          const size_t nl = log.find('\n', at);
          if (nl != std::string::npos && nl + 1 < log.size()) log.erase(nl, 1);
          break;
        }
        case 1: log.insert(at, "\n"); break;  // a line split
        case 2:
          log.insert(log.find('\n', at) == std::string::npos ? log.size() : log.find('\n', at) + 1, "\n \t\r\n");
          break;
        case 3: log.insert(log.rfind('\n', at) == std::string::npos ? 0 : log.rfind('\n', at) + 1, "  "); break;
        case 4: {  // a second value after a line's object
          const size_t nl = log.find('\n', at);
          log.insert(nl == std::string::npos ? log.size() : nl,
                     rng() % 2 ? " {\"t\":1,\"event\":\"init_begin\"}" : ",1");
          break;
        }
        default: log.insert(at, rng() % 2 ? "[" : "]"); break;
      }
    }
    for (const bool lenient : {false, true}) {
      const Reading expected = read_each_line_alone(log, lenient);
      const Reading got = read_with_reader(log, lenient);
      if (!expected.error.empty() || expected.skipped > 0) ++with_bad_lines;
      ASSERT_TRUE(fuzz::same(expected, got))
          << "case " << i << (lenient ? " (lenient)" : "") << ": expected \"" << expected.error << "\", "
          << expected.events.size() << " events, " << expected.skipped << " skipped; got \"" << got.error << "\", "
          << got.events.size() << " events, " << got.skipped << " skipped\n"
          << log;
    }
  }
  EXPECT_GT(with_bad_lines, kCases / 4);
  // And clean logs, which the pieces read whole.
  for (const std::string& log : seeds) {
    EXPECT_TRUE(fuzz::same(read_each_line_alone(log, false), read_with_reader(log, false)));
  }
}

// Per-rank files merged: two or three corpus logs as ranks 0, 1 (and 2), one of them mutated, the
// ranks given by "rank" fields (a later line's may differ: only the first line's counts) or by the
// file names. Each case is balanced
// or an InputError that names one of the files and a line in it (or the file-level rank errors).
TEST(GoodputFuzz, MergedRankFilesAreReadExactlyOrRejectedWithFileAndLine) {
  const std::vector<std::string> seeds = corpus();
  const fs::path dir = fs::temp_directory_path() / ("sdcprobe-goodput-merge-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Mutator mutator(kSeed + 1);
  std::mt19937_64 rng(kSeed + 1);
  static const std::regex kFileLine("^(.*): line ([0-9]+): .+");
  int accepted = 0, rejected = 0;  // strict reading; both must happen, or the cases test little
  for (int i = 0; i < kCases / 5; ++i) {
    const size_t ranks = 2 + rng() % 2;
    const bool with_field = rng() % 3 == 0;
    std::vector<std::string> paths, logs;
    const size_t mutated = rng() % ranks;  // one file mutated, the others valid corpus logs
    for (size_t r = 0; r < ranks; ++r) {
      const std::string& seed = seeds[(static_cast<size_t>(i) + r) % seeds.size()];
      std::string log = r == mutated ? mutator.mutate(seed) : seed;
      if (with_field) {
        std::vector<std::string> lines = split_lines(log);
        for (auto& l : lines) {
          const size_t close = l.rfind('}');
          const size_t rank = rng() % 20 == 0 ? r + 1 : r;  // now and then a line that disagrees
          if (close != std::string::npos) l.insert(close, ",\"rank\":" + std::to_string(rank));
        }
        log.clear();
        for (const auto& l : lines) log += l + "\n";
      }
      paths.push_back((dir / ((with_field ? "f" : "events.rank") + std::to_string(r) + ".jsonl")).string());
      std::ofstream(paths.back(), std::ios::binary) << log;
      logs.push_back(log);
    }
    SCOPED_TRACE("case " + std::to_string(i));
    for (const bool lenient : {false, true}) {
      try {
        EXPECT_TRUE(sums_exactly(analyze_files(paths, {}, lenient).breakdown));
        accepted += lenient ? 0 : 1;
      } catch (const InputError& e) {
        rejected += lenient ? 0 : 1;
        const std::string message = e.what();
        std::smatch m;
        if (std::regex_search(message, m, kFileLine)) {
          const auto it = std::find(paths.begin(), paths.end(), m[1].str());
          ASSERT_NE(it, paths.end()) << message;
          EXPECT_TRUE(names_a_line("line " + m[2].str() + ": x", logs[static_cast<size_t>(it - paths.begin())]))
              << message;
          EXPECT_FALSE(lenient) << "lenient reading skips bad lines: " << message;
        } else {
          EXPECT_TRUE(message.find("no file of rank 0") != std::string::npos ||
                      message.find("rank unknown") != std::string::npos)
              << message;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "unexpected exception: " << e.what();
      }
    }
    if (::testing::Test::HasFailure()) break;
  }
  fs::remove_all(dir);
  EXPECT_GT(accepted, kCases / 50);
  EXPECT_GT(rejected, kCases / 50);
}

// Slurm accounting (--sacct): mutations of a real `sacct --duplicates --json` file. Each case is
// records a ledger can place (started, ordered, each ended before the next starts) or an InputError
// that names the file; never another exception.
TEST(GoodputFuzz, MutatedSacctJsonIsReadOrRejectedNamingTheFile) {
  std::ifstream in(fs::path(SDC_SOURCE_DIR) / "tests/goodput/data/sacct_requeue_22.05.json");
  const std::string seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(seed.empty());
  const std::vector<std::string> dictionary = {"{\"set\": true, \"infinite\": false, \"number\": 1796100300}",
                                               "{\"set\": false}",
                                               "1796100245",
                                               "0",
                                               "-1",
                                               "null",
                                               "18446744073709551615",
                                               "\"job_id\": 2",
                                               "[]"};
  const fs::path path = fs::temp_directory_path() / ("sdcprobe-sacct-fuzz-" + std::to_string(::getpid()) + ".json");
  fuzz::Mutator mutator(kSeed + 2);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < kCases; ++i) {
    std::ofstream(path) << mutator.mutate(seed, dictionary);
    try {
      const std::vector<SlurmRecord> records = read_sacct_json(path.string());
      ++accepted;
      for (size_t r = 0; r < records.size(); ++r) {
        EXPECT_GT(records[r].start_s, 0) << "case " << i;
        if (r + 1 < records.size()) {
          EXPECT_LE(records[r].end_s, records[r + 1].start_s) << "case " << i;
        }
      }
    } catch (const InputError& e) {
      ++rejected;
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << "case " << i << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "case " << i << ": unexpected exception: " << e.what();
    }
    if (::testing::Test::HasFailure()) break;
  }
  fs::remove(path);
  EXPECT_GT(accepted, kCases / 50);
  EXPECT_GT(rejected, kCases / 50);
}

// The same cases through the binary: the exit code and the one error line a user sees.
TEST(GoodputFuzz, MutatedLogsThroughTheCli) {
  const std::vector<std::string> seeds = corpus();
  const fs::path dir = fs::temp_directory_path() / ("sdcprobe-goodput-fuzz-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path log_path = dir / "events.jsonl";
  const fs::path out_path = dir / "out.txt";
  const std::string binary = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";
  Mutator mutator(kSeed);
  for (int i = 0; i < kCases; ++i) {
    const std::string log = mutator.mutate(seeds[static_cast<size_t>(i) % seeds.size()]);
    if (i % kCliEvery != 0) continue;
    SCOPED_TRACE("case " + std::to_string(i) + ":\n" + log);
    std::ofstream(log_path, std::ios::binary) << log;
    // stdout and stderr apart: stderr must be the single error line.
    const std::string cmd = "timeout 60 " + binary + " goodput --json " + log_path.string() + " >" + out_path.string() +
                            " 2>" + (dir / "err.txt").string();
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal";
    const int code = WEXITSTATUS(status);
    std::ifstream out_file(out_path), err_file(dir / "err.txt");
    const std::string out(std::istreambuf_iterator<char>(out_file), {});
    const std::string err(std::istreambuf_iterator<char>(err_file), {});
    if (code == 0) {
      const auto j = nlohmann::json::parse(out);
      int64_t sum = j["productive_ns"].get<int64_t>();
      for (const auto& [name, c] : j["categories"].items()) sum += c["ns"].get<int64_t>();
      EXPECT_EQ(sum, j["wall_ns"].get<int64_t>()) << out;
    } else {
      ASSERT_EQ(code, 2) << err;
      EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
      if (err != "sdcprobe: error: " + std::string(kNoStart) + "\n" || !without_start(log)) {
        EXPECT_TRUE(std::regex_search(err, std::regex("^sdcprobe: error: .*line [0-9]+: "))) << err;
      }
      EXPECT_TRUE(out.empty()) << out;
    }
    if (::testing::Test::HasFailure()) break;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sdc::goodput
