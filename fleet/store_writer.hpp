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

// One table's rows of one day, published as one file: DIR/table/day=DAY/name.
struct StoreFile {
  std::string table;  // results | sites | devices | quarantine
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

// Creates DIR and its table folders, and proves DIR writable by creating and removing a hidden
// file in a table folder. Throws InputError naming DIR and why.
void prepare_store(const std::string& dir);

// Publishes the files atomically, all synced together, then renamed devices, sites and quarantine
// before results, so that a reader who sees a run's results finds its devices and sites. Throws
// InputError naming the file.
void publish_store_files(const std::string& dir, const std::vector<StoreFile>& files);

}  // namespace sdc
