// The worker protocol (worker_protocol.hpp).
#include "scheduler/qualify/worker_protocol.hpp"

#include <climits>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "host/error.hpp"

namespace sdc {
namespace {

Outcome outcome_from_name(const std::string& name) {
  for (Outcome o : {Outcome::kPass, Outcome::kFail, Outcome::kSkipped, Outcome::kDeviceError}) {
    if (name == outcome_name(o)) return o;
  }
  throw WorkerProtocolError("worker sent an unknown outcome '" + name + "'");
}

// The worker protocol's fields, checked for type and range: a worker whose memory is corrupt may
// send anything, and a float cast to an integer out of range is undefined behaviour.
const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  if (!j.is_object() || !j.contains(name)) throw WorkerProtocolError(std::string("no \"") + name + "\"");
  return j.at(name);
}

uint64_t unsigned_field(const nlohmann::json& j, const char* name, uint64_t hi = UINT64_MAX) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > hi) {
    throw WorkerProtocolError(std::string("\"") + name + "\" is not an integer in [0, " + std::to_string(hi) + "]");
  }
  return v.get<uint64_t>();
}

// An int in [lo, INT_MAX], or `absent` when the field is missing.
int int_field(const nlohmann::json& j, const char* name, int lo, std::optional<int> absent = std::nullopt) {
  if (absent && !j.contains(name)) return *absent;
  const nlohmann::json& v = field(j, name);
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > INT_MAX) {
    throw WorkerProtocolError(std::string("\"") + name + "\" is not an integer in [" + std::to_string(lo) + ", " +
                              std::to_string(INT_MAX) + "]");
  }
  return static_cast<int>(v.get<int64_t>());
}

double seconds_or_count(const nlohmann::json& j, const char* name, std::optional<double> absent = std::nullopt) {
  if (absent && !j.contains(name)) return *absent;
  const nlohmann::json& v = field(j, name);
  if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>())) {
    throw WorkerProtocolError(std::string("\"") + name + "\" is not a finite number >= 0");
  }
  return v.get<double>();
}

std::string string_field(const nlohmann::json& j, const char* name) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_string()) throw WorkerProtocolError(std::string("\"") + name + "\" is not a string");
  return v.get<std::string>();
}

Digest128 digest_field(const nlohmann::json& j, const char* name) {
  try {
    return parse_digest(string_field(j, name));
  } catch (const std::invalid_argument& e) {
    throw WorkerProtocolError(std::string("\"") + name + "\": " + e.what());
  }
}

}  // namespace

std::string worker_start_line(const std::string& probe_id, bool retry) {
  return nlohmann::json{{"start", probe_id}, {"retry", retry}}.dump() + "\n";
}

std::string worker_beat_line() { return "{\"beat\":true}\n"; }

std::string worker_result_line(const ProbeResult& result, bool retry) {
  return nlohmann::json{{"result", to_json(result)}, {"retry", retry}}.dump() + "\n";
}

std::string worker_input_error_line(const std::string& message) {
  return nlohmann::json{{"input_error", message}}.dump() + "\n";
}

ProbeResult result_from_json(const nlohmann::json& j) {
  ProbeResult r;
  r.probe = string_field(j, "probe");
  r.device_index = int_field(j, "device_index", 0);
  r.device_uuid = string_field(j, "device_uuid");
  r.outcome = outcome_from_name(string_field(j, "outcome"));
  r.report.checked = unsigned_field(j, "checked");
  r.report.mismatches = unsigned_field(j, "mismatches");
  const nlohmann::json& records = field(j, "records");
  if (!records.is_array()) throw WorkerProtocolError("\"records\" is not an array");
  for (const auto& rec : records) {
    MismatchRecord m;
    m.index = unsigned_field(rec, "index");
    m.expected = unsigned_field(rec, "expected");
    m.observed = unsigned_field(rec, "observed");
    m.width_bits = static_cast<unsigned>(unsigned_field(rec, "width_bits", 64));
    m.unit = int_field(rec, "unit", -1, -1);
    m.lane = int_field(rec, "lane", -1, -1);
    if (rec.contains("preempted")) {
      if (!rec.at("preempted").is_boolean()) throw WorkerProtocolError("\"preempted\" is not a boolean");
      m.preempted = rec.at("preempted").get<bool>();
    }
    r.report.records.push_back(m);
  }
  r.duration_s = seconds_or_count(j, "duration_s");
  r.setup_s = seconds_or_count(j, "setup_s", 0.0);
  r.bytes = unsigned_field(j, "bytes");
  r.host_device_bytes = j.contains("host_device_bytes") ? unsigned_field(j, "host_device_bytes") : 0;
  r.flops = seconds_or_count(j, "flops");
  r.seed = unsigned_field(j, "seed");
  r.params = field(j, "params");
  r.reason = j.contains("reason") ? string_field(j, "reason") : "";
  if (j.contains("digest")) r.digest = digest_field(j, "digest");
  if (j.contains("golden_digest")) r.golden_digest = digest_field(j, "golden_digest");
  return r;
}

WorkerLine parse_worker_line(const std::string& text) {
  const nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
  if (line.is_discarded()) throw WorkerProtocolError("a line that is not JSON");
  if (!line.is_object()) throw WorkerProtocolError("a line that is not a JSON object");
  WorkerLine w;
  if (line.contains("input_error") && line["input_error"].is_string()) {
    w.kind = WorkerLine::Kind::kInputError;
    w.text = line["input_error"].get<std::string>();
    return w;
  }
  w.retry = line.contains("retry") && line["retry"].is_boolean() && line["retry"].get<bool>();
  if (line.contains("beat")) {
    w.kind = WorkerLine::Kind::kBeat;
  } else if (line.contains("start")) {
    w.kind = WorkerLine::Kind::kStart;
    w.text = string_field(line, "start");
  } else {
    w.kind = WorkerLine::Kind::kResult;
    w.result = result_from_json(field(line, "result"));
  }
  return w;
}

std::vector<DeviceIdentity> devices_from_answer(const std::string& answer, const std::string& how_it_ended) {
  const nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string())
    throw NoDeviceError(j["error"].get<std::string>());
  if (!j.is_object() || !j.contains("devices") || !j["devices"].is_array())
    throw NoDeviceError("cannot list the devices: `devices` " + how_it_ended + " without a device list");
  std::vector<DeviceIdentity> devices;
  for (const auto& d : j["devices"]) {
    try {
      devices.push_back(identity_from_json(d));
    } catch (const nlohmann::json::exception& e) {
      throw WorkerProtocolError("device " + std::to_string(devices.size()) + " of the `devices` answer: " + e.what());
    }
  }
  if (devices.empty()) throw NoDeviceError("no device to test");
  return devices;
}

}  // namespace sdc
