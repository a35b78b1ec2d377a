#include "goodput/cluster/cluster_sacct.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "goodput/sacct.hpp"
#include "host/error.hpp"

namespace sdc::goodput::cluster {
namespace {

// An integer, or Slurm 23's {"set": true, "infinite": false, "number": N}; 0 when unset.
int64_t slurm_number(const nlohmann::json& value, const std::string& field, int64_t max) {
  const nlohmann::json* v = &value;
  if (v->is_object()) {
    // A flag left out is false; one that is not a boolean is refused by name.
    const auto flag = [&](const char* key) {
      if (!v->contains(key)) return false;
      if (!v->at(key).is_boolean()) throw InputError(field + "." + key + " must be true or false");
      return v->at(key).get<bool>();
    };
    if (!flag("set") || flag("infinite")) return 0;
    if (!v->contains("number")) throw InputError(field + ".number is missing");
    v = &v->at("number");
  }
  if (!v->is_number_integer()) throw InputError(field + " must be an integer");
  if (v->is_number_unsigned() ? v->get<uint64_t>() > static_cast<uint64_t>(max) : v->get<int64_t>() < 0) {
    throw InputError(field + " " + v->dump() + " is out of range");
  }
  const int64_t n = v->get<int64_t>();
  if (n < 0 || n > max) throw InputError(field + " " + v->dump() + " is out of range");
  return n;
}

std::string text(const nlohmann::json& job, const char* name, const std::string& where) {
  if (!job.contains(name)) return "";
  const nlohmann::json& v = job.at(name);
  if (v.is_null()) return "";
  if (!v.is_string()) throw InputError(where + "." + name + " must be a string");
  return v.get<std::string>();
}

// Slurm 22.05: {"current": "FAILED"}; 23.02 and later: {"current": ["FAILED"]}, the base state then
// its flags (24.11 writes a requeued record as ["PENDING", "REQUEUED"]). A flag that 22.05 names in
// place of the base state (its job_state_string) is the state, so both read as "REQUEUED".
std::string state(const nlohmann::json& job, const std::string& where) {
  const std::string field = where + ".state.current";
  if (!job.contains("state") || !job.at("state").is_object() || !job.at("state").contains("current")) {
    throw InputError(field + " is missing");
  }
  const nlohmann::json& s = job.at("state").at("current");
  if (s.is_string()) return s.get<std::string>();
  if (!s.is_array() || s.empty() || !std::all_of(s.begin(), s.end(), [](const auto& v) { return v.is_string(); })) {
    throw InputError(field + " must be a string or an array of strings");
  }
  static const char* kNamedFirst[] = {"COMPLETING",  "CONFIGURING",   "RESIZING",     "REQUEUED",
                                      "REQUEUE_FED", "REQUEUE_HOLD",  "SPECIAL_EXIT", "STOPPED",
                                      "REVOKED",     "RESV_DEL_HOLD", "SIGNALING",    "STAGE_OUT"};
  for (const char* flag : kNamedFirst) {
    if (std::find(s.begin() + 1, s.end(), flag) != s.end()) return flag;
  }
  return s[0].get<std::string>();
}

// The GPUs of a tres list: the untyped gres/gpu entry, else the sum of the typed ones (gpu:a100).
int64_t gpus_of(const nlohmann::json& list, const std::string& field) {
  if (!list.is_array()) throw InputError(field + " must be an array");
  int64_t untyped = -1, typed = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& t = list[i];
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (!t.is_object()) throw InputError(f + " must be an object");
    if (!t.contains("type") || !t.at("type").is_string() || t.at("type") != "gres") continue;
    const std::string name = t.value("name", nlohmann::json("")).is_string() ? t.value("name", "") : "";
    if (name != "gpu" && name.rfind("gpu:", 0) != 0) continue;
    if (!t.contains("count")) throw InputError(f + ".count is missing");
    const int64_t count = slurm_number(t.at("count"), f + ".count", 1'000'000'000);
    if (name == "gpu") {
      untyped = count;
    } else {
      typed += count;
    }
  }
  return untyped >= 0 ? untyped : typed;
}

int64_t gpus(const nlohmann::json& job, const std::string& where) {
  if (!job.contains("tres")) return 0;
  const nlohmann::json& tres = job.at("tres");
  if (!tres.is_object()) throw InputError(where + ".tres must be an object");
  int64_t n = tres.contains("allocated") ? gpus_of(tres.at("allocated"), where + ".tres.allocated") : 0;
  if (n == 0 && tres.contains("requested")) n = gpus_of(tres.at("requested"), where + ".tres.requested");
  return n;
}

}  // namespace

bool ended_in_failure(const std::string& state) {
  return state == "FAILED" || state == "NODE_FAIL" || state == "TIMEOUT" || state == "PREEMPTED" ||
         state == "REQUEUED" || state == "OUT_OF_MEMORY" || state == "BOOT_FAIL" || state == "DEADLINE";
}

std::vector<ClusterJob> read_cluster_sacct(const std::string& path) {
  // Keeps only what the ledger reads: a real record also carries its steps, limits, TRES usage and
  // more, ten times the size; the rest is dropped while parsing.
  const nlohmann::json::parser_callback_t keep = [](int depth, nlohmann::json::parse_event_t event,
                                                    nlohmann::json& parsed) {
    if (event != nlohmann::json::parse_event_t::key || depth != 1) return true;
    static const char* kKept[] = {"job_id", "user", "account", "partition", "state", "time", "tres"};
    return std::any_of(std::begin(kKept), std::end(kKept), [&](const char* k) { return parsed == k; });
  };
  std::vector<ClusterJob> jobs;
  std::unordered_map<int64_t, size_t> by_id;
  goodput::for_each_sacct_record(
      path,
      [&](size_t i, const nlohmann::json& r) {
        const std::string where = path + ": jobs[" + std::to_string(i) + "]";
        if (!r.is_object() || !r.contains("job_id")) throw InputError(where + ".job_id is missing");
        const int64_t id = slurm_number(r.at("job_id"), where + ".job_id", INT64_MAX);
        if (!r.contains("time") || !r.at("time").is_object()) throw InputError(where + ".time is missing");
        const nlohmann::json& time = r.at("time");
        ClusterRecord record{goodput::sacct_seconds(time, "eligible", where),
                             goodput::sacct_seconds(time, "start", where),
                             goodput::sacct_seconds(time, "end", where),
                             gpus(r, where),
                             state(r, where),
                             i};
        if (record.start_s != 0 && record.end_s != 0 && record.end_s < record.start_s) {
          throw InputError(where + ": end before start");
        }
        const auto [it, fresh] = by_id.emplace(id, jobs.size());
        if (fresh)
          jobs.push_back({id, text(r, "user", where), text(r, "account", where), text(r, "partition", where), {}});
        jobs[it->second].records.push_back(std::move(record));
      },
      keep);
  for (ClusterJob& job : jobs) {
    auto& rs = job.records;
    // Started records by start; a record not started yet (at most one: the job's current state) last.
    std::stable_sort(rs.begin(), rs.end(), [](const ClusterRecord& a, const ClusterRecord& b) {
      if ((a.start_s == 0) != (b.start_s == 0)) return b.start_s == 0;
      return a.start_s < b.start_s;
    });
    for (size_t k = 0; k + 1 < rs.size(); ++k) {
      const std::string where = path + ": jobs[" + std::to_string(rs[k + 1].index) + "]";
      if (rs[k].start_s == 0)
        throw InputError(where + ": job " + std::to_string(job.job_id) + " has two records that never started");
      if (rs[k].end_s == 0 || (rs[k + 1].start_s != 0 && rs[k].end_s > rs[k + 1].start_s)) {
        throw InputError(where + ": job " + std::to_string(job.job_id) +
                         "'s records overlap (an allocation starts before the previous one ended)");
      }
    }
  }
  return jobs;
}

}  // namespace sdc::goodput::cluster
