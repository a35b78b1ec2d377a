// Bad event logs: a clear error naming the line, or with lenient reading, skipped and counted.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "goodput/analyze.hpp"
#include "host/error.hpp"

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

// process_start's rank record (host, device, PCI bus id, attempt) is read, and a malformed one is
// refused naming the field; other events' fields of those names mean other things and are not.
TEST(GoodputBadInput, RankRecordIsReadAndCheckedOnProcessStart) {
  const Event e =
      parse_event(R"({"t":1,"event":"process_start","rank":3,"attempt":2,"host":"node7",)"
                  R"("device":"GPU-8f2c0d1a-7b3e-4c5d-9e6f-0a1b2c3d4e5f","pci_bus_id":"00000000:19:00.0"})");
  ASSERT_TRUE(e.where);
  EXPECT_EQ(e.attempt, 2);
  EXPECT_EQ(e.where->host, "node7");
  EXPECT_EQ(e.where->device, "GPU-8f2c0d1a-7b3e-4c5d-9e6f-0a1b2c3d4e5f");
  EXPECT_EQ(e.where->pci_bus_id, "00000000:19:00.0");
  EXPECT_EQ(parse_event(R"({"t":1,"event":"process_start","host":"n","device":"cpu"})").where->device, "cpu");
  EXPECT_EQ(
      parse_event(R"({"t":1,"event":"process_start","device":"GPU-1","pci_bus_id":"0000:3b:00.1"})").where->pci_bus_id,
      "0000:3b:00.1");
  EXPECT_FALSE(parse_event(R"({"t":1,"event":"process_start"})").where);

  const std::pair<const char*, const char*> bad[] = {
      {R"("host":7)", "\"host\" must be a string"},
      {R"("host":"")", "\"host\" must not be empty"},
      {R"("device":null)", "\"device\" must be a string"},
      {R"("device":"")", "\"device\" must not be empty"},
      {R"("device":"GPU-1","pci_bus_id":["19"])", "\"pci_bus_id\" must be a string"},
      {R"("device":"GPU-1","pci_bus_id":"19:00.0")",
       "\"pci_bus_id\" \"19:00.0\" is not a PCI bus id (domain:bus:device.function, 00000000:19:00.0)"},
      {R"("device":"GPU-1","pci_bus_id":"0000:19:00.8")",
       "\"pci_bus_id\" \"0000:19:00.8\" is not a PCI bus id (domain:bus:device.function, 00000000:19:00.0)"},
      {R"("device":"cpu","pci_bus_id":"0000:19:00.0")", "\"pci_bus_id\" names a GPU, but \"device\" does not"},
      {R"("pci_bus_id":"0000:19:00.0")", "\"pci_bus_id\" names a GPU, but \"device\" does not"},
      {R"("attempt":-1)", "\"attempt\" must be an integer from 0 to 2^63 - 1"},
      {R"("attempt":"0")", "\"attempt\" must be an integer from 0 to 2^63 - 1"},
  };
  for (const auto& [fields, why] : bad) {
    EXPECT_EQ(error_of(with_line(std::string(R"({"t":0,"event":"process_start",)") + fields + "}", 2)),
              std::string("line 2: process_start: ") + why)
        << fields;
  }
  // sdc_detected's "device" names the suspect's GPU, in whatever form its writer chose.
  EXPECT_EQ(error_of(with_line(R"({"t":0,"event":"node_quarantined","device":3,"attempt":"x","host":1})", 2)),
            "no error");
}

// Found by coverage-guided fuzzing: simdjson On Demand skipped the values of unused fields without
// looking inside, so these lines were read.
TEST(GoodputBadInput, MalformedValuesInUnusedFieldsNameTheirLine) {
  const std::string values[] = {"tru", "[}",   "{\"a\" 1 2}", "\"\\q\"", std::string(1, '\0'), "nul", "-",
                                "01",  "[1,]", "{\"a\":}",    "[[[]]",   "\"\x01\"",           "1.",  "+1"};
  for (const std::string& value : values) {
    const std::string line = "{\"t\":5,\"event\":\"init_begin\",\"x\":" + value + "}";
    EXPECT_EQ(error_of(with_line(line, 2)), "line 2: not valid JSON") << value;
  }
  EXPECT_EQ(error_of(with_line(R"({"t":5,"event":"init_begin","\q":1})", 2)), "line 2: not valid JSON");
  // Every kind of valid JSON in an unused field is read.
  const std::string fine =
      R"({"t":5,"event":"init_begin","x":{"a":[1,-2.5e3,true,false,null,"\u00e9\n",{},[]],"b":123456789012345678901234567890}})";
  EXPECT_EQ(error_of(with_line(fine, 2)), "no error");
}

