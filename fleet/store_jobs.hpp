// The fleet store's jobs table (docs/fleet.md#jobs): the cluster ledger's per-job summaries, written
// by `sdcprobe goodput --store` (the Slurm epilog) and `fleet import --summaries`, and read back by
// `fleet goodput --store`, so that a year of where the cluster's time went is one command.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sdc {

// Publishes the summary `text` (`sdcprobe goodput --json --job-id N`; `name` is how errors call it)
// as its job's row, stored at `at` (Unix seconds). Throws InputError naming `name` when it is not a
// summary, and naming the file when the store cannot be written.
void publish_job_summary(const std::string& dir, const std::string& name, const std::string& text, double at);

// Every job's summary in the store, the latest stored of each (the engine reads the jobs table: its
// landing files and compacted Parquet), as (where, text). Throws InputError when the engine fails.
std::vector<std::pair<std::string, std::string>> store_job_summaries(const std::string& dir);

}  // namespace sdc
