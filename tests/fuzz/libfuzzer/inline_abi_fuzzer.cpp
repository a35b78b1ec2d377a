// The inline probe's C ABI (sdcprobe.h): the config, events and the cadence. The first byte picks
// which; the rest is the input. Properties: an accepted event is one line the goodput reader
// reads, a refused one writes nothing and says why; a config is created or refused with a reason;
// a cadence is returned exactly for positive finite arguments, and is at least one step.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "goodput/event.hpp"
#include "sdcprobe/sdcprobe.h"
#include "tests/fuzz/libfuzzer/harness.hpp"

namespace {

std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return last;
}

void check_event(const std::string& text) {
  // One probe for the whole run: creating one runs its probes.
  static const std::string log = sdc::fuzz::write_scratch("events.jsonl", "");
  static sdc_inline* probe = [] {
    sdc_inline_config c;
    sdc_inline_config_init(&c);
    c.backend = "cpu";
    c.probes = "alu.fma32";
    c.seed = 1;
    c.event_log = log.c_str();
    c.every = 1000000000;
    sdc_inline* p = nullptr;
    SDC_FUZZ_CHECK(sdc_inline_create(&c, &p) == SDC_OK, sdc_last_error());
    return p;
  }();
  const auto before = std::filesystem::file_size(log);
  const sdc_status status = sdc_inline_log_event(probe, text.c_str());
  const auto after = std::filesystem::file_size(log);
  if (status == SDC_OK) {
    SDC_FUZZ_CHECK(after > before, "accepted, nothing written");
    sdc::goodput::parse_event(last_line(log));  // throws, and so aborts, when the reader would refuse it
  } else {
    SDC_FUZZ_CHECK(status == SDC_ERR_INVALID_ARGUMENT && *sdc_last_error() != '\0', text);
    SDC_FUZZ_CHECK(after == before, "refused, written anyway: " + text);
  }
}

// The four numbers of sdc_choose_every, then the job's ranks (1 where the input ends first).
void check_cadence(const uint8_t* data, size_t size) {
  double a[4] = {0, 0, 0, 0};
  int64_t ranks = 1;
  std::memcpy(a, data, std::min(size, sizeof a));
  if (size > sizeof a) std::memcpy(&ranks, data + sizeof a, std::min(size - sizeof a, sizeof ranks));
  int64_t every = -7, one_rank = -7;
  const sdc_status status = sdc_choose_job_every(a[0], a[1], a[2], a[3], ranks, &every);
  const bool valid = a[0] > 0 && std::isfinite(a[0]) && a[1] > 0 && std::isfinite(a[1]) && a[2] >= 0 &&
                     std::isfinite(a[2]) && a[3] > 0 && a[3] <= 1 && ranks >= 1;
  SDC_FUZZ_CHECK((status == SDC_OK) == valid, sdc_last_error());
  if (status != SDC_OK) {
    SDC_FUZZ_CHECK(every == -7 && *sdc_last_error() != '\0', "changed on error");
    return;
  }
  SDC_FUZZ_CHECK(every >= 1, std::to_string(every));
  // N ranks have N times one device's SDC rate: never a longer interval than one rank's.
  SDC_FUZZ_CHECK(sdc_choose_every(a[0], a[1], a[2], a[3], &one_rank) == SDC_OK, sdc_last_error());
  SDC_FUZZ_CHECK(every <= one_rank, std::to_string(every) + " for " + std::to_string(ranks) + " ranks, " +
                                        std::to_string(one_rank) + " for one");
}

void check_config(const uint8_t* data, size_t size) {
  // Numbers first, then the strings, separated by NULs: probes, inject, backend.
  struct {
    double budget_fraction, sdc_rate;
    int64_t every, ranks;
    int32_t device;
  } numbers{};
  if (size < sizeof numbers) return;
  std::memcpy(&numbers, data, sizeof numbers);
  std::string rest(reinterpret_cast<const char*>(data + sizeof numbers), size - sizeof numbers);
  std::string fields[3];
  for (auto& f : fields) {
    const size_t nul = rest.find('\0');
    f = rest.substr(0, nul);
    rest = nul == std::string::npos ? "" : rest.substr(nul + 1);
  }
  sdc_inline_config c;
  sdc_inline_config_init(&c);
  c.budget_fraction = numbers.budget_fraction;
  c.sdc_rate_per_device_day = numbers.sdc_rate;
  c.every = numbers.every;
  c.ranks = numbers.ranks;
  c.device = numbers.device;
  c.probes = fields[0].c_str();
  c.inject = fields[1].empty() ? nullptr : fields[1].c_str();
  c.backend = fields[2].empty() ? "cpu" : fields[2].c_str();
  c.seed = 3;
  sdc_inline* p = nullptr;
  const sdc_status status = sdc_inline_create(&c, &p);
  if (status == SDC_OK) {
    SDC_FUZZ_CHECK(p != nullptr, "no probe");
    sdc_inline_destroy(p);
    return;
  }
  SDC_FUZZ_CHECK(status == SDC_ERR_INVALID_ARGUMENT || status == SDC_ERR_NO_DEVICE, sdc_last_error());
  SDC_FUZZ_CHECK(p == nullptr && *sdc_last_error() != '\0', "no reason");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0:
      check_event(std::string(reinterpret_cast<const char*>(data + 1),
                              strnlen(reinterpret_cast<const char*>(data + 1), size - 1)));
      break;
    case 1: check_cadence(data + 1, size - 1); break;
    case 2: check_config(data + 1, size - 1); break;
  }
  return 0;
}
