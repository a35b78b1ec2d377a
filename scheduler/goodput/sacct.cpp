#include "scheduler/goodput/sacct.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "host/error.hpp"

namespace sdc::goodput {
namespace {

// Seconds since 1970 that fit the ledger's nanoseconds (kTimeRange) with the merge's 1 s of slack
// after an End: (end + 1) s in nanoseconds must not overflow.
constexpr int64_t kMaxSeconds = INT64_MAX / 1'000'000'000 - 1;

int64_t seconds_field(const nlohmann::json& time, const char* name, const std::string& where) {
  const std::string field = where + ".time." + name;
  if (!time.contains(name)) throw InputError(field + " is missing");
  const nlohmann::json* value = &time.at(name);
  if (value->is_object()) {  // {"set": true, "infinite": false, "number": N}
    if (!value->value("set", false) || value->value("infinite", false)) return 0;
    if (!value->contains("number")) throw InputError(field + ".number is missing");
    value = &value->at("number");
  }
  if (!value->is_number_integer()) throw InputError(field + " must be an integer (Unix seconds)");
  const int64_t s = value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(kMaxSeconds)
                        ? -1
                        : value->get<int64_t>();
  if (s < 0 || s > kMaxSeconds) {
    throw InputError(field + " " + value->dump() + " is out of range (0 to " + std::to_string(kMaxSeconds) +
                     " Unix seconds)");
  }
  return s;
}

}  // namespace

std::vector<SlurmRecord> read_sacct_json(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw InputError(path + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read " + path);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded()) throw InputError(path + ": not valid JSON (expected `sacct --json` output)");
  if (!doc.is_object() || !doc.contains("jobs") || !doc.at("jobs").is_array()) {
    throw InputError(path + ": no \"jobs\" array (expected `sacct --json` output)");
  }
  const nlohmann::json& jobs = doc.at("jobs");
  if (jobs.empty()) throw InputError(path + ": no job records");
  std::vector<SlurmRecord> records;
  std::optional<uint64_t> job_id;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string where = path + ": jobs[" + std::to_string(i) + "]";
    const nlohmann::json& job = jobs[i];
    // Slurm's job ids are positive 32-bit numbers; nlohmann keeps non-negative integers unsigned.
    if (!job.is_object() || !job.contains("job_id") || !job.at("job_id").is_number_unsigned()) {
      throw InputError(where + ".job_id is missing or not a non-negative integer");
    }
    const uint64_t id = job.at("job_id").get<uint64_t>();
    if (job_id && id != *job_id) {
      throw InputError(where + ": job " + std::to_string(id) + " after job " + std::to_string(*job_id) +
                       "; give the records of one job (sacct -j JOBID --duplicates --json)");
    }
    job_id = id;
    if (!job.contains("time") || !job.at("time").is_object()) throw InputError(where + ".time is missing");
    const nlohmann::json& time = job.at("time");
    SlurmRecord r{seconds_field(time, "eligible", where), seconds_field(time, "start", where),
                  seconds_field(time, "end", where), i};
    if (r.start_s == 0) continue;  // never ran: no allocation to place
    // Unset (as sacct can show a job still completing): no queue is known, not 55 years of it.
    if (r.eligible_s == 0) r.eligible_s = r.start_s;
    if (r.end_s != 0 && r.end_s < r.start_s) throw InputError(where + ": end before start");
    records.push_back(r);
  }
  std::sort(records.begin(), records.end(),
            [](const SlurmRecord& a, const SlurmRecord& b) { return a.start_s < b.start_s; });
  for (size_t i = 0; i + 1 < records.size(); ++i) {
    if (records[i].end_s == 0 || records[i].end_s > records[i + 1].start_s) {
      throw InputError(path + ": the job's records overlap (an allocation starts before the previous one ended)");
    }
  }
  return records;
}

}  // namespace sdc::goodput
