// Shared by the libFuzzer harnesses (README.md, "Coverage-guided fuzzing"). A property that does
// not hold aborts with its reason: libFuzzer reports that as a crash and keeps the input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "goodput/breakdown.hpp"

#define SDC_FUZZ_CHECK(condition, message)                                                         \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      std::fprintf(stderr, "property failed: %s: %s\n", #condition, std::string(message).c_str()); \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

namespace sdc::fuzz {

inline std::string as_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Labels that are not negative, SDC parts within them, and a sum equal to the wall time, exactly.
inline bool sums_exactly(const goodput::Breakdown& b) {
  int64_t sum = b.productive_ns;
  int64_t sdc = 0;
  for (const goodput::CategoryNs& c : b.categories) {
    if (c.ns < 0 || c.sdc_ns < 0 || c.sdc_ns > c.ns) return false;
    sum += c.ns;
    sdc += c.sdc_ns;
  }
  return b.wall_ns >= 0 && b.productive_ns >= 0 && sum == b.wall_ns && sdc == b.sdc_lost_ns();
}

// A directory of this process's own, removed when it exits.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const auto path = std::filesystem::temp_directory_path() / ("sdcprobe-libfuzzer-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    std::atexit([] { std::filesystem::remove_all(scratch_dir()); });
    return path;
  }();
  return dir;
}

// Writes `text` to `name` in scratch_dir() and returns its path.
inline std::string write_scratch(const std::string& name, const std::string& text) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

}  // namespace sdc::fuzz
