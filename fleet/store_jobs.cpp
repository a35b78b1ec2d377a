#include "fleet/store_jobs.hpp"

#include <nlohmann/json.hpp>

#include "fleet/fleet_aggregates.hpp"
#include "fleet/store_writer.hpp"
#include "goodput/breakdown.hpp"
#include "goodput/cluster/cluster_summary.hpp"
#include "host/error.hpp"
#include "host/input_file.hpp"

namespace sdc {

void publish_job_summary(const std::string& dir, const std::string& name, const std::string& text, double at) {
  const goodput::cluster::JobSummary s = goodput::cluster::parse_job_summary(name, text);
  JobRow row;
  row.job_id = s.job_id;
  row.wall_ns = s.breakdown.wall_ns;
  row.productive_ns = s.breakdown.productive_ns;
  for (goodput::Category c : goodput::kCategories) {
    row.categories.push_back({std::string(goodput::category_key(c)), s.breakdown[c].ns, s.breakdown[c].sdc_ns});
  }
  row.summary = nlohmann::json::parse(text).dump();  // one line
  prepare_store(dir);
  publish_store_files(dir, {job_store_file(row, at)});
}

std::vector<std::pair<std::string, std::string>> store_job_summaries(const std::string& dir) {
  const TemporaryFolder work;
  const std::string out = work.path() + "/summaries.ndjson";
  run_fleet_engine({"jobs", "--store", dir, "--out", out}, "--store " + dir);
  const std::string text = read_input(out, "job summaries");
  std::vector<std::pair<std::string, std::string>> summaries;
  size_t line = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    ++line;
    if (end > at) summaries.emplace_back(dir + "/jobs: row " + std::to_string(line), text.substr(at, end - at));
    at = end + 1;
  }
  return summaries;
}

}  // namespace sdc
