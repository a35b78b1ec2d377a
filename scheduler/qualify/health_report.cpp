#include "scheduler/qualify/health_report.hpp"

#include <cctype>

#include "host/nvml/nvml_processes.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {
namespace {

std::string gpu_name(const GpuHealth& g) {
  if (g.uuid.empty()) return "NVML GPU " + std::to_string(g.index);  // no handle, so no UUID
  std::string name = g.uuid + " (NVML " + std::to_string(g.index);
  if (!g.pci_bus_id.empty()) name += ", " + g.pci_bus_id;
  if (!g.name.empty()) name += ", " + g.name;
  return name + ")";
}

std::string upper(std::string s) {
  for (char& c : s) c = c == '_' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

HealthReport level_health(const std::vector<DeviceIdentity>& devices, const std::function<void()>& probes) {
  std::vector<std::string> uuids;
  for (const auto& d : devices) {
    if (d.backend == "cuda" && d.open_error.empty()) uuids.push_back(d.uuid);
  }
  if (!uuids.empty()) return read_gpu_health(nvml_library_name(), uuids, probes);
  probes();
  HealthReport none;
  none.applicable = false;
  return none;
}

nlohmann::json health_json(const HealthReport& report) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuHealth& g : report.gpus) {
    nlohmann::json conditions = nlohmann::json::object();
    for (const HealthCondition& c : g.conditions) {
      nlohmann::json readings = nlohmann::json::object();
      for (const auto& [name, value] : c.readings) readings[name] = value;
      conditions[c.field] = {{"state", condition_state_name(c.state)}, {"detail", c.detail}, {"readings", readings}};
    }
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"pci_bus_id", g.pci_bus_id},
                    {"name", g.name},
                    {"verdict", condition_state_name(g.verdict())},
                    {"conditions", std::move(conditions)}});
  }
  nlohmann::json j = {{"verdict", health_verdict_name(report)}, {"watched", report.watched}, {"gpus", std::move(gpus)}};
  if (!report.error.empty()) j["error"] = report.error;
  return j;
}

std::string health_text(const HealthReport& report) {
  std::string out;
  for (const GpuHealth& g : report.gpus) {
    out += gpu_name(g) + ": " + upper(condition_state_name(g.verdict())) + "\n";
    for (const HealthCondition& c : g.conditions) {
      out += "  " + c.field + ": " + condition_state_name(c.state) + (c.detail.empty() ? "" : ": " + c.detail) + "\n";
    }
  }
  if (!report.error.empty()) out += "could not read the driver: " + report.error + "\n";
  if (!report.applicable) return out + "health: not applicable: no NVIDIA GPU on this node\n";
  size_t faulty = 0;
  for (const GpuHealth& g : report.gpus) faulty += g.verdict() == ConditionState::kFault;
  const int code = health_exit_code(report);
  const size_t permitted = permitted_gpus(report), denied = report.gpus.size() - permitted;
  const std::string of = " of " + std::to_string(permitted) + " GPU(s)" +
                         (denied == 0 ? "" : ", " + std::to_string(denied) + " more not this process's") + "\n";
  if (code == 0) return out + "health: HEALTHY" + of;
  if (code == 1) return out + "health: FAULT on " + std::to_string(faulty) + of;
  return out + "health: COULD NOT TEST" + of;
}

std::string health_npd_verdict(const HealthReport& report) {
  if (!report.applicable) return "OK: no NVIDIA GPU on this node";
  const int code = health_exit_code(report);
  const size_t permitted = permitted_gpus(report);
  if (code == 0) return "OK: " + std::to_string(permitted) + " GPUs healthy";
  if (code == 2 && !report.error.empty()) return npd_could_not_test(report.error);
  if (code == 2 && report.gpus.empty()) return npd_could_not_test("NVML lists no GPU");
  if (code == 2 && permitted == 0) {
    return npd_could_not_test("no GPU this process may open (" + std::to_string(report.gpus.size()) +
                              " denied by NVML)");
  }
  std::string first;
  size_t count = 0;
  const ConditionState wanted = code == 1 ? ConditionState::kFault : ConditionState::kCouldNotTest;
  for (const GpuHealth& g : report.gpus) {
    for (const HealthCondition& c : g.conditions) {
      if (c.state != wanted) continue;
      if (count++ == 0) first = code == 1 ? g.uuid + " health " + c.field : g.uuid + " " + c.field + ": " + c.detail;
    }
    // Could not test with no condition that could not: nothing on it was judged.
    if (code == 2 && first.empty() && g.verdict() == ConditionState::kCouldNotTest) {
      first = g.uuid + ": no condition supported and tested";
    }
  }
  if (code == 2) return npd_could_not_test(first);
  std::string line = "SDC: " + first + (count > 1 ? " +" + std::to_string(count - 1) + " more" : "");
  if (line.size() > kNpdVerdictMax) line.resize(kNpdVerdictMax);
  return line;
}

std::string health_faults(const HealthReport& report) {
  std::string line;
  for (const GpuHealth& g : report.gpus) {
    std::string faults;
    for (const HealthCondition& c : g.conditions) {
      if (c.state == ConditionState::kFault) faults += (faults.empty() ? "" : ", ") + c.field + " (" + c.detail + ")";
    }
    if (!faults.empty()) line += (line.empty() ? "" : "; ") + g.uuid + " health: " + faults;
  }
  return line;
}

}  // namespace sdc
