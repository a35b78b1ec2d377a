#include "cli/validators.hpp"

#include <string>

#include "host/error.hpp"
#include "host/injection.hpp"
#include "host/parse_number.hpp"

namespace sdc::cli {

CLI::Validator unsigned_in(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        try {
          parse_unsigned("", text, lo, hi);
          return "";
        } catch (const InputError& e) {
          return e.what();
        }
      },
      "UINT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator finite_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        try {
          parse_finite("", text, lo, hi);
          return "";
        } catch (const InputError& e) {
          return e.what();
        }
      },
      "NUMBER in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator injection_spec() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_injection_specs(text);
          return "";
        } catch (const InputError& e) {
          return e.what();
        }
      },
      "SPEC");
}

}  // namespace sdc::cli
