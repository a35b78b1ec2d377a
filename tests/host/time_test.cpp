// host/time: durations on the command line, RFC 3339 times, and durations as reports print them.
#include "host/time.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "host/error.hpp"

namespace sdc {
namespace {

TEST(ParseDuration, AcceptsUnitsAndNamesTheFieldOnError) {
  EXPECT_DOUBLE_EQ(parse_duration("--every", "1h"), 3600);
  EXPECT_DOUBLE_EQ(parse_duration("--every", "1h30m"), 5400);
  EXPECT_DOUBLE_EQ(parse_duration("--budget", "90"), 90);
  EXPECT_DOUBLE_EQ(parse_duration("--window", "7d"), 7 * 86400);
  EXPECT_DOUBLE_EQ(parse_duration("--budget", "3650d"), kMaxDurationS);
  // 300 years of nanoseconds overflow a steady_clock deadline: refused, as are malformed numbers.
  const std::string huge(400, '9');
  for (const std::string& bad : std::vector<std::string>{"", "soon", "10x", "0s", "1h30", "-5m", "109500d", "3651d",
                                                         "1.2.3s", "1e9s", "nan", "inf", ".s", huge, huge + "s"}) {
    try {
      parse_duration("--budget", bad);
      FAIL() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--budget"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sdc
