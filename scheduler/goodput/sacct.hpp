// Slurm's accounting for one job (`sacct -j JOBID --duplicates --json`): the eligible, start and end
// time of each of its records, a requeue making a new record (docs/goodput.md, "Slurm accounting").
#pragma once

#include <cstddef>
#include <cstdint>
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

// Parses sacct's JSON (the "jobs" array; times as integers, as Slurm 22.05 writes them, or as
// {"set": true, "number": N} objects, as later versions do). Every record must belong to one job.
// Returns the records that started, ordered by start; throws InputError naming the file and field.
std::vector<SlurmRecord> read_sacct_json(const std::string& path);

}  // namespace sdc::goodput