// Times outside non-negative int64 nanoseconds, and dates that do not exist, are errors naming the
// line: the ledger differences and offsets times, which must never overflow.
TEST(GoodputBadInput, OutOfRangeAndInvalidTimesNameTheirLine) {
  const std::string range = " is out of range (1970-01-01T00:00:00Z to 2262-04-11T23:47:16.854775807Z)";
  auto at = [](const std::string& t) { return "{\"t\":" + t + ",\"event\":\"init_begin\"}"; };
  EXPECT_EQ(error_of(with_line(at("\"0000-01-01T00:00:00Z\""), 1)), "line 1: time \"0000-01-01T00:00:00Z\"" + range);
  EXPECT_EQ(error_of(with_line(at("\"1677-09-21T00:12:43.145224192Z\""), 1)),
            "line 1: time \"1677-09-21T00:12:43.145224192Z\"" + range);
  EXPECT_EQ(error_of(with_line(at("\"1969-12-31T23:59:59.999999999Z\""), 1)),
            "line 1: time \"1969-12-31T23:59:59.999999999Z\"" + range);
  EXPECT_EQ(error_of(with_line(at("\"1970-01-01T00:30:00+01:00\""), 1)),
            "line 1: time \"1970-01-01T00:30:00+01:00\"" + range);
  EXPECT_EQ(error_of(kGood + at("\"2262-04-11T23:47:16.854775808Z\"")),
            "line 5: time \"2262-04-11T23:47:16.854775808Z\"" + range);
  EXPECT_EQ(error_of(kGood + at("\"9999-12-31T23:59:59Z\"")), "line 5: time \"9999-12-31T23:59:59Z\"" + range);
  EXPECT_EQ(error_of(with_line(at("-1"), 2)), "line 2: \"t\" -1" + range);
  EXPECT_EQ(error_of(with_line(at("-9223372036854775808"), 2)), "line 2: \"t\" -9223372036854775808" + range);
  EXPECT_EQ(error_of(with_line(at("9223372036854775808"), 2)), "line 2: \"t\" must be an integer");
  EXPECT_EQ(error_of(with_line(at("\"2027-02-31T00:00:00Z\""), 2)),
            "line 2: bad RFC 3339 time \"2027-02-31T00:00:00Z\"");
  EXPECT_EQ(error_of(with_line(at("\"2027-02-29T00:00:00Z\""), 2)),
            "line 2: bad RFC 3339 time \"2027-02-29T00:00:00Z\"");
  EXPECT_EQ(error_of(with_line(at("\"2100-02-29T00:00:00Z\""), 2)),
            "line 2: bad RFC 3339 time \"2100-02-29T00:00:00Z\"");
  // A NUL (escaped as \u0000) passed for a separator.
  EXPECT_EQ(error_of(with_line(at("\"2027\\u000001-01T00:00:00Z\""), 2)).rfind("line 2: bad RFC 3339 time", 0), 0u);
  EXPECT_EQ(error_of(with_line(at("\"2027-04-31T00:00:00Z\""), 2)),
            "line 2: bad RFC 3339 time \"2027-04-31T00:00:00Z\"");
  EXPECT_EQ(error_of(with_line(at("\"2027-01-01T00:00:00+24:00\""), 2)),
            "line 2: bad RFC 3339 time \"2027-01-01T00:00:00+24:00\"");
  // The ends of the range and real leap days are accepted.
  EXPECT_EQ(parse_rfc3339_ns("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_rfc3339_ns("2262-04-11T23:47:16.854775807Z"), INT64_MAX);
  EXPECT_EQ(parse_rfc3339_ns("2028-02-29T00:00:00Z"), 1'835'395'200LL * 1'000'000'000LL);
  EXPECT_EQ(parse_rfc3339_ns("2000-02-29T00:00:00Z"), 951'782'400LL * 1'000'000'000LL);
}

// The whole range is usable: a wall time from 0 to INT64_MAX sums exactly.
TEST(GoodputBadInput, ExtremeButValidTimesSumExactly) {
  std::istringstream in(
      "{\"t\":0,\"event\":\"alloc_granted\"}\n"
      "{\"t\":0,\"event\":\"step_begin\",\"step\":0}\n"
      "{\"t\":9223372036854775807,\"event\":\"step_end\",\"step\":0}\n");
  const Breakdown b = analyze(in).breakdown;
  EXPECT_TRUE(b.balanced());
  EXPECT_EQ(b.wall_ns, INT64_MAX);
  EXPECT_EQ(b.productive_ns, INT64_MAX);
}

// A step in flight at a fault after a huge median step: the rework end is capped at the fault
// instead of overflowing step_begin + median.
TEST(GoodputBadInput, HugeMedianStepDoesNotOverflow) {
  const int64_t big = 4'000'000'000'000'000'000;
  std::istringstream in(
      "{\"t\":0,\"event\":\"alloc_granted\"}\n"
      "{\"t\":0,\"event\":\"step_begin\",\"step\":1}\n"
      "{\"t\":" +
      std::to_string(2 * big) +
      ",\"event\":\"step_end\",\"step\":1}\n"
      "{\"t\":" +
      std::to_string(2 * big) +
      ",\"event\":\"ckpt_commit\",\"step\":1}\n"
      "{\"t\":" +
      std::to_string(2 * big) +
      ",\"event\":\"step_begin\",\"step\":2}\n"
      "{\"t\":" +
      std::to_string(2 * big + 10) +
      ",\"event\":\"fault_detected\"}\n"
      "{\"t\":" +
      std::to_string(INT64_MAX) + ",\"event\":\"teardown_end\"}\n");
  const Breakdown b = analyze(in).breakdown;
  EXPECT_TRUE(b.balanced());
  EXPECT_EQ(b.productive_ns, 2 * big);
  EXPECT_EQ(b[Category::kRework].ns, 10);  // the 10 ns of step 2 before the fault
  EXPECT_EQ(b[Category::kDetectionTeardown].ns, INT64_MAX - 2 * big - 10);
}

// Steps are non-negative: "step - 1" and "last_good_step" comparisons must never overflow.
TEST(GoodputBadInput, NegativeStepsNameTheirLine) {
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":\"ckpt_commit\",\"step\":-1}", 2)),
            "line 2: \"step\" must not be negative");
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":\"step_begin\",\"step\":-9223372036854775808}", 2)),
            "line 2: \"step\" must not be negative");
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":\"sdc_detected\",\"last_good_step\":-3}", 2)),
            "line 2: \"last_good_step\" must not be negative");
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":\"restore_end\",\"step\":18446744073709551615}", 2)),
            "line 2: \"step\" must be an integer");
  // The largest step is fine, and step 0 re-run after a restart is a rollback to the start.
  std::istringstream in(
      "{\"t\":0,\"event\":\"alloc_granted\"}\n"
      "{\"t\":0,\"event\":\"step_begin\",\"step\":9223372036854775807}\n"
      "{\"t\":10,\"event\":\"step_end\",\"step\":9223372036854775807}\n"
      "{\"t\":10,\"event\":\"step_begin\",\"step\":0}\n"
      "{\"t\":30,\"event\":\"step_end\",\"step\":0}\n");
  const Breakdown b = analyze(in).breakdown;
  EXPECT_TRUE(b.balanced());
  EXPECT_EQ(b.productive_ns, 20);
  EXPECT_EQ(b[Category::kRework].ns, 10);
}

