#include "host/parse_number.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "host/error.hpp"

namespace sdc {

std::optional<uint64_t> parse_unsigned(std::string_view text) {
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const std::string_view digits = hex ? text.substr(2) : text;
  if (digits.empty() || (!hex && digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  uint64_t value = 0;
  const uint64_t base = hex ? 16 : 10;
  for (char c : digits) {
    uint64_t d;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint64_t>(c - '0');
    } else if (hex && c >= 'a' && c <= 'f') {
      d = static_cast<uint64_t>(c - 'a' + 10);
    } else if (hex && c >= 'A' && c <= 'F') {
      d = static_cast<uint64_t>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    if (value > (UINT64_MAX - d) / base) return std::nullopt;
    value = value * base + d;
  }
  return value;
}

std::optional<double> parse_finite(std::string_view text) {
  const std::string s(text);
  // strtod skips leading white space and accepts "nan", "inf" and hex floats: only plain numbers here.
  if (s.empty() || s.find_first_not_of("0123456789+-.eE") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(value)) return std::nullopt;
  return value;
}

uint64_t parse_unsigned(const std::string& field, std::string_view text, uint64_t lo, uint64_t hi) {
  const auto value = parse_unsigned(text);
  if (!value || *value < lo || *value > hi) {
    throw InputError((field.empty() ? "" : field + ": ") + "expected a decimal or 0x-hex integer in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + std::string(text) + "'");
  }
  return *value;
}

double parse_finite(const std::string& field, std::string_view text, double lo, double hi) {
  const auto value = parse_finite(text);
  if (!value || *value < lo || *value > hi) {
    std::ostringstream range;
    range << "[" << lo << ", " << hi << "]";
    throw InputError((field.empty() ? "" : field + ": ") + "expected a finite number in " + range.str() + ", got '" +
                     std::string(text) + "'");
  }
  return *value;
}

uint64_t parse_size(const std::string& field, std::string_view text, uint64_t lo, uint64_t hi) {
  const std::string prefix = field.empty() ? "" : field + ": ";
  int shift = 0;
  std::string_view digits = text;
  if (!text.empty() && (text.back() == 'K' || text.back() == 'M' || text.back() == 'G')) {
    shift = text.back() == 'K' ? 10 : text.back() == 'M' ? 20 : 30;
    digits.remove_suffix(1);
  }
  const auto value = parse_unsigned(digits);
  if (!value || *value > (UINT64_MAX >> shift)) {
    throw InputError(prefix +
                     "expected bytes as a decimal or 0x-hex integer, optionally with a K, M or G suffix, got '" +
                     std::string(text) + "'");
  }
  const uint64_t bytes = *value << shift;
  if (bytes < lo || bytes > hi) {
    throw InputError(prefix + "must be at " +
                     (bytes < lo ? "least " + std::to_string(lo) : "most " + std::to_string(hi)) + " bytes, got '" +
                     std::string(text) + "'");
  }
  return bytes;
}

}  // namespace sdc
