#include "goodput/cluster/cluster_summary.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "host/error.hpp"
#include "host/input_file.hpp"

namespace sdc::goodput::cluster {
namespace {

int64_t count(const nlohmann::json& parent, const char* name, const std::string& where) {
  const std::string field = where.empty() ? name : where + "." + name;
  if (!parent.is_object() || !parent.contains(name)) throw InputError(field + " is missing");
  const nlohmann::json& v = parent.at(name);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX) || v.get<int64_t>() < 0) {
    throw InputError(field + " must be an integer from 0 to 2^63 - 1");
  }
  return v.get<int64_t>();
}

goodput::Activity activity(const nlohmann::json& measured, const char* name) {
  const std::string where = std::string("measured.") + name;
  if (!measured.contains(name)) throw InputError(where + " is missing");
  return {count(measured.at(name), "count", where), count(measured.at(name), "ns", where)};
}

std::string text(const nlohmann::json& parent, const char* name, const std::string& where) {
  if (!parent.contains(name)) return "";  // a summary older than the field
  const nlohmann::json& v = parent.at(name);
  if (!v.is_string()) throw InputError(where + "." + name + " must be a string");
  return v.get<std::string>();
}

// The "hangs" of a summary (docs/goodput.md, "Hangs"): those that hung the job, each with its cost.
std::vector<JobHang> hangs(const nlohmann::json& j) {
  std::vector<JobHang> out;
  if (!j.contains("hangs")) return out;
  const nlohmann::json& a = j.at("hangs");
  if (!a.is_array()) throw InputError("hangs must be an array");
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string where = "hangs[" + std::to_string(i) + "]";
    const nlohmann::json& h = a[i];
    if (!h.is_object()) throw InputError(where + " must be an object");
    if (text(h, "verdict", where) == "no_hang") continue;
    JobHang hang;
    // A summary written before the hang carried its cost has none to give.
    if (h.contains("detection_teardown_ns")) hang.detection_teardown_ns = count(h, "detection_teardown_ns", where);
    if (!h.contains("culprits") || !h.at("culprits").is_array()) throw InputError(where + ".culprits must be an array");
    for (size_t k = 0; k < h.at("culprits").size(); ++k) {
      const nlohmann::json& c = h.at("culprits")[k];
      const std::string at = where + ".culprits[" + std::to_string(k) + "]";
      if (!c.is_object()) throw InputError(at + " must be an object");
      hang.culprits.push_back({text(c, "host", at), text(c, "device", at), text(c, "pci_bus_id", at)});
    }
    out.push_back(std::move(hang));
  }
  return out;
}

}  // namespace

std::vector<JobHang> job_hangs(const std::vector<goodput::RunHang>& run) {
  std::vector<JobHang> out;
  for (const goodput::RunHang& h : run) {
    if (h.report.verdict == goodput::HangReport::Verdict::kNoHang) continue;
    out.push_back({h.loss.detection_ns + h.loss.teardown_ns, h.culprit_places});
  }
  return out;
}

std::vector<std::string> summary_files(const std::vector<std::string>& arguments) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& a : arguments) {
    if (!fs::is_directory(a)) {
      files.push_back(a);
      continue;
    }
    std::vector<std::string> in_dir;
    for (const auto& e : fs::directory_iterator(a)) {
      if (e.is_regular_file() && e.path().extension() == ".json") in_dir.push_back(e.path().string());
    }
    std::sort(in_dir.begin(), in_dir.end());
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  return files;
}

JobSummary parse_job_summary(const std::string& path, const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw InputError(path + ": not a JSON object (expected `sdcprobe goodput --json --job-id N` output)");
  }
  try {
    JobSummary s;
    s.job_id = count(j, "job_id", "");
    goodput::Breakdown& b = s.breakdown;
    b.wall_ns = count(j, "wall_ns", "");
    b.productive_ns = count(j, "productive_ns", "");
    if (!j.contains("categories") || !j.at("categories").is_object()) throw InputError("categories is missing");
    __int128 sum = b.productive_ns;
    for (goodput::Category c : goodput::kCategories) {
      const std::string key(goodput::category_key(c));
      const std::string where = "categories." + key;
      if (!j.at("categories").contains(key)) throw InputError(where + " is missing");
      const nlohmann::json& cat = j.at("categories").at(key);
      b[c].ns = count(cat, "ns", where);
      b[c].sdc_ns = count(cat, "sdc_ns", where);
      if (b[c].sdc_ns > b[c].ns) throw InputError(where + ".sdc_ns exceeds its ns");
      sum += b[c].ns;
    }
    if (sum != b.wall_ns) throw InputError("productive_ns and the categories do not sum to wall_ns");
    if (j.contains("measured")) {
      const nlohmann::json& m = j.at("measured");
      if (!m.is_object()) throw InputError("measured must be an object");
      goodput::Tally t;
      t.saves = activity(m, "saves");
      t.data_waits = activity(m, "data_waits");
      t.evals = activity(m, "evals");
      t.probes = activity(m, "probes");
      t.save_interval_ns = count(m, "save_interval_ns", "measured");
      t.incidents = count(m, "incidents", "measured");
      s.measured = t;
    }
    s.hangs = hangs(j);
    return s;
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
}

JobSummary read_job_summary(const std::string& path) {
  return parse_job_summary(path, read_input(path, "job summary"));
}

}  // namespace sdc::goodput::cluster
