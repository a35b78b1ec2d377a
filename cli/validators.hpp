// CLI11 validators, so that bad input fails while the command line is parsed. Numbers follow
// host/parse_number.hpp's grammar: CLI11's own checks let "nan" through a range and wrap "-1" into
// an unsigned option.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace sdc::cli {

// A decimal or 0x-hex integer in [lo, hi].
CLI::Validator unsigned_in(uint64_t lo, uint64_t hi);
// A finite real in [lo, hi].
CLI::Validator finite_in(double lo, double hi);
// A buffer size in bytes (host/parse_number.hpp's parse_size: K, M, G suffixes), from one 8-byte word
// to kMaxGoldenSizeBytes; the option receives the decimal byte count.
CLI::Validator buffer_size();
// A byte count by the same grammar in [lo, hi]; the option receives the decimal byte count.
CLI::Validator byte_size(uint64_t lo, uint64_t hi, const std::string& description);
// An --inject spec (host/injection.hpp); an empty one is an error, not "no injection".
CLI::Validator injection_spec();

}  // namespace sdc::cli
