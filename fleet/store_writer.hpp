// The fleet store (docs/fleet.md): a run's results as flat rows, one table per folder, partitioned
// by UTC day (TABLE/day=YYYY-MM-DD/), in the landing format every engine reads with an explicit
// schema: NDJSON, one object per line, every column present in a fixed order. Files are published
// whole: written to a hidden temporary name in their folder, synced and renamed (write_file_atomically),
// so a reader that skips names starting with '.' or '_' never sees half of one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/burn_conditions.hpp"
#include "scheduler/qualify/runner.hpp"
#include "scheduler/sweep/history.hpp"

namespace sdc {

// Every row carries it; a reader refuses a version it does not know (docs/fleet.md#versions).
inline constexpr int kStoreSchemaVersion = 1;

// A time as the rows write it ("2026-12-01T15:00:00.250000Z", to the microsecond) and its UTC day.
struct StoreStamp {
  std::string time, day;
  explicit StoreStamp(double unix_s);
  std::string compact() const;  // "20261201T150000Z", for file names
};

// One table's rows of one day, published as one file: DIR/table/day=DAY/name.
struct StoreFile {
  std::string table;  // results | sites | devices | quarantine | jobs
  std::string day;    // YYYY-MM-DD, UTC
  std::string name;
  std::string rows;  // NDJSON lines
};

// The conditions a result's row carries: a failing burn's at its first wrong result, another burn's
// hottest sample under load (the hottest of all without one under load). NaN where none was read, and
// for every result that is not a burn with samples.
BurnConditions result_conditions(const nlohmann::json& params);
// The same of a history's result, from its params (only those with samples: a history keeps no
// wrong results). Throws InputError naming `path` when its params are not JSON.
BurnConditions result_conditions(const std::string& path, const ResultRecord& r);

// The files of one run: its results, devices and (where a result recorded mismatches) sites, named
// HOST-YYYYMMDDTHHMMSSZ-KEY.ndjson after the run's start and a digest of what identifies the run
// (host, start, mode, rank, seed, and each result's device, probe, outcome, counts, duration and
// digest): a run written by its node and imported later from its JSON report gets the same names
// and the same bytes, so the import replaces the files with themselves.
std::vector<StoreFile> store_files(const RunReport& report);

// The files of a history database (read with `history`, from `path`): one per table and UTC day,
// named HOST-history-KEY.ndjson, KEY a digest of the host and the history's first run. A history
// only grows (results and quarantine decisions are never deleted), so a later import of it rewrites
// each day's file whole with the rows before and those since. No sites: a history keeps no records.
std::vector<StoreFile> store_files(const History& history, const std::string& path);

// A job's row of the jobs table: the figures engines query flat, and the whole summary (`sdcprobe
// goodput --json --job-id N`, on one line) that `fleet goodput --store` reads back.
struct JobRow {
  struct Category {
    std::string key;  // queue, detection_teardown, restart_warmup, rework, blocking_overhead
    int64_t ns = 0, sdc_ns = 0;
  };
  int64_t job_id = 0, wall_ns = 0, productive_ns = 0;
  std::vector<Category> categories;
  std::string summary;
};
// Its file, jobs/day=DAY/job-ID.ndjson, DAY that of `at` (when it was stored: the epilog runs as
// the job ends): storing a job's summary again replaces it.
StoreFile job_store_file(const JobRow& job, double at);

// Creates DIR and its table folders, and proves DIR writable by creating and removing a hidden
// file in a table folder. Throws InputError naming DIR and why.
void prepare_store(const std::string& dir);

// Publishes the files atomically, all synced together, then renamed devices, sites and quarantine
// before results, so that a reader who sees a run's results finds its devices and sites. Throws
// InputError naming the file.
void publish_store_files(const std::string& dir, const std::vector<StoreFile>& files);

}  // namespace sdc
