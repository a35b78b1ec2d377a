#include "cli/validators.hpp"

#include <functional>
#include <string>

#include "host/error.hpp"
#include "host/injection.hpp"
#include "host/parse_number.hpp"
#include "scheduler/consensus/golden.hpp"

namespace sdc::cli {
namespace {

// A CLI11 validator from a parser that throws InputError: its message becomes CLI11's error.
CLI::Validator from_parser(std::function<void(const std::string&)> parse, std::string description) {
  return CLI::Validator(
      [parse = std::move(parse)](std::string& text) -> std::string {
        try {
          parse(text);
          return "";
        } catch (const InputError& e) {
          return e.what();
        }
      },
      std::move(description));
}

}  // namespace

CLI::Validator unsigned_in(uint64_t lo, uint64_t hi) {
  return from_parser([lo, hi](const std::string& text) { parse_unsigned("", text, lo, hi); },
                     "UINT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator finite_in(double lo, double hi) {
  return from_parser([lo, hi](const std::string& text) { parse_finite("", text, lo, hi); },
                     "NUMBER in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator byte_size(uint64_t lo, uint64_t hi, const std::string& description) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        try {
          text = std::to_string(parse_size("", text, lo, hi));
          return "";
        } catch (const InputError& e) {
          return e.what();
        }
      },
      description);
}

// Probes work in 8-byte words: fewer than one tests nothing.
CLI::Validator buffer_size() { return byte_size(8, kMaxGoldenSizeBytes, "BYTES in [8, 2^48] (K, M, G: binary)"); }

CLI::Validator injection_spec() {
  return from_parser([](const std::string& text) { parse_injection_specs(text); }, "SPEC");
}

}  // namespace sdc::cli
