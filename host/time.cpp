#include "host/time.hpp"

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "host/error.hpp"
#include "host/parse_number.hpp"

namespace sdc {
namespace {

bool leap_year(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t days_in_month(int64_t y, int64_t m) {
  constexpr int64_t kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap_year(y) ? 29 : kDays[m - 1];
}

std::string printf_string(const char* format, double a, double b = 0, double c = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

}  // namespace

double parse_duration(const std::string& field, const std::string& text) {
  auto bad = [&]() -> double {
    throw InputError(field + ": expected a duration such as 90s, 10m, 1h30m or 7d, got '" + text + "'");
  };
  if (text.empty()) return bad();
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = i;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
    const auto value = parse_finite(std::string_view(text).substr(i, end - i));
    if (!value) return bad();
    double unit = 1;
    if (end < text.size()) {
      switch (text[end]) {
        case 's': unit = 1; break;
        case 'm': unit = 60; break;
        case 'h': unit = 3600; break;
        case 'd': unit = 86400; break;
        default: return bad();
      }
      ++end;
    } else if (i != 0) {
      return bad();  // "1h30" is ambiguous
    }
    total += *value * unit;
    i = end;
  }
  // Beyond ten years a duration is a typo, and 300 years of nanoseconds would overflow a clock.
  if (!(total > 0) || total > kMaxDurationS) {
    throw InputError(field + ": expected a positive duration up to 10 years (3650d), got '" + text + "'");
  }
  return total;
}

// Howard Hinnant's civil-date algorithm.
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int64_t parse_rfc3339_ns(std::string_view s) {
  auto fail = [&]() { throw InputError("bad RFC 3339 time \"" + std::string(s) + "\""); };
  auto digits = [&](size_t pos, size_t n) {
    if (pos + n > s.size()) fail();
    int64_t v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (s[i] < '0' || s[i] > '9') fail();
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  auto expect = [&](size_t pos, const char* any_of) {
    // strchr finds the terminator too: a NUL (from "\u0000") is no separator.
    if (pos >= s.size() || s[pos] == '\0' || std::strchr(any_of, s[pos]) == nullptr) fail();
  };
  const int64_t year = digits(0, 4);
  expect(4, "-");
  const int64_t month = digits(5, 2);
  expect(7, "-");
  const int64_t day = digits(8, 2);
  expect(10, "Tt ");
  const int64_t hour = digits(11, 2);
  expect(13, ":");
  const int64_t minute = digits(14, 2);
  expect(16, ":");
  const int64_t second = digits(17, 2);
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 || minute > 59 ||
      second > 60) {
    fail();
  }
  size_t pos = 19;
  int64_t frac_ns = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int64_t scale = 100000000;
    const size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      frac_ns += (s[pos] - '0') * scale;  // digits beyond nanoseconds are truncated
      scale /= 10;
      ++pos;
    }
    if (pos == start) fail();
  }
  int64_t offset_s = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const int64_t sign = s[pos] == '-' ? -1 : 1;
    const int64_t oh = digits(pos + 1, 2);
    expect(pos + 3, ":");
    const int64_t om = digits(pos + 4, 2);
    if (oh > 23 || om > 59) fail();
    offset_s = sign * (oh * 3600 + om * 60);
    pos += 6;
  } else {
    fail();
  }
  if (pos != s.size()) fail();
  // Four-digit years keep `secs` far from overflow; the nanoseconds must fit the event time range.
  const int64_t secs = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  constexpr int64_t kNsPerS = 1000000000;
  if (secs < 0 || secs > (INT64_MAX - frac_ns) / kNsPerS) {
    throw InputError("time \"" + std::string(s) + "\" is out of range " + std::string(kTimeRange));
  }
  return secs * kNsPerS + frac_ns;
}

std::string format_utc(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string format_duration_s(double seconds) {
  const long long s = std::llround(seconds);
  if (s % 86400 == 0 && s > 0) return std::to_string(s / 86400) + "d";
  if (s % 3600 == 0 && s > 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0 && s > 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

std::string format_duration_ns(int64_t ns) {
  const bool negative = ns < 0;
  const double v = static_cast<double>(negative ? -ns : ns);
  std::string s;
  const int64_t abs = negative ? -ns : ns;
  const int64_t secs = abs / 1'000'000'000;
  if (secs >= 86400) {
    s = printf_string("%.0fd %02.0fh %02.0fm", static_cast<double>(secs / 86400),
                      static_cast<double>(secs % 86400 / 3600), static_cast<double>(secs % 3600 / 60));
  } else if (secs >= 3600) {
    s = printf_string("%.0fh %02.0fm %02.0fs", static_cast<double>(secs / 3600), static_cast<double>(secs % 3600 / 60),
                      static_cast<double>(secs % 60));
  } else if (secs >= 60) {
    s = printf_string("%.0fm %04.1fs", static_cast<double>(secs / 60), std::fmod(v / 1e9, 60.0));
  } else if (abs >= 1'000'000'000) {
    s = printf_string("%.3fs", v / 1e9);
  } else if (abs >= 1'000'000) {
    s = printf_string("%.1fms", v / 1e6);
  } else if (abs >= 1'000) {
    s = printf_string("%.1fus", v / 1e3);
  } else {
    s = std::to_string(abs) + "ns";
  }
  return negative ? "-" + s : s;
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace sdc
