// The result of one probe on one device. A mismatch is data; an API failure is `skipped` with a
// reason; a sticky device error is `device_error`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "host/mismatch.hpp"

namespace sdc {

enum class Outcome { kPass, kFail, kSkipped, kDeviceError };

const char* outcome_name(Outcome o);

struct ProbeResult {
  std::string probe;
  int device_index = 0;
  std::string device_uuid;
  Outcome outcome = Outcome::kPass;
  MismatchReport report;  // checked, mismatches, first records
  double duration_s = 0;
  uint64_t bytes = 0;  // bytes read plus written by the device
  double flops = 0;
  uint64_t seed = 0;
  nlohmann::json params = nlohmann::json::object();
  std::string reason;  // skipped / device_error: why

  // pass or fail from the report; keeps skipped / device_error.
  void settle() {
    if (outcome == Outcome::kPass || outcome == Outcome::kFail) {
      outcome = report.mismatches > 0 ? Outcome::kFail : Outcome::kPass;
    }
  }
};

nlohmann::json to_json(const ProbeResult& r);

}  // namespace sdc
