// Slurm's accounting for one job (`sacct -j JOBID --duplicates --json`): the eligible, start and end
// time of each of its records, a requeue making a new record (docs/goodput.md, "Slurm accounting").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sdc::goodput {

// Unix seconds, as Slurm keeps them; 0 when unset (a record that never started or has not ended).
struct SlurmRecord {
  int64_t eligible_s = 0;
  int64_t start_s = 0;
  int64_t end_s = 0;
  size_t job_index = 0;  // its place in sacct's "jobs" array, for errors
};

// Calls `record` with each element of the "jobs" array of sacct's JSON at `path`, in order, each
// parsed alone (through `keep`, nlohmann's parser callback, when given: it may drop a record's keys
// while parsing), so memory holds one record however long the file. The rest of the file is checked
// to be JSON and dropped. Throws InputError naming the file: not JSON (naming `jobs[i]` when the
// record is the bad part), no "jobs" array, a record longer than 64 MiB.
using SacctRecordSink = std::function<void(size_t index, const nlohmann::json& record)>;
void for_each_sacct_record(const std::string& path, const SacctRecordSink& record,
                           const nlohmann::json::parser_callback_t& keep = nullptr);

// The time `name` of a record's "time" object, in Unix seconds; 0 when unset. Slurm 22.05 writes an
// integer, 0 or null when unset (null: the start of a job cancelled while pending); 24.11 an integer,
// 0 or 4294967294 (its NO_VAL) when unset; 23.02 and later's schema {"set": true|false, "infinite":
// false, "number": N}. Throws InputError naming
// `where`.time.`name`: missing, not one of these forms, out of range.
int64_t sacct_seconds(const nlohmann::json& time, const char* name, const std::string& where);

// Parses sacct's JSON (the "jobs" array, times as sacct_seconds reads them). Every record must belong to one job.
// Returns the records that started, ordered by start; throws InputError naming the file and field.
std::vector<SlurmRecord> read_sacct_json(const std::string& path);

}  // namespace sdc::goodput
