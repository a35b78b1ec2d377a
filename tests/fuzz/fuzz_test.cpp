// Seeded mutation fuzzing of the --inject grammar, golden files and the CLI's numbers (corpus in
// tests/fuzz/, harness in tests/fuzz/mutate.hpp). Parsers run in-process thousands of times; a few
// dozen cases per family run the real binary. Every answer is a value or an error naming the field;
// every process exits 0, 1 or 2, never by a signal or a hang, and leaves no file behind an error.
#include <gtest/gtest.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "host/error.hpp"
#include "host/injection.hpp"
#include "host/parse_number.hpp"
#include "probes/probe.hpp"
#include "scheduler/consensus/golden.hpp"
#include "tests/fuzz/mutate.hpp"
#include "tests/fuzz/properties.hpp"

namespace sdc {
namespace {

namespace fs = std::filesystem;
using fuzz::Mutator;

const std::string kCorpus = SDC_FUZZ_CORPUS;
const std::string kBinary = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  const auto value = parse_unsigned(text);
  return value ? *value : fallback;
}
uint64_t fuzz_seed() { return env_number("SDC_FUZZ_SEED", 1); }
size_t cases(size_t n) { return n * env_number("SDC_FUZZ_SCALE", 1); }

// A fresh directory per test, removed afterwards.
class FuzzDir {
 public:
  FuzzDir() {
    path_ = fs::temp_directory_path() / ("sdcprobe-fuzz-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~FuzzDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// An error line names what was wrong: an option, a field, a clause or a line.
bool names_a_field(const std::string& line) {
  static const std::regex field(
      R"((--[a-z][a-z-]*|field '|clause [0-9]+|line [0-9]+|: (\(file\)|format|version|seed|level|size_bytes|)"
      R"(iterations|entries)|is required|is a directory|not expected|cannot read))");
  return std::regex_search(line, field);
}

// The rules every process run keeps. `inputs`: files the case put in `dir` (nothing else may remain
// there but the report `out.json`, and that only without an error).
void check_process(const fuzz::ProcessResult& r, const std::string& what, const fs::path& dir,
                   const std::set<std::string>& inputs) {
  ASSERT_FALSE(r.timed_out) << "hang: " << what;
  ASSERT_TRUE(r.exited) << "signal " << r.signal << ": " << what << "\n" << r.err;
  EXPECT_TRUE(r.code == 0 || r.code == 1 || r.code == 2) << r.code << ": " << what << "\n" << r.err;
  const auto err = fuzz::lines_of(r.err);
  const bool error_line = !err.empty() && err.back().rfind("sdcprobe: error: ", 0) == 0;
  if (r.code == 2) {
    if (error_line) {
      EXPECT_EQ(err.size(), 1u) << what << "\n" << r.err;
      EXPECT_TRUE(names_a_field(err.back())) << what << "\n" << r.err;
    } else {
      EXPECT_NE(r.out.find("COULD NOT TEST"), std::string::npos) << what << "\n" << r.out << r.err;
    }
  }
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (inputs.count(name) != 0) continue;
    EXPECT_TRUE(name == "out.json" && !error_line) << "left behind: " << name << ": " << what << "\n" << r.err;
    fs::remove_all(e.path());
  }
}

// --- the --inject grammar ---

const std::vector<std::string> kInjectWords = {"model",     "probe",
                                               "device",    "rank",
                                               "mode",      "after",
                                               "p",         "bit",
                                               "bits",      "count",
                                               "index",     "value",
                                               "lane",      "lanes",
                                               "mask",      "bitflip",
                                               "stuck",     "multibit",
                                               "random",    "digest",
                                               "transient", "intermittent",
                                               "permanent", "*",
                                               "alu.*",     "mem.*",
                                               "alu.fma32", "=",
                                               ",",         ";",
                                               "99",        "1",
                                               "0x",        "mem.own_address"};

bool hangs_or_crashes(const std::string& spec) {
  return spec.find("hang") != std::string::npos || spec.find("crash") != std::string::npos;
}

TEST(FuzzInject, EveryMutationParsesOrNamesTheFieldAndPlansStayInBounds) {
  Mutator m(fuzz_seed());
  const auto corpus = fuzz::read_lines(kCorpus + "/inject/specs.txt");
  ASSERT_GE(corpus.size(), 10u);
  const std::vector<std::string> probes = {"alu.fma32", "mem.own_address"};
  const std::vector<std::pair<int, std::string>> devices = {{0, "CPU-a"}, {1, "CPU-b"}};
  size_t accepted = 0, rejected = 0;
  for (size_t i = 0; i < cases(4000); ++i) {
    const std::string text = m.mutate(m.pick(corpus), kInjectWords, 1 + static_cast<int>(i % 3));
    const std::string what =
        "case " + std::to_string(i) + " (seed " + std::to_string(fuzz_seed()) + "): '" + text + "'";
    std::vector<InjectionSpec> specs;
    try {
      specs = parse_injection_specs(text);
      check_injection_targets(specs, probes, devices);
    } catch (const InputError& e) {
      ++rejected;
      EXPECT_TRUE(fuzz::names_an_inject_field(e.what())) << what << " -> " << e.what();
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << " -> not an InputError: " << e.what();
      continue;
    }
    ++accepted;
    bool plannable = true;
    for (const auto& s : specs) {
      EXPECT_TRUE(s.bit >= -1 && s.bit <= 63) << what;
      EXPECT_TRUE(s.bits >= 2 && s.bits <= 64) << what;
      EXPECT_TRUE(s.count >= 1 && s.count <= (1u << 20)) << what;
      EXPECT_LT(s.lane, s.lanes) << what;
      EXPECT_TRUE(s.probability > 0 && s.probability <= 1) << what;
      plannable = plannable && s.model != FaultModel::kHang && s.model != FaultModel::kCrash && s.count <= 4096;
    }
    if (!plannable) continue;
    Injector injector(specs, i);
    for (const auto& probe : probes) {
      for (const auto& [index, uuid] : devices) {
        InjectionPoint point;
        point.probe = probe;
        point.device_index = index;
        point.device_uuid = uuid;
        point.elements = 1 + i % 97;
        point.width_bits = i % 2 ? 32 : 64;
        const Corruption c = injector.plan(point);
        for (const auto& x : c.xors) EXPECT_LT(x.index, point.elements) << what;
        if (c.stuck) {
          EXPECT_LT(c.stuck_index, point.elements) << what;
          EXPECT_LT(c.stuck_bit, point.width_bits) << what;
        }
      }
    }
  }
  // The mutator reaches both sides of the grammar.
  EXPECT_GT(accepted, cases(100));
  EXPECT_GT(rejected, cases(1000));
}

TEST(FuzzInject, TheBinaryAnswersEveryMutatedSpec) {
  FuzzDir dir;
  Mutator m(fuzz_seed() + 1);
  const auto corpus = fuzz::read_lines(kCorpus + "/inject/specs.txt");
  size_t ran = 0;
  for (size_t i = 0; ran < cases(40); ++i) {
    const std::string spec = m.mutate(m.pick(corpus), kInjectWords);
    // hang and crash end an in-process `run` on purpose (qualify and sweep isolate them).
    if (hangs_or_crashes(spec)) continue;
    ++ran;
    const auto r = fuzz::run_process({kBinary, "--backend", "cpu", "run", "alu.fma32", "--iterations", "4", "--json",
                                      "out.json", "--inject=" + spec},
                                     dir.path().string(), 600);
    check_process(r, "case " + std::to_string(i) + ": --inject='" + spec + "'", dir.path(), {});
  }
}

// --- golden files ---

const std::vector<std::string> kGoldenWords = {"\"format\"",
                                               "\"version\"",
                                               "\"seed\"",
                                               "\"level\"",
                                               "\"size_bytes\"",
                                               "\"iterations\"",
                                               "\"entries\"",
                                               "\"class\"",
                                               "\"probe\"",
                                               "\"digest\"",
                                               "\"sdcprobe-golden\"",
                                               "\"quick\"",
                                               "\"long\"",
                                               "1",
                                               "0",
                                               "-1",
                                               "4294967299",
                                               "18446744073709551616",
                                               "1.5",
                                               "null",
                                               "[",
                                               "]",
                                               "{",
                                               "}",
                                               ",",
                                               ":",
                                               "\"0123456789abcdef0123456789abcdef\"",
                                               "true"};

// "--golden PATH: FIELD: why", FIELD one the file format has.
TEST(FuzzGolden, EveryMutationLoadsInRangeOrNamesTheField) {
  FuzzDir dir;
  Mutator m(fuzz_seed() + 2);
  const auto corpus = fuzz::read_corpus(kCorpus + "/golden");
  ASSERT_GE(corpus.size(), 3u);
  const std::string path = (dir.path() / "golden.json").string();
  size_t loaded = 0, rejected = 0;
  for (size_t i = 0; i < cases(3000); ++i) {
    const std::string text = m.mutate(m.pick(corpus), kGoldenWords, 6);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    const std::string what = "case " + std::to_string(i) + ": " + text;
    try {
      const GoldenFile g = load_golden(path);
      ++loaded;
      EXPECT_TRUE(!g.iterations || (*g.iterations >= 1 && *g.iterations <= kMaxIterations)) << what;
      EXPECT_TRUE(!g.size_bytes || (*g.size_bytes >= 8 && *g.size_bytes <= kMaxGoldenSizeBytes)) << what;
    } catch (const InputError& e) {
      ++rejected;
      EXPECT_TRUE(fuzz::names_a_golden_field(e.what(), path)) << what << " -> " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << " -> not an InputError: " << e.what();
    }
  }
  EXPECT_GT(loaded, cases(100));
  EXPECT_GT(rejected, cases(100));
}

TEST(FuzzGolden, DeepNestingIsAnErrorNotAStackOverflow) {
  FuzzDir dir;
  const std::string path = (dir.path() / "golden.json").string();
  std::ofstream(path) << R"({"format":)" << std::string(200000, '[') << std::string(200000, ']') << "}";
  EXPECT_THROW(load_golden(path), InputError);
}

TEST(FuzzGolden, TheBinaryRejectsEveryBadFileOnOneLine) {
  // Files the loader accepts run a whole qualify (seconds each): the loader test covers them.
  FuzzDir dir;
  Mutator m(fuzz_seed() + 3);
  const auto corpus = fuzz::read_corpus(kCorpus + "/golden");
  const std::string path = (dir.path() / "golden.json").string();
  size_t ran = 0;
  for (size_t i = 0; ran < cases(40) && i < cases(4000); ++i) {
    const std::string text = m.mutate(m.pick(corpus), kGoldenWords, 6);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    std::string expected;
    try {
      load_golden(path);
      continue;
    } catch (const InputError& e) {
      expected = e.what();
    }
    ++ran;
    const auto r = fuzz::run_process({kBinary, "--backend", "cpu", "qualify", "--golden", path, "--json", "out.json"},
                                     dir.path().string(), 600);
    const std::string what = "case " + std::to_string(i) + ": " + text;
    check_process(r, what, dir.path(), {"golden.json"});
    EXPECT_EQ(r.code, 2) << what;
    EXPECT_EQ(r.err, "sdcprobe: error: " + expected + "\n") << what;
  }
  EXPECT_EQ(ran, cases(40));
}

// --- the CLI's numbers ---

TEST(FuzzNumbers, TheParsersAgreeWithAnIndependentReference) {
  Mutator m(fuzz_seed() + 4);
  auto corpus = fuzz::read_lines(kCorpus + "/numbers/values.txt");
  for (const auto& t : fuzz::boundary_tokens()) corpus.push_back(t);
  for (size_t i = 0; i < cases(20000); ++i) {
    const std::string text = i % 4 == 0 ? m.pick(corpus) : m.mutate(m.pick(corpus), {"0x", "e", "."}, 2);
    EXPECT_EQ(parse_unsigned(text), fuzz::reference_unsigned(text)) << "case " << i << ": '" << text << "'";
    const auto value = parse_finite(text);
    if (value) {
      EXPECT_TRUE(fuzz::real_syntax(text)) << "case " << i << ": '" << text << "'";
      EXPECT_TRUE(std::isfinite(*value)) << "case " << i << ": '" << text << "'";
    } else if (fuzz::real_syntax(text)) {
      // Only out-of-range magnitudes (1e999, 1e-999) may be refused when the syntax is right.
      errno = 0;
      const double d = std::strtod(text.c_str(), nullptr);
      EXPECT_TRUE(errno == ERANGE || !std::isfinite(d)) << "case " << i << ": '" << text << "'";
    }
  }
}

TEST(FuzzNumbers, SizesAgreeWithAnIndependentReference) {
  Mutator m(fuzz_seed() + 6);
  auto corpus = fuzz::read_lines(kCorpus + "/numbers/values.txt");
  for (const auto& t : fuzz::boundary_tokens()) corpus.push_back(t);
  for (const char* t : {"4K", "16M", "1G", "0x10K", "8", "7", "17179869184G", "077K", "-1K"}) corpus.push_back(t);
  size_t accepted = 0;
  for (size_t i = 0; i < cases(20000); ++i) {
    // Command-line arguments are C strings: up to the first NUL.
    std::string text = i % 4 == 0 ? m.pick(corpus) : m.mutate(m.pick(corpus), {"0x", "K", "M", "G", "k"}, 2);
    text = text.substr(0, text.find('\0'));
    const auto expected = fuzz::reference_size(text);
    const std::string what = "case " + std::to_string(i) + ": '" + text + "'";
    try {
      EXPECT_EQ(parse_size("--size", text, 8, kMaxGoldenSizeBytes), expected.value_or(0)) << what;
      EXPECT_TRUE(expected && *expected >= 8 && *expected <= kMaxGoldenSizeBytes) << what;
      ++accepted;
    } catch (const InputError& e) {
      EXPECT_TRUE(!expected || *expected < 8 || *expected > kMaxGoldenSizeBytes) << what;
      EXPECT_EQ(std::string(e.what()).rfind("--size: ", 0), 0u) << what << " -> " << e.what();
      EXPECT_NE(std::string(e.what()).find("'" + text + "'"), std::string::npos) << what << " -> " << e.what();
    }
  }
  EXPECT_GT(accepted, cases(1000));
}

TEST(FuzzNumbers, TheBinaryAnswersEveryMutatedNumber) {
  FuzzDir dir;
  fs::create_directories(dir.path() / "state");
  std::ofstream(dir.path() / "log.jsonl") << "{\"t\":0,\"event\":\"alloc_granted\"}\n"
                                             "{\"t\":10,\"event\":\"step_begin\",\"step\":1}\n"
                                             "{\"t\":110,\"event\":\"step_end\",\"step\":1}\n"
                                             "{\"t\":120,\"event\":\"job_end\"}\n";
  // One numeric option each, in a command that is cheap whatever the value.
  const std::vector<std::vector<std::string>> templates = {
      {"--backend", "cpu", "run", "alu.fma32", "--iterations", "4", "--json", "out.json", "--seed="},
      {"--backend", "cpu", "run", "alu.fma32", "--device", "99", "--iterations="},
      {"--backend", "cpu", "qualify", "--golden", "missing.json", "--probe-timeout="},
      {"goodput", "log.jsonl", "--gap-threshold="},
      {"goodput", "log.jsonl", "--keep-checkpoints="},
      {"coverage", "--probes", "nothing.*", "--trials="},
      {"--backend", "cpu", "sweep", "--once", "--state-dir", "state", "--prom-dir", "missing", "--budget="},
      {"plan", "--trials", "0", "--nodes="},
      {"--backend", "cpu", "run", "alu.fma32", "--device", "99", "--cpu-devices="},
      {"--backend", "cpu", "run", "mem.own_address", "--device", "99", "--size="},
  };
  Mutator m(fuzz_seed() + 5);
  auto corpus = fuzz::read_lines(kCorpus + "/numbers/values.txt");
  for (size_t i = 0; i < cases(54); ++i) {
    std::vector<std::string> args = templates[i % templates.size()];
    const std::string value = i % 3 == 0 ? m.pick(fuzz::boundary_tokens()) : m.mutate(m.pick(corpus), {}, 2);
    args.back() += value;
    args.insert(args.begin(), kBinary);
    std::string what = "case " + std::to_string(i) + ":";
    for (const auto& a : args) what += " '" + a + "'";
    const auto r = fuzz::run_process(args, dir.path().string(), 600);
    check_process(r, what, dir.path(), {"state", "log.jsonl"});
  }
}

}  // namespace
}  // namespace sdc