// Events built in code get the same ranges from the ledger itself.
TEST(GoodputBadInput, LedgerRejectsOutOfRangeEvents) {
  Ledger ledger;
  Event bad_t;
  bad_t.t = -5;
  EXPECT_THROW(ledger.add(bad_t), InputError);
  Event bad_step;
  bad_step.kind = EventKind::kStepBegin;
  bad_step.step = INT64_MIN;
  EXPECT_THROW(ledger.add(bad_step), InputError);
  EXPECT_EQ(ledger.finish().wall_ns, 0);
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

// Integer fields read as JSON says. The answer here comes from the text alone: an integer by JSON's
// grammar, then the int64 range, then the field's own rule.
std::string step_read_from(const std::string& token) {
  static const std::regex kInteger("-?(0|[1-9][0-9]*)");
  const std::string number = token.substr(0, token.find_last_not_of(" \t") + 1);
  if (!std::regex_match(number, kInteger)) return "\"step\" must be an integer";
  const bool negative = number[0] == '-';
  const std::string digits = number.substr(negative ? 1 : 0);
  const std::string limit = negative ? "9223372036854775808" : "9223372036854775807";
  if (digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit)) {
    return "\"step\" must be an integer";
  }
  if (negative && digits != "0") return "\"step\" must not be negative";
  return "step " + (negative ? std::string("0") : digits);
}

std::string step_read_by_reader(const std::string& line) {
  try {
    const Event e = parse_event(line);
    return e.step ? "step " + std::to_string(*e.step) : "no step";
  } catch (const InputError& error) {
    return error.what();
  }
}

