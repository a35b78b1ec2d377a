// Seeded mutation fuzzing of sdc_inline_log_event: every mutated event, however hostile, gets a
// clean status (accepted and written, or refused with a message and nothing written), never a
// crash. The seed corpus is tests/fuzz/inline_events.jsonl.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "sdcprobe/sdcprobe.h"

namespace {

constexpr int kCases = 4000;
constexpr uint64_t kSeed = 20261201;

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// One to four random edits of a corpus entry: byte changes, JSON tokens, cut and repeated ranges,
// splices with another entry, and deep nesting.
std::string mutate(const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  static const char* const kTokens[] = {"{",
                                        "}",
                                        "[",
                                        "]",
                                        "\"",
                                        "\\",
                                        ",",
                                        ":",
                                        "null",
                                        "true",
                                        "1e999",
                                        "-0",
                                        "9223372036854775808",
                                        "\xff",
                                        "\xc3",
                                        "\\u0000",
                                        "\\ud800",
                                        "\"step\":",
                                        "\"t\":1",
                                        "\"event\":"};
  auto pick = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  std::string s = corpus[pick(corpus.size())];
  const int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    const size_t at = s.empty() ? 0 : pick(s.size() + 1);
    switch (pick(8)) {
      case 0:
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(1 + pick(255));  // no NUL: C strings
        break;
      case 1: s.insert(at, kTokens[pick(std::size(kTokens))]); break;
      case 2: s.erase(at, pick(8)); break;
      case 3: s.insert(at, s.substr(at, pick(16))); break;
      case 4: {
        const std::string& other = corpus[pick(corpus.size())];
        s = s.substr(0, at) + other.substr(std::min(other.size(), pick(other.size() + 1)));
        break;
      }
      case 5: {
        const size_t depth = 1 + pick(5000);
        s.insert(at, std::string(depth, pick(2) != 0 ? '[' : '{'));
        break;
      }
      case 6: s.resize(at); break;
      default: s.insert(at, std::to_string(static_cast<int64_t>(rng()))); break;
    }
  }
  return s;
}

TEST(InlineAbiFuzz, MutatedEventsGetACleanStatusAndOnlyGoodOnesAreWritten) {
  const auto corpus = read_lines(std::string(SDC_SOURCE_DIR) + "/tests/fuzz/inline_events.jsonl");
  ASSERT_FALSE(corpus.empty());
  const std::string log = ::testing::TempDir() + "inline_fuzz_" + std::to_string(::getpid()) + ".jsonl";
  std::remove(log.c_str());
  sdc_inline_config c;
  sdc_inline_config_init(&c);
  c.backend = "cpu";
  c.probes = "alu.int64";
  c.seed = 1;
  c.event_log = log.c_str();
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();

  std::mt19937_64 rng(kSeed);
  int accepted = 0;
  for (int k = 0; k < kCases; ++k) {
    const std::string event = mutate(corpus, rng);
    const sdc_status s = sdc_inline_log_event(p, event.c_str());
    ASSERT_TRUE(s == SDC_OK || s == SDC_ERR_INVALID_ARGUMENT) << "case " << k << ": " << s << " " << event;
    if (s == SDC_OK) {
      ++accepted;
    } else {
      ASSERT_EQ(std::string(sdc_last_error()).rfind("event", 0), 0u) << "case " << k << ": " << sdc_last_error();
    }
  }
  for (const auto& good : corpus) ASSERT_EQ(sdc_inline_log_event(p, good.c_str()), SDC_OK) << sdc_last_error();
  sdc_inline_destroy(p);

  // Every written line is one event the goodput reader accepts: a stamped object naming its event.
  const auto lines = read_lines(log);
  EXPECT_EQ(lines.size(), static_cast<size_t>(accepted) + corpus.size());
  for (const auto& line : lines) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    EXPECT_TRUE(j["t"].is_number_integer()) << line;
    EXPECT_TRUE(j["event"].is_string()) << line;
  }
  std::printf("%d of %d mutated events accepted\n", accepted, kCases);
  std::remove(log.c_str());
}

}  // namespace
