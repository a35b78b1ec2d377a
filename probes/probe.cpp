#include "probes/probe.hpp"

#include <cstdio>
#include <stdexcept>

#include "host/error.hpp"
#include "host/injection.hpp"

namespace sdc {

Level parse_level(const std::string& name) {
  if (name == "quick") return Level::kQuick;
  if (name == "standard") return Level::kStandard;
  if (name == "long") return Level::kLong;
  throw InputError("unknown level '" + name + "' (quick, standard, long)");
}

const char* level_name(Level level) {
  switch (level) {
    case Level::kQuick: return "quick";
    case Level::kStandard: return "standard";
    case Level::kLong: return "long";
  }
  return "quick";
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "pass";
    case Outcome::kFail: return "fail";
    case Outcome::kSkipped: return "skipped";
    case Outcome::kDeviceError: return "device_error";
  }
  return "skipped";
}

nlohmann::json to_json(const ProbeResult& r) {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& m : r.report.records) {
    nlohmann::json rec = {{"index", m.index},         {"expected", m.expected},    {"observed", m.observed},
                          {"syndrome", m.syndrome()}, {"bits", m.bit_positions()}, {"width_bits", m.width_bits}};
    if (is_memory_probe(r.probe)) {
      rec["byte_offset"] = m.index * 8;
    } else {
      if (m.unit >= 0) rec["unit"] = m.unit;
      if (m.lane >= 0) rec["lane"] = m.lane;
      if (m.preempted) rec["preempted"] = true;
    }
    records.push_back(std::move(rec));
  }
  nlohmann::json j = {{"probe", r.probe},
                      {"device_index", r.device_index},
                      {"device_uuid", r.device_uuid},
                      {"outcome", outcome_name(r.outcome)},
                      {"checked", r.report.checked},
                      {"mismatches", r.report.mismatches},
                      {"records", std::move(records)},
                      {"duration_s", r.duration_s},
                      {"setup_s", r.setup_s},
                      {"bytes", r.bytes},
                      {"host_device_bytes", r.host_device_bytes},
                      {"flops", r.flops},
                      {"seed", r.seed},
                      {"params", r.params}};
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (r.digest) j["digest"] = digest_hex(*r.digest);
  if (r.golden_digest) j["golden_digest"] = digest_hex(*r.golden_digest);
  return j;
}

std::string digest_hex(const Digest128& d) {
  char text[40];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(d.hi),
                static_cast<unsigned long long>(d.lo));
  return text;
}

Digest128 parse_digest(const std::string& hex) {
  if (hex.size() != 32 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw std::invalid_argument("a digest is 32 lowercase hex digits, not '" + hex + "'");
  }
  Digest128 d;
  d.hi = std::stoull(hex.substr(0, 16), nullptr, 16);
  d.lo = std::stoull(hex.substr(16), nullptr, 16);
  return d;
}

void ProbeRegistry::add(std::unique_ptr<Probe> probe) {
  if (find(probe->id()) != nullptr) throw std::logic_error("duplicate probe id " + probe->id());
  probes_.push_back(std::move(probe));
}

const Probe* ProbeRegistry::find(const std::string& id) const {
  for (const auto& p : probes_) {
    if (p->id() == id) return p.get();
  }
  return nullptr;
}

std::vector<const Probe*> ProbeRegistry::select(const std::vector<std::string>& globs) const {
  std::vector<const Probe*> chosen;
  for (const auto& glob : globs) {
    bool matched = false;
    for (const auto& p : probes_) {
      if (!glob_match(glob, p->id())) continue;
      matched = true;
      bool seen = false;
      for (const Probe* c : chosen) seen = seen || c == p.get();
      if (!seen) chosen.push_back(p.get());
    }
    if (!matched) throw InputError("no probe matches '" + glob + "' (see `sdcprobe list`)");
  }
  return chosen;
}

}  // namespace sdc
