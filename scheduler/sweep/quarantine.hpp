// The quarantine policy. A failing probe is re-run at once with a new seed: failing again makes the
// fault persistent, passing makes it transient. A device is quarantined on a persistent fault, or on
// `transient_limit` transient faults (device errors count as transient) within `window_s`. A
// quarantined device stays quarantined until an operator releases it, which needs `clean_sweeps`
// complete sweep passes without a fault since the quarantine (or --force).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "scheduler/sweep/history.hpp"

namespace sdc {

struct QuarantinePolicy {
  int transient_limit = 3;
  double window_s = 7 * 86400.0;
  int clean_sweeps = 3;

  nlohmann::json to_json() const;
  static QuarantinePolicy from_json(const nlohmann::json& j);
  // The policy the last sweep recorded in the history (status and release apply the same one).
  static QuarantinePolicy stored(const History& history);
};

// persistent, transient or device_error for a first attempt that did not pass; "" otherwise.
// `retry` is its re-run with a new seed, when there was one.
std::string classify_fault(const ProbeResult& first, const ProbeResult* retry);

enum class Health { kHealthy, kSuspect, kQuarantined };
const char* health_name(Health h);

struct DeviceStatus {
  DeviceRecord device;
  Health health = Health::kHealthy;
  std::string why;
  int clean_sweeps = 0;  // since the quarantine, while quarantined
};

// After a sweep pass: quarantines the devices of run `run_id` that the policy says must be. Returns
// their statuses.
std::vector<DeviceStatus> apply_quarantine_policy(History& history, const QuarantinePolicy& policy, int64_t run_id,
                                                  double now);

// Every device in the history, with its health and why.
std::vector<DeviceStatus> device_statuses(const History& history, const QuarantinePolicy& policy, double now);

// Ends a device's quarantine. Throws InputError when the device is unknown or not quarantined, or
// when it has had fewer clean sweeps than the policy asks and `force` is not set.
void release_device(History& history, const QuarantinePolicy& policy, const std::string& uuid, bool force,
                    const std::string& by, double now);

}  // namespace sdc
