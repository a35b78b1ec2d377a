#include "scheduler/duration.hpp"

#include <cctype>
#include <string_view>

#include "host/error.hpp"
#include "host/parse_number.hpp"

namespace sdc {

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

}  // namespace sdc
