// The result of one probe on one device. A mismatch is data; an API failure is `skipped` with a
// reason; a sticky device error is `device_error`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "host/mismatch.hpp"
#include "kernels/common/digest.hpp"

namespace sdc {

enum class Outcome { kPass, kFail, kSkipped, kDeviceError };

const char* outcome_name(Outcome o);

// mem.* probes test memory words: their records are located by address, never by the SM or core
// that happened to read them.
inline bool is_memory_probe(const std::string& probe_id) { return probe_id.rfind("mem.", 0) == 0; }

struct ProbeResult {
  std::string probe;
  int device_index = 0;
  std::string device_uuid;
  Outcome outcome = Outcome::kPass;
  MismatchReport report;  // checked, mismatches, first records
  double duration_s = 0;
  // The part of duration_s spent allocating and pre-faulting the probe's buffer, outside its timed
  // passes: the rate (rate_text) is work over duration_s - setup_s, the probe's own speed.
  double setup_s = 0;
  uint64_t bytes = 0;  // bytes read plus written by the device
  // Bytes copied between host and device memory during the probe (both directions): a probe that
  // generates and verifies on the device moves O(n) here, not its whole buffers.
  uint64_t host_device_bytes = 0;
  double flops = 0;
  uint64_t seed = 0;
  nlohmann::json params = nlohmann::json::object();
  std::string reason;  // skipped / device_error: why
  // Deterministic probes: the 128-bit digest of the output, compared across the devices of one
  // equivalence class (consensus), and the host's digest of the expected output where the probe has
  // an IEEE golden (the ALU chains): the tie-break when the devices split evenly.
  std::optional<Digest128> digest;
  std::optional<Digest128> golden_digest;

  // pass or fail from the report; keeps skipped / device_error.
  void settle() {
    if (outcome == Outcome::kPass || outcome == Outcome::kFail) {
      outcome = report.mismatches > 0 ? Outcome::kFail : Outcome::kPass;
    }
  }
};

nlohmann::json to_json(const ProbeResult& r);

// 32 hex digits, hi lane first; parse_digest throws std::invalid_argument on anything else.
std::string digest_hex(const Digest128& d);
Digest128 parse_digest(const std::string& hex);

}  // namespace sdc
