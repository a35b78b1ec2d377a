#include "fleet/store_import.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "fleet/fleet_sdc_ingest.hpp"
#include "host/error.hpp"
#include "scheduler/qualify/worker_protocol.hpp"

namespace sdc {
namespace {

// The run a report describes, with what its rows need, read by the readers of the report's own
// parts (identity_from_json, result_from_json).
RunReport run_of_report(const nlohmann::json& j) {
  RunReport r;
  r.mode = j.at("mode").get<std::string>();
  r.host = j.at("host").get<std::string>();
  r.seed = j.at("seed").get<uint64_t>();
  r.level = parse_level(j.at("level").get<std::string>());
  r.started_at = j.at("started_at").get<std::string>();
  if (j.contains("size_bytes") && !j.at("size_bytes").is_null()) r.size_bytes = j.at("size_bytes").get<uint64_t>();
  if (j.contains("iterations") && !j.at("iterations").is_null()) r.iterations = j.at("iterations").get<uint32_t>();
  r.rank = j.value("rank", 0);
  if (j.contains("injections") && !j.at("injections").is_null()) {
    r.injections = j.at("injections").get<std::vector<std::string>>();
  }
  for (const auto& d : j.at("devices")) r.devices.push_back(identity_from_json(d));
  for (const auto& x : j.at("results")) r.results.push_back(result_from_json(x));
  return r;
}

}  // namespace

std::vector<StoreFile> report_store_files(const std::string& name, std::string_view text) {
  FleetTally checked;
  ingest_report_text(name, text, checked);
  try {
    return store_files(run_of_report(nlohmann::json::parse(text)));
  } catch (const std::exception& e) {
    // What the fleet reader leaves unchecked (the mode, a result's counts, the level's name).
    throw InputError(name + ": " + e.what());
  }
}

StoreImport import_into_store(const std::vector<std::string>& paths, const std::string& dir) {
  const std::vector<std::string> inputs = fleet_input_files(paths);
  prepare_store(dir);
  StoreImport done;
  for (const auto& path : inputs) {
    std::vector<StoreFile> files;
    if (const std::optional<std::string> text = read_fleet_file(path)) {
      files = report_store_files(path, *text);
      ++done.reports;
    } else {
      FleetTally checked;
      ingest_history(path, checked);
      files = store_files(History(path, 10000, History::Access::kReadOnly), path);
      ++done.histories;
    }
    publish_store_files(dir, files);
    done.files += files.size();
    for (const auto& f : files) {
      if (f.table == "results") done.results += static_cast<uint64_t>(std::count(f.rows.begin(), f.rows.end(), '\n'));
    }
  }
  return done;
}

}  // namespace sdc