TEST(GoodputBadInput, IntegerTokensAreReadAsJsonSays) {
  std::vector<std::string> tokens = {"0",
                                     "7",
                                     "10",
                                     "99999999",
                                     "100000000",
                                     "1234567890123456",
                                     "12345678901234567",
                                     "1798848000000000000",
                                     "9223372036854775807",
                                     "9223372036854775808",
                                     "9999999999999999999",
                                     "10000000000000000000",
                                     "123456789012345678901234",
                                     "00",
                                     "01",
                                     "-0",
                                     "-1",
                                     "-9223372036854775808",
                                     "-9223372036854775809",
                                     "1.0",
                                     "1e3",
                                     "12x",
                                     "+1",
                                     "-",
                                     "12 ",
                                     "12\t"};
  std::mt19937_64 rng(20261201);
  const std::string suffixes[] = {"", "", "", ".5", "e2", "x", " ", "0", "-"};
  for (int i = 0; i < 3000; ++i) {
    std::string token = rng() % 5 == 0 ? "-" : "";
    const size_t length = rng() % 23;
    for (size_t k = 0; k < length; ++k) token += static_cast<char>('0' + rng() % 10);
    token += suffixes[rng() % std::size(suffixes)];
    tokens.push_back(token);
  }
  for (const std::string& token : tokens) {
    const std::string expected = step_read_from(token);
    // Last in the line and in the middle.
    EXPECT_EQ(step_read_by_reader("{\"t\":0,\"event\":\"init_begin\",\"step\":" + token + "}"), expected) << token;
    EXPECT_EQ(step_read_by_reader("{\"t\":0,\"step\":" + token + ",\"event\":\"init_begin\"}"), expected) << token;
  }
  // The time, and a number followed by another value.
  EXPECT_EQ(parse_event("{\"t\":1798848000000000123,\"event\":\"init_begin\"}").t, 1798848000000000123);
  EXPECT_EQ(parse_event("{\"event\":\"init_begin\",\"t\":9223372036854775807}").t, INT64_MAX);
  EXPECT_EQ(step_read_by_reader("{\"t\":0,\"event\":\"init_begin\",\"step\":12 3}"), "not valid JSON");
}

// Names are matched in the line itself, and those with an escape after unescaping.
TEST(GoodputBadInput, EventNamesAreReadAsJsonSays) {
  for (int k = 0; k <= static_cast<int>(EventKind::kNodeQuarantined); ++k) {
    const auto kind = static_cast<EventKind>(k);
    const std::string line = "{\"t\":0,\"event\":\"" + std::string(event_name(kind)) + "\",\"step\":1}";
    EXPECT_EQ(parse_event(line).kind, kind) << line;
    EXPECT_EQ(event_kind(event_name(kind)), kind);
  }
  // Escaped names mean what they unescape to.
  EXPECT_EQ(parse_event(R"({"t":0,"event":"step\u005fbegin","step":1})").kind, EventKind::kStepBegin);
  EXPECT_EQ(parse_event(R"({"t":0,"event":"\u0073tep_end","step":1})").kind, EventKind::kStepEnd);
  EXPECT_EQ(parse_event(R"({"t":0,"event" : "ckpt_commit" ,"step":1})").kind, EventKind::kCkptCommit);
  const std::string unknown[] = {"step_beginx", "step_begi",   "Step_begin",        "", "s",
                                 "zzz",         "step_begin ", "step_begin\\u0000", "é"};
  for (const std::string& name : unknown) {
    EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":\"" + name + "\"}", 2)).rfind("line 2: unknown event \"", 0), 0u)
        << name;
    EXPECT_FALSE(event_kind(name)) << name;
  }
  EXPECT_EQ(error_of(with_line("{\"t\":5,\"event\":7}", 2)), "line 2: \"event\" must be a string");
}

// An event padded with spaces to exactly `size` bytes.
std::string padded(const std::string& head, size_t size) {
  return head + std::string(size - head.size() - 1, ' ') + "}";
}

TEST(GoodputBadInput, TheOneMibLineLimitIsTheSameInTheMiddleAndAtTheEnd) {
  constexpr size_t kMib = 1 << 20;
  const std::string init = "{\"t\":5,\"event\":\"init_begin\"";
  EXPECT_EQ(error_of(with_line(padded(init, kMib), 2)), "no error");
  EXPECT_EQ(error_of(with_line(padded(init, kMib + 1), 2)), "line 2: line longer than 1 MiB");
  EXPECT_EQ(error_of(with_line(padded(init, kMib + kMib / 2), 2)), "line 2: line longer than 1 MiB");
  // The last line, without a newline.
  const std::string head = kGood.substr(0, kGood.rfind('{'));
  const std::string end = "{\"t\":120,\"event\":\"job_end\"";
  EXPECT_EQ(error_of(head + padded(end, kMib)), "no error");
  EXPECT_EQ(error_of(head + padded(end, kMib + 1)), "line 4: line longer than 1 MiB");
}

}  // namespace
}  // namespace sdc::goodput
