// A fuzz case of the fleet aggregates reader as one text: sections "== TABLE" followed by that
// table's NDJSON rows, written as an engine writes them (DIR/TABLE/part-0.json and _SUCCESS).
// Seeds: corpus/fleet_aggregates/, the tables DuckDB wrote (python -m sdcprobe.fleet_engine
// aggregate) for a store of three CPU qualify runs: three digests with their members, six family
// rows; its fault site, failures_by_day and conditions rows were added by hand in the engine's format (the
// runs failed nothing).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace sdc::fuzz {

inline void write_aggregates_case(const std::filesystem::path& dir, const std::string& text) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream part;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("== ", 0) == 0) {
      const std::string table = line.substr(3);
      if (table.empty() || table.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string::npos) continue;
      std::filesystem::create_directories(dir / table);
      std::ofstream(dir / table / "_SUCCESS").flush();
      part = std::ofstream(dir / table / "part-0.json", std::ios::app);
    } else if (part.is_open()) {
      part << line << '\n';
    }
  }
}

}  // namespace sdc::fuzz
