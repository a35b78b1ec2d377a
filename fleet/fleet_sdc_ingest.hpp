// Reading many nodes' files into a FleetTally: qualify and sweep JSON reports (parsed with simdjson),
// SQLite history databases (opened read-only; their results vote as a report's do, except rows
// recorded before schema 3, which kept no class or digest and count toward rates and lemons only), and directories of
// them (a sweep's --spool-dir). Files are parsed in parallel, one tally per thread. Bad input throws InputError naming
// the file and the field.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/fleet_sdc_tally.hpp"
#include "host/progress.hpp"

namespace sdc {

// One JSON report (`name` is how errors call it).
void ingest_report_text(const std::string& name, std::string_view text, FleetTally& tally);
// One history database, read-only.
void ingest_history(const std::string& path, FleetTally& tally);
// The files `paths` name: each file as given, and a directory's *.json and history.db files (not its
// subdirectories), sorted. Throws InputError naming the paths when they hold none.
std::vector<std::string> fleet_input_files(const std::vector<std::string>& paths);
// A report's text, or nullopt for a history database (told by its SQLite header: SQLite opens it by
// its path). A FIFO is read once.
std::optional<std::string> read_fleet_file(const std::string& path);
// Every file of fleet_input_files(paths), a report or a history. `threads` 0: one per core. Throws InputError
// naming the paths when they hold no report or history (an empty directory). `progress`: files read
// of all, with their results.
FleetTally ingest_fleet(const std::vector<std::string>& paths, unsigned threads = 0, Progress* progress = nullptr);

}  // namespace sdc
