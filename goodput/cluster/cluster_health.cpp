#include "goodput/cluster/cluster_health.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "host/error.hpp"
#include "host/input_file.hpp"

namespace sdc::goodput::cluster {
namespace {

const nlohmann::json& member(const nlohmann::json& parent, const std::string& name, const std::string& where) {
  if (!parent.contains(name)) throw InputError(where + name + " is missing");
  return parent.at(name);
}

std::string string_at(const nlohmann::json& parent, const std::string& name, const std::string& where) {
  const nlohmann::json& v = member(parent, name, where);
  if (!v.is_string()) throw InputError(where + name + " must be a string");
  return v.get<std::string>();
}

void read_report(const std::string& path, GpuFaults& faults) {
  const nlohmann::json j = nlohmann::json::parse(read_input(path, "health report"), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw InputError(path + ": not a JSON object (expected `sdcprobe health --json` output)");
  }
  try {
    const nlohmann::json& gpus = member(j, "gpus", "");
    if (!gpus.is_array()) throw InputError("gpus must be an array");
    for (size_t i = 0; i < gpus.size(); ++i) {
      const std::string at = "gpus[" + std::to_string(i) + "].";
      if (!gpus[i].is_object()) throw InputError(at.substr(0, at.size() - 1) + " must be an object");
      const std::string uuid = string_at(gpus[i], "uuid", at);
      const nlohmann::json& conditions = member(gpus[i], "conditions", at);
      if (!conditions.is_object()) throw InputError(at + "conditions must be an object");
      for (const auto& [field, condition] : conditions.items()) {
        const std::string where = at + "conditions." + field;
        if (!condition.is_object()) throw InputError(where + " must be an object");
        if (string_at(condition, "state", where + ".") != "fault") continue;
        std::vector<std::string>& f = faults[uuid];
        if (std::find(f.begin(), f.end(), field) == f.end())
          f.insert(std::upper_bound(f.begin(), f.end(), field), field);
      }
    }
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
}

}  // namespace

GpuFaults read_gpu_faults(const std::vector<std::string>& paths) {
  GpuFaults faults;
  for (const std::string& p : paths) read_report(p, faults);
  return faults;
}

}  // namespace sdc::goodput::cluster
