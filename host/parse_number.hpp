// Numbers an operator writes, on the command line and in --inject specs: one grammar everywhere.
// Integers are decimal or 0x hex, nothing else: no sign, no octal (a leading zero is refused, so
// 077 and bit=010 are errors rather than 63 and 8), no exponent, no saturation. Reals must be finite.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sdc {

// The value, or nothing when `text` is not a decimal or 0x-hex integer that fits 64 bits.
std::optional<uint64_t> parse_unsigned(std::string_view text);
// The value, or nothing when `text` is not a finite real number (strtod's syntax, whole string).
std::optional<double> parse_finite(std::string_view text);

// The same, in [lo, hi]; throws InputError "<field>: expected ..., got '<text>'" (no "<field>: "
// when `field` is empty).
uint64_t parse_unsigned(const std::string& field, std::string_view text, uint64_t lo, uint64_t hi);
double parse_finite(const std::string& field, std::string_view text, double lo, double hi);

// A byte count: an integer by the rules above, optionally followed by K, M or G (binary: 2^10, 2^20,
// 2^30), in [lo, hi]; throws InputError "<field>: ..." naming the text otherwise.
uint64_t parse_size(const std::string& field, std::string_view text, uint64_t lo, uint64_t hi);

}  // namespace sdc
