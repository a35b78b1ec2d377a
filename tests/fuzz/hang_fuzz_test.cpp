// Seeded mutation fuzzing of the flight-recorder reader and the hang attribution. Each case takes
// one recorded job of tests/goodput/data/flight_recorder/ (pickle or JSON dumps from torch 2.15),
// mutates one rank's dump, and reads the folder. Every case must either fail with an InputError
// that starts with the path of a file of the folder (or the folder), or give a report that names
// as culprits only ranks that have a dump, leaves every rank without one undecided, and agrees
// with its verdict. A sample of the cases also runs through `sdcprobe hang`: exit 0, or exit 2
// with one `sdcprobe: error: PATH: ...` line; never a signal or a hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "goodput/flight_recorder.hpp"
#include "goodput/hang_attribution.hpp"
#include "host/error.hpp"
#include "host/parse_number.hpp"
#include "tests/fuzz/mutate.hpp"

namespace sdc::goodput {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeed = 20261205;
constexpr int kCases = 2000;
constexpr int kCliEvery = 50;

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  const auto value = text == nullptr ? std::nullopt : parse_unsigned(text);
  return value ? *value : fallback;
}

struct Job {
  std::vector<std::string> names;  // nccl_trace_rank_R[.json]
  std::vector<std::string> dumps;
};

std::vector<Job> recorded_jobs() {
  std::vector<Job> jobs;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(fs::path(SDC_SOURCE_DIR) / "tests/goodput/data/flight_recorder")) {
    if (e.is_directory()) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());  // the seed alone decides the cases
  for (const fs::path& dir : dirs) {
    Job job;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().filename().string().rfind("nccl_trace_rank_", 0) == 0) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      job.names.push_back(f.filename().string());
      job.dumps.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// Pickle opcodes and JSON words the mutator inserts besides its boundary tokens.
const std::vector<std::string>& dictionary() {
  static const std::vector<std::string> words = {"\x80\x02",
                                                 "\x80\x05",
                                                 "\x95",
                                                 "}",
                                                 "]",
                                                 ")",
                                                 "(",
                                                 "u",
                                                 "e",
                                                 "a",
                                                 "s",
                                                 "t",
                                                 "l",
                                                 "d",
                                                 "q\x01",
                                                 "h\x01",
                                                 "r\xff\xff\xff\x7f",
                                                 "j\x00\x00\x00\x01",
                                                 "\x94",
                                                 "0",
                                                 "1",
                                                 "2",
                                                 "\x85",
                                                 "\x86",
                                                 "\x87",
                                                 "\x88",
                                                 "\x89",
                                                 "N",
                                                 "K\xff",
                                                 "M\xff\xff",
                                                 "J\xff\xff\xff\xff",
                                                 "\x8a\x09",
                                                 "\x8b\xff\xff\xff\xff",
                                                 "X\xff\xff\xff\x7f",
                                                 "\x8c\x05",
                                                 "\x8d",
                                                 "G",
                                                 "c",
                                                 "R",
                                                 "b",
                                                 "\x93",
                                                 ".",
                                                 "collective_seq_id",
                                                 "pg_status",
                                                 "pg_config",
                                                 "last_enqueued_collective",
                                                 "process_group",
                                                 "entries",
                                                 "version",
                                                 "2.10",
                                                 "default_pg",
                                                 "\"ranks\": \"[0, 1, 9]\"",
                                                 "is_p2p",
                                                 "true"};
  return words;
}

void check_report(const HangReport& report, const std::set<int>& dumped, const std::string& where) {
  std::set<int> culprits, undecided;
  for (const HangRank& r : report.culprits) culprits.insert(r.rank);
  for (const HangRank& r : report.undecided) undecided.insert(r.rank);
  for (int r : culprits) EXPECT_EQ(dumped.count(r), 1u) << where << ": culprit " << r << " has no dump";
  for (int r = 0; r < report.world_size; ++r) {
    if (dumped.count(r) == 0) {
      EXPECT_EQ(undecided.count(r), 1u) << where << ": rank " << r << " without a dump";
    }
  }
  for (int r : undecided) EXPECT_EQ(culprits.count(r), 0u) << where;
  EXPECT_EQ(report.verdict == HangReport::Verdict::kCulprit, !culprits.empty()) << where;
}

TEST(HangFuzz, MutatedDumpsAreReadOrRefusedNamingTheFile) {
  const std::vector<Job> jobs = recorded_jobs();
  ASSERT_GE(jobs.size(), 9u);
  const uint64_t seed = kSeed + env_number("SDC_FUZZ_SEED", 1) - 1;
  const int cases = kCases * static_cast<int>(env_number("SDC_FUZZ_SCALE", 1));
  const fs::path dir = fs::path(testing::TempDir()) / "hang_fuzz";
  int refused = 0;
  for (int c = 0; c < cases; ++c) {
    fuzz::Mutator m(seed * 1'000'003 + static_cast<uint64_t>(c));
    const Job& job = jobs[m.below(jobs.size())];
    const size_t victim = m.below(job.dumps.size());
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (size_t k = 0; k < job.dumps.size(); ++k) {
      std::ofstream(dir / job.names[k], std::ios::binary)
          << (k == victim ? m.mutate(job.dumps[k], dictionary(), 3) : job.dumps[k]);
    }
    const std::string where = "seed " + std::to_string(seed) + " case " + std::to_string(c);
    std::set<int> dumped;
    try {
      const std::vector<FrDump> dumps = read_fr_dumps(dir.string());
      for (const FrDump& d : dumps) dumped.insert(d.rank);
      check_report(attribute_hang(dumps), dumped, where);
    } catch (const InputError& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).rfind(dir.string(), 0), 0u) << where << ": " << e.what();
    }
    if (c % kCliEvery == 0) {
      const fuzz::ProcessResult r =
          fuzz::run_process({std::string(SDC_BINARY_DIR) + "/cli/sdcprobe", "hang", dir.string()}, ".", 60);
      ASSERT_TRUE(r.exited) << where << ": signal " << r.signal << (r.timed_out ? " (timed out)" : "");
      EXPECT_TRUE(r.code == 0 || r.code == 2) << where << ": exit " << r.code;
      if (r.code == 2) {
        EXPECT_EQ(r.err.rfind("sdcprobe: error: " + dir.string(), 0), 0u) << where << ": " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << where << ": " << r.err;
      }
    }
  }
  // The mutations reach both sides: some dumps are refused, and some still read.
  EXPECT_GT(refused, cases / 10);
  EXPECT_LT(refused, cases);
}

}  // namespace
}  // namespace sdc::goodput
