// One grammar for the numbers an operator writes: decimal or 0x hex, in range, nothing else.
#include "host/parse_number.hpp"

#include <gtest/gtest.h>

#include "host/error.hpp"

namespace sdc {
namespace {

TEST(ParseNumber, AcceptsDecimalAndHexInRange) {
  EXPECT_EQ(parse_unsigned("0"), 0u);
  EXPECT_EQ(parse_unsigned("7"), 7u);
  EXPECT_EQ(parse_unsigned("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_unsigned("0xffffffffffffffff"), UINT64_MAX);
  EXPECT_EQ(parse_unsigned("0X1F"), 31u);
  EXPECT_EQ(parse_unsigned("0x0010"), 16u);  // hex digits may be padded
}

TEST(ParseNumber, RefusesSignsOctalOverflowExponentsAndEmpty) {
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "077", "010", "00", "18446744073709551616", "0x10000000000000000",
                          "1e26", "1.0", "0x", "0xg", "nan", "inf", "1_000", "٣"}) {
    EXPECT_FALSE(parse_unsigned(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(ParseNumber, RangeErrorsNameTheField) {
  EXPECT_EQ(parse_unsigned("--seed", "0x10", 0, UINT64_MAX), 16u);
  try {
    parse_unsigned("--iterations", "0", 1, 1024);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--iterations: expected a decimal or 0x-hex integer in [1, 1024], got '0'");
  }
}

TEST(ParseNumber, RealsMustBeFinite) {
  EXPECT_EQ(parse_finite("2.5"), 2.5);
  EXPECT_EQ(parse_finite("1e3"), 1000.0);
  EXPECT_EQ(parse_finite("-0.5"), -0.5);
  for (const char* bad : {"", "nan", "NaN", "inf", "-inf", "infinity", "1e999", "0x1p3", " 1", "1 ", "1.5s", "."}) {
    EXPECT_FALSE(parse_finite(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_THROW(parse_finite("--probe-timeout", "nan", 0.1, 86400), InputError);
  EXPECT_THROW(parse_finite("--probe-timeout", "0.05", 0.1, 86400), InputError);
  EXPECT_EQ(parse_finite("--probe-timeout", "0.1", 0.1, 86400), 0.1);
}

}  // namespace
}  // namespace sdc
