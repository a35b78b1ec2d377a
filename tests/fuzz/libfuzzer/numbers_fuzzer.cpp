// The numbers an operator writes (host/parse_number.hpp) and buffer sizes. Properties: integers and
// sizes agree with an independent reference; a real is accepted only with strtod's plain syntax and
// finite, and refused with that syntax only when out of range; errors name the field and the text.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "host/error.hpp"
#include "host/parse_number.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"
#include "tests/fuzz/properties.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  // Command-line arguments are C strings: up to the first NUL.
  const std::string bytes = fuzz::as_text(data, size);
  const std::string text = bytes.substr(0, bytes.find('\0'));
  SDC_FUZZ_CHECK(parse_unsigned(text) == fuzz::reference_unsigned(text), text);

  const auto real = parse_finite(text);
  if (real) {
    SDC_FUZZ_CHECK(fuzz::real_syntax(text) && std::isfinite(*real), text);
  } else if (fuzz::real_syntax(text)) {
    errno = 0;
    const double d = std::strtod(text.c_str(), nullptr);
    SDC_FUZZ_CHECK(errno == ERANGE || !std::isfinite(d), text);
  }

  constexpr uint64_t kLo = 8, kHi = uint64_t{1} << 48;
  const auto expected = fuzz::reference_size(text);
  try {
    const uint64_t size_bytes = parse_size("--size", text, kLo, kHi);
    SDC_FUZZ_CHECK(expected && size_bytes == *expected && size_bytes >= kLo && size_bytes <= kHi, text);
  } catch (const InputError& e) {
    SDC_FUZZ_CHECK(!expected || *expected < kLo || *expected > kHi, text);
    const std::string message = e.what();
    SDC_FUZZ_CHECK(message.rfind("--size: ", 0) == 0 && message.find("'" + text + "'") != std::string::npos, message);
  }
  return 0;
}
