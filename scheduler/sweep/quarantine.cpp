#include "scheduler/sweep/quarantine.hpp"

#include <algorithm>
#include <cmath>

#include "host/error.hpp"
#include "host/time.hpp"

namespace sdc {

nlohmann::json QuarantinePolicy::to_json() const {
  return {{"transient_limit", transient_limit}, {"window_s", window_s}, {"clean_sweeps", clean_sweeps}};
}

QuarantinePolicy QuarantinePolicy::from_json(const nlohmann::json& j) {
  QuarantinePolicy p;
  p.transient_limit = j.value("transient_limit", p.transient_limit);
  p.window_s = j.value("window_s", p.window_s);
  p.clean_sweeps = j.value("clean_sweeps", p.clean_sweeps);
  return p;
}

QuarantinePolicy QuarantinePolicy::stored(const History& history) {
  const std::string text = history.state("policy");
  return text.empty() ? QuarantinePolicy{} : from_json(nlohmann::json::parse(text));
}

std::string classify_fault(const ProbeResult& first, const ProbeResult* retry) {
  if (first.outcome == Outcome::kDeviceError) return "device_error";
  if (first.outcome != Outcome::kFail) return "";
  // Without a re-run there is no evidence that it recurs; a re-run that could not finish is no
  // evidence that it went away.
  if (retry == nullptr || retry->outcome != Outcome::kPass) return "persistent";
  return "transient";
}

const char* health_name(Health h) {
  switch (h) {
    case Health::kHealthy: return "healthy";
    case Health::kSuspect: return "suspect";
    case Health::kQuarantined: return "quarantined";
  }
  return "?";
}

namespace {

// Transient faults count from the window's start, or from the last release when that is later: a
// released device starts with a clean slate.
double window_start(const History& history, const QuarantinePolicy& policy, const std::string& uuid, double now) {
  return std::max(now - policy.window_s, history.last_release_at(uuid));
}

DeviceStatus status_of(const History& history, const QuarantinePolicy& policy, const DeviceRecord& device, double now) {
  DeviceStatus st;
  st.device = device;
  if (const auto q = history.active_quarantine(device.uuid)) {
    st.health = Health::kQuarantined;
    st.clean_sweeps = history.clean_sweeps_since(device.uuid, q->since);
    st.why = q->reason + " (since " + format_utc(q->since) + "); " + std::to_string(st.clean_sweeps) + "/" +
             std::to_string(policy.clean_sweeps) + " clean sweeps since";
    if (st.clean_sweeps >= policy.clean_sweeps)
      st.why += "; an operator may release it: sdcprobe release " + device.uuid;
    return st;
  }
  const auto faults = history.transient_faults(device.uuid, window_start(history, policy, device.uuid, now));
  if (!faults.empty()) {
    st.health = Health::kSuspect;
    const ResultRecord& last = faults.back();
    st.why = std::to_string(faults.size()) + " transient fault" + (faults.size() == 1 ? "" : "s") + " in the last " +
             format_duration_s(policy.window_s) + " (quarantine at " + std::to_string(policy.transient_limit) +
             "); last: " + last.probe + " " + last.fault + " at " + format_utc(last.recorded_at) + " (run " +
             std::to_string(last.run_id) + ")";
    return st;
  }
  const double last = history.last_result_at(device.uuid);
  st.why = last > 0 ? "no fault in the last " + format_duration_s(policy.window_s) + "; last tested " + format_utc(last)
                    : "never tested";
  return st;
}

}  // namespace

std::vector<DeviceStatus> apply_quarantine_policy(History& history, const QuarantinePolicy& policy, int64_t run_id,
                                                  double now) {
  const auto results = history.results("", 0, run_id);
  std::vector<DeviceStatus> statuses;
  for (const auto& device : history.devices()) {
    bool in_run = false;
    std::string persistent;
    for (const auto& r : results) {
      if (r.device_uuid != device.uuid) continue;
      in_run = true;
      if (r.attempt == 0 && r.fault == "persistent" && persistent.empty()) {
        persistent = "persistent fault: " + r.probe + " failed twice (" + std::to_string(r.mismatches) +
                     " mismatches, syndrome " + r.syndrome + ") in run " + std::to_string(run_id);
      }
    }
    if (!in_run) continue;
    if (!history.active_quarantine(device.uuid)) {
      if (!persistent.empty()) {
        history.quarantine(device.uuid, persistent, now);
      } else {
        const auto faults = history.transient_faults(device.uuid, window_start(history, policy, device.uuid, now));
        if (static_cast<int>(faults.size()) >= policy.transient_limit) {
          std::string probes;
          for (const auto& f : faults) probes += (probes.empty() ? "" : ", ") + f.probe + " (" + f.fault + ")";
          history.quarantine(device.uuid,
                             std::to_string(faults.size()) + " transient faults within " +
                                 format_duration_s(policy.window_s) + ": " + probes,
                             now);
        }
      }
    }
    statuses.push_back(status_of(history, policy, device, now));
  }
  return statuses;
}

std::vector<DeviceStatus> device_statuses(const History& history, const QuarantinePolicy& policy, double now) {
  std::vector<DeviceStatus> out;
  for (const auto& device : history.devices()) out.push_back(status_of(history, policy, device, now));
  return out;
}

void release_device(History& history, const QuarantinePolicy& policy, const std::string& uuid, bool force,
                    const std::string& by, double now) {
  const auto devices = history.devices();
  if (std::none_of(devices.begin(), devices.end(), [&](const DeviceRecord& d) { return d.uuid == uuid; })) {
    throw InputError("release: UUID '" + uuid + "' is not in the history (see `sdcprobe status`)");
  }
  const auto q = history.active_quarantine(uuid);
  if (!q) throw InputError("release: " + uuid + " is not quarantined");
  const int clean = history.clean_sweeps_since(uuid, q->since);
  if (clean < policy.clean_sweeps && !force) {
    throw InputError("release: " + uuid + " has had " + std::to_string(clean) + " clean sweeps since its quarantine; " +
                     "the policy asks for " + std::to_string(policy.clean_sweeps) + " (--force releases it anyway)");
  }
  history.release(uuid, by, now);
}

}  // namespace sdc
