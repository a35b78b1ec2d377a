// The fleet store's aggregate tables, as an engine wrote them (python/sdcprobe/fleet_engine.py, the
// same SQL on DuckDB and on Spark; docs/fleet.md#aggregates), read into the FleetTally that
// analyze_fleet takes: the statistics, decisions and outputs are sdcprobe's, whichever read the rows.
#pragma once

#include <string>
#include <vector>

#include "fleet/fleet_sdc_tally.hpp"

namespace sdc {

// The aggregates' own version, which the engine writes in its `version` table.
inline constexpr int kAggregatesVersion = 1;

// Reads DIR/TABLE/ for each table: NDJSON part files (names starting with '.' or '_' skipped), and a
// `_SUCCESS` file that the engine writes once a table is whole. Throws InputError naming the file,
// the line and the field: a table missing or incomplete, a row that is not what the engine writes, a
// row naming a device or vote no other table has, or another version.
FleetTally read_fleet_aggregates(const std::string& dir);

// A folder under $TMPDIR, removed with what it holds when this goes.
class TemporaryFolder {
 public:
  TemporaryFolder();
  ~TemporaryFolder();
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `PYTHON -m sdcprobe.fleet_engine ARGS` (PYTHON: $SDCPROBE_PYTHON, else python3), whose
// errors go to stderr. Throws InputError, `what` first, when it fails.
void run_fleet_engine(const std::vector<std::string>& args, const std::string& what);

// `sdcprobe fleet sdc --store DIR`: runs the engine (`PYTHON -m sdcprobe.fleet_engine aggregate`,
// embedded DuckDB; PYTHON is $SDCPROBE_PYTHON, else python3) over the store into a temporary folder
// (under $TMPDIR), reads it and removes it. `since` and `until` (YYYY-MM-DD, may be empty) limit
// the days read. Throws InputError when the engine fails (it has said why on stderr).
FleetTally aggregate_fleet_store(const std::string& store, const std::string& since, const std::string& until);

}  // namespace sdc
