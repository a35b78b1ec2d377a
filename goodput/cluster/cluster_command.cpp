#include "goodput/cluster/cluster_command.hpp"

#include <algorithm>
#include <cmath>

#include "goodput/cluster/cluster_report.hpp"
#include "goodput/event.hpp"
#include "host/atomic_file.hpp"
#include "host/error.hpp"
#include "host/time.hpp"

namespace sdc::goodput::cluster {
namespace {

constexpr int64_t kNsPerS = 1'000'000'000;

// RFC 3339 in whole seconds (Slurm keeps no finer time), as Unix seconds.
int64_t whole_seconds(const std::string& field, const std::string& text) {
  int64_t ns = 0;
  try {
    ns = parse_rfc3339_ns(text);
  } catch (const InputError& e) {
    throw InputError(field + ": " + e.what());
  }
  if (ns % kNsPerS != 0)
    throw InputError(field + ": \"" + text + "\" has a fraction of a second; Slurm keeps whole seconds");
  return ns / kNsPerS;
}

// "7d", "36h", "3600": a duration; a date has "-" and "T".
bool is_duration(const std::string& text) {
  return !text.empty() && text.find('T') == std::string::npos && text.find('-') == std::string::npos;
}

}  // namespace

int fleet_goodput_command(FleetGoodputOptions o, std::ostream& out, std::ostream& err) {
  const GroupBy by = parse_group_by(o.by);
  if (!o.since.empty()) {
    if (is_duration(o.since)) {
      o.inputs.since_before_until_s = static_cast<int64_t>(std::llround(parse_duration("--since", o.since)));
    } else {
      o.inputs.since_s = whole_seconds("--since", o.since);
    }
  }
  if (!o.until.empty()) o.inputs.until_s = whole_seconds("--until", o.until);
  Progress progress("fleet goodput");
  const Cluster cluster = compute_cluster(o.inputs, &progress);
  if (!o.inputs.logs_template.empty() && !cluster.logs_matched_nothing.empty() &&
      std::none_of(cluster.results.begin(), cluster.results.end(),
                   [](const JobResult& r) { return r.source == JobSource::kLogs; })) {
    err << "sdcprobe: WARNING: --logs '" << o.inputs.logs_template << "' matched no file for any of the "
        << cluster.logs_matched_nothing.size() << " jobs; check the template\n";
  }
  const std::vector<WorkItem> work = work_list(cluster, by, o.top);
  if (!o.json_path.empty()) write_file_atomically(o.json_path, json_report(cluster, work, by));
  if (!o.markdown_path.empty()) write_file_atomically(o.markdown_path, markdown_report(cluster, work, by));
  if (!o.svg_path.empty()) write_file_atomically(o.svg_path, svg_report(cluster, work));
  if (!o.prom_path.empty()) write_file_atomically(o.prom_path, prometheus_report(cluster));
  out << text_report(cluster, work, by);
  return 0;
}

}  // namespace sdc::goodput::cluster
