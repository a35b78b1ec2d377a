// Bad event logs: a clear error naming the line, or with lenient reading, skipped and counted.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>

#include "host/error.hpp"
#include "scheduler/goodput/analyze.hpp"

namespace sdc::goodput {
namespace {

const std::string kGood =
    "{\"t\":0,\"event\":\"alloc_granted\"}\n"
    "{\"t\":10,\"event\":\"step_begin\",\"step\":1}\n"
    "{\"t\":110,\"event\":\"step_end\",\"step\":1}\n"
    "{\"t\":120,\"event\":\"job_end\"}\n";

// Inserts `line` before line `before` (1-based) of kGood.
std::string with_line(const std::string& line, int before) {
  std::istringstream in(kGood);
  std::string out, l;
  int n = 1;
  while (std::getline(in, l)) {
    if (n++ == before) out += line + "\n";
    out += l + "\n";
  }
  return out;
}

std::string error_of(const std::string& log) {
  std::istringstream in(log);
  try {
    analyze(in);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(GoodputBadInput, MalformedLineNamesItsLine) {
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":", 2)), "line 2: not valid JSON");
  EXPECT_EQ(error_of(with_line("[1,2]", 3)), "line 3: not a JSON object");
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":\"init_begin\"} x", 2)), "line 2: not valid JSON");
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":\"init_begin\"} {}", 2)),
            "line 2: not valid JSON (text after the object)");
  EXPECT_EQ(error_of(with_line("{\"event\":\"init_begin\"}", 2)), "line 2: missing \"t\"");
  EXPECT_EQ(error_of(with_line("{\"t\":5}", 2)), "line 2: missing \"event\"");
  EXPECT_EQ(error_of(with_line("{\"t\":5.5,\"event\":\"init_begin\"}", 2)), "line 2: \"t\" must be an integer");
  EXPECT_EQ(error_of(with_line("{\"t\":\"yesterday\",\"event\":\"init_begin\"}", 2)),
            "line 2: bad RFC 3339 time \"yesterday\"");
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":\"step_begin\"}", 2)), "line 2: step_begin needs \"step\"");
}

TEST(GoodputBadInput, UnknownEventNamesItsLine) {
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":\"coffee_break\"}", 2)), "line 2: unknown event \"coffee_break\"");
}

TEST(GoodputBadInput, TimeGoingBackwardsNamesItsLine) {
  EXPECT_EQ(error_of(with_line("{\"t\":100,\"event\":\"init_begin\"}", 4)),
            "line 4: time goes backwards (100 ns after 110 ns)");
}

TEST(GoodputBadInput, StepEndWithoutStepBeginNamesItsLine) {
  EXPECT_EQ(error_of(with_line("{\"t\":111,\"event\":\"step_end\",\"step\":2}", 4)),
            "line 4: step_end without step_begin");
  EXPECT_EQ(error_of(with_line("{\"t\":50,\"event\":\"step_end\",\"step\":7}", 3)),
            "line 3: step_end for step 7 without step_begin (step 1 is open)");
  EXPECT_EQ(error_of(with_line("{\"t\":50,\"event\":\"eval_end\"}", 3)), "line 3: eval_end without eval_begin");
  EXPECT_EQ(error_of(kGood + "{\"t\":130,\"event\":\"init_begin\"}\n"), "line 5: init_begin after job_end");
}

TEST(GoodputBadInput, LenientSkipsAndCountsBadLines) {
  std::string log = with_line("{\"t\":5,\"event\":\"coffee_break\"}", 2);
  log = "garbage\n" + log + "{\"t\":1,\"event\":\"init_begin\"}\n";  // the last one goes back in time
  std::istringstream in(log), clean(kGood);
  const Analysis lenient = analyze(in, {}, true);
  const Analysis expected = analyze(clean);
  EXPECT_EQ(lenient.stats.skipped, 3u);
  EXPECT_EQ(lenient.stats.first_skip, "line 1: not valid JSON");
  EXPECT_TRUE(lenient.breakdown.same_labels(expected.breakdown));
  EXPECT_EQ(lenient.breakdown.productive_ns, 110);
}

TEST(GoodputBadInput, BlankLinesAndCrlfAreFine) {
  std::string log;
  for (char c : kGood) log += c == '\n' ? std::string("\r\n\n") : std::string(1, c);
  std::istringstream in(log);
  EXPECT_EQ(analyze(in).breakdown.wall_ns, 120);
}

// Random corruption of a simulated-looking log never crashes or hangs: it either reads or fails
// with an InputError naming a line.
TEST(GoodputBadInput, CorruptedLogsFailCleanly) {
  std::mt19937_64 rng(42);
  const std::string base = kGood + kGood;
  for (int i = 0; i < 2000; ++i) {
    std::string log = base;
    for (int k = 0; k < 3; ++k) log[rng() % log.size()] = static_cast<char>(rng() % 256);
    std::istringstream in(log);
    try {
      analyze(in);
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("line ", 0), 0u) << e.what();
    }
    std::istringstream again(log);
    EXPECT_NO_THROW(analyze(again, {}, true));
  }
}

}  // namespace
}  // namespace sdc::goodput
