// Slurm's accounting for a whole cluster (`sacct --allocations --duplicates --json`, all users): per
// job its owner, partition, allocated GPUs and every record, a requeue making a new one
// (docs/goodput.md, "Cluster").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sdc::goodput::cluster {

struct ClusterRecord {
  int64_t eligible_s = 0;  // Unix seconds; 0 when unset
  int64_t start_s = 0;     // 0: never started (pending, or cancelled before it ran)
  int64_t end_s = 0;       // 0: still running or waiting; set without a start: cancelled while pending
  int64_t gpus = 0;        // tres gres/gpu: allocated, else requested (a pending record)
  std::string state;       // COMPLETED, FAILED, NODE_FAIL, TIMEOUT, PREEMPTED, REQUEUED, RUNNING, ...
  size_t index = 0;        // the record's place in the file's "jobs" array, for messages
};

struct ClusterJob {
  int64_t job_id = 0;
  std::string user, account, partition;  // of its first record
  std::vector<ClusterRecord> records;    // started ones by start, then the one not started yet
};

// A run that ended in one of these states failed; whether any of its time was productive is not
// known without the job's log.
bool ended_in_failure(const std::string& state);

// Jobs in order of their first appearance. Throws InputError naming the file and `jobs[i]`: a
// missing or mistyped field, times out of order, records of one job that overlap.
std::vector<ClusterJob> read_cluster_sacct(const std::string& path);

}  // namespace sdc::goodput::cluster
