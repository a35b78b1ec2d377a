#include "goodput/cluster/cluster_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "goodput/planner.hpp"
#include "host/error.hpp"

namespace sdc::goodput::cluster {
namespace {

using goodput::Category;
constexpr size_t kClasses = goodput::kCategoryCount + kUnlabelledCount;  // what the gap is made of
constexpr double kNsPerS = 1e9;

GpuNs class_ns(const ClusterBreakdown& b, size_t i) {
  return i < goodput::kCategoryCount ? b.ns[i] : b.unlabelled[i - goodput::kCategoryCount];
}
GpuNs class_sdc_ns(const ClusterBreakdown& b, size_t i) { return i < goodput::kCategoryCount ? b.sdc_ns[i] : 0; }
std::string class_key(size_t i) {
  return std::string(i < goodput::kCategoryCount
                         ? goodput::category_key(goodput::kCategories[i])
                         : unlabelled_key(static_cast<Unlabelled>(i - goodput::kCategoryCount)));
}
std::string class_title(size_t i) {
  return std::string(i < goodput::kCategoryCount
                         ? goodput::category_title(goodput::kCategories[i])
                         : unlabelled_title(static_cast<Unlabelled>(i - goodput::kCategoryCount)));
}

std::string format(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string hours(GpuNs v) { return format("%.1f", gpu_hours(v)); }
std::string share(GpuNs part, GpuNs whole) {
  return whole > 0 ? format("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}
double fraction(GpuNs part, GpuNs whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

std::string utc(int64_t s) {
  const time_t t = static_cast<time_t>(s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string group_key(const ClusterJob& job, GroupBy by) {
  switch (by) {
    case GroupBy::kUser: return job.user.empty() ? "(none)" : job.user;
    case GroupBy::kAccount: return job.account.empty() ? "(none)" : job.account;
    case GroupBy::kPartition: return job.partition.empty() ? "(none)" : job.partition;
    case GroupBy::kJob: return std::to_string(job.job_id);
  }
  return "";
}

// Rework GPU-hours that `interval` would have saved, by the first-order model.
double saved_hours(double rework_h, double saves_h, double now_s, double save_s, double interval_s) {
  return rework_h + saves_h - (rework_h * interval_s / now_s + saves_h * (now_s + save_s) / (interval_s + save_s));
}

Advice advise(const Cluster& c, const JobResult& r) {
  Advice a;
  if (!r.tally || r.tally->saves.count == 0) {
    a.why_not = "no blocking saves logged: the planner needs the measured save time";
    return a;
  }
  if (r.tally->save_interval_ns <= 0) {
    a.why_not = "one save logged: the current interval is not measured";
    return a;
  }
  if (c.incidents.count == 0) {
    a.why_not = "no incidents in the window: no failure rate to plan for";
    return a;
  }
  a.available = true;
  a.save_s = static_cast<double>(r.tally->saves.ns) / static_cast<double>(r.tally->saves.count) / kNsPerS;
  a.interval_now_s = static_cast<double>(r.tally->save_interval_ns) / kNsPerS;
  auto interval_at = [&](double per_gpu_day) {
    goodput::PlanParams p;
    p.nodes = r.gpus;
    p.gpus_per_node = 1;
    p.failure_rate = per_gpu_day;
    p.sdc_rate = 0;  // SDC detections are among the incidents
    p.ckpt_write_s = a.save_s;
    p.trials = 0;
    return goodput::plan(p).optimal_ckpt_interval_s;
  };
  a.interval_s = interval_at(c.incidents.per_gpu_day);
  a.interval_low_s = interval_at(c.incidents.high);
  a.interval_high_s = c.incidents.low > 0 ? interval_at(c.incidents.low) : INFINITY;
  const double rework_h = gpu_hours(r.gpu[Category::kRework]);
  const double saves_h = static_cast<double>(r.tally->saves.ns) * static_cast<double>(r.gpus) / (3600.0 * kNsPerS);
  a.saved_gpu_hours = saved_hours(rework_h, saves_h, a.interval_now_s, a.save_s, a.interval_s);
  const double s1 = saved_hours(rework_h, saves_h, a.interval_now_s, a.save_s, a.interval_low_s);
  const double s2 = std::isinf(a.interval_high_s)
                        ? -INFINITY
                        : saved_hours(rework_h, saves_h, a.interval_now_s, a.save_s, a.interval_high_s);
  a.saved_low = std::min(s1, s2);
  a.saved_high = std::max(s1, s2);
  return a;
}

// Three significant digits, whole numbers from 100 up: small jobs' figures stay readable.
std::string figure(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const std::string s = std::fabs(v) >= 100 ? format("%.0f", v) : format("%.3g", v);
  return s == "-0" ? "0" : s;
}

std::string seconds_text(double s) { return std::isinf(s) ? "never" : figure(s) + " s"; }

std::string advice_text(const Advice& a) {
  if (!a.available) return "planner: " + a.why_not;
  // A negative saving: the planner's interval would have cost more than the job's own.
  const std::string outcome = a.saved_gpu_hours < 0 ? "would have cost " + figure(-a.saved_gpu_hours) + " GPU-h more"
                                                    : "would have saved " + figure(a.saved_gpu_hours) + " GPU-h";
  return "planner: checkpoint every " + seconds_text(a.interval_s) + " (95%: " + seconds_text(a.interval_low_s) +
         " to " + seconds_text(a.interval_high_s) + ") instead of " + seconds_text(a.interval_now_s) + " (save " +
         seconds_text(a.save_s) + "): " + outcome + " (saved, 95%: " + figure(a.saved_low) + " to " +
         figure(a.saved_high) + " GPU-h)";
}

const char* kBlockingNames[4] = {"checkpoint saves", "data waits", "evals", "probes"};

std::string blocking_text(const WorkItem& w) {
  GpuNs total = 0;
  size_t top = 0;
  for (size_t i = 0; i < 4; ++i) {
    total += w.blocking[i];
    if (w.blocking[i] > w.blocking[top]) top = i;
  }
  if (total == 0) return "measured: no saves, data waits, evals or probes logged";
  std::string s = "measured: ";
  for (size_t i = 0; i < 4; ++i) {
    s += std::string(i ? ", " : "") + kBlockingNames[i] + " " + hours(w.blocking[i]) + " GPU-h";
  }
  return s + "; " + kBlockingNames[top] + " dominate";
}

// "1.2 GPU-h in 2 hangs", then a line per node: "node7: 1.0 GPU-h (1 hang; GPU-b 00000000:19:00.0):
// hardware, health: GPU-b: xid".
std::string hangs_text(const WorkItem& w) {
  return hours(w.hang_gpu_ns) + " GPU-h in " + std::to_string(w.hangs) + (w.hangs == 1 ? " hang" : " hangs");
}
std::string node_text(const HangNode& n) {
  std::string gpus;
  for (const std::string& g : n.gpus) gpus += "; " + g;
  std::string s = n.host + ": " + hours(n.gpu_ns) + " GPU-h (" + std::to_string(n.hangs) +
                  (n.hangs == 1 ? " hang" : " hangs") + gpus + ")";
  if (!n.hardware()) return s;
  s += ": hardware, health:";
  for (const std::string& f : n.faults) s += " " + f + ";";
  s.pop_back();
  return s;
}

std::string owner_of(size_t i) {
  return i < goodput::kCategoryCount ? std::string(goodput::category_owner(goodput::kCategories[i]))
                                     : "instrumentation (no event log)";
}
std::string lever_of(size_t i) {
  if (i < goodput::kCategoryCount) return std::string(goodput::category_lever(goodput::kCategories[i]));
  return i == goodput::kCategoryCount
             ? "log the job's events (GoodputLog) to see where a failed run's time went"
             : "log the job's events (GoodputLog): whether this time was productive is not known";
}

std::string escape_label(const std::string& v) {
  std::string out;
  for (char ch : v) {
    if (ch == '\\' || ch == '"') out += '\\';
    out += ch == '\n' ? std::string("\\n") : std::string(1, ch);
  }
  return out;
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char ch : s) {
    out += ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : std::string(1, ch);
  }
  return out;
}

// goodput --svg's palette (Okabe-Ito): productive, the five categories; then the unlabelled classes.
const char* colour(size_t i) {
  static const char* kColours[] = {"#009E73", "#999999", "#E69F00", "#56B4E9",
                                   "#D55E00", "#CC79A7", "#000000", "#F0E442"};
  return kColours[i];
}

}  // namespace

GroupBy parse_group_by(const std::string& text) {
  if (text == "user") return GroupBy::kUser;
  if (text == "account") return GroupBy::kAccount;
  if (text == "partition") return GroupBy::kPartition;
  if (text == "job") return GroupBy::kJob;
  throw InputError("--by: \"" + text + "\" is not user, account, partition or job");
}

std::string_view group_by_name(GroupBy by) {
  switch (by) {
    case GroupBy::kUser: return "user";
    case GroupBy::kAccount: return "account";
    case GroupBy::kPartition: return "partition";
    case GroupBy::kJob: return "job";
  }
  return "";
}

namespace {

void add_unique(std::vector<std::string>& list, const std::string& s) {
  if (std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
}

// The hangs' cost on the detection & teardown item, and the nodes of their culprits.
void add_hangs(const Cluster& c, const JobResult& r, WorkItem& item, std::unordered_map<std::string, HangNode>& nodes) {
  for (const JobHang& h : r.hangs) {
    const GpuNs cost = static_cast<GpuNs>(h.detection_teardown_ns) * r.gpus;
    item.hang_gpu_ns += cost;
    ++item.hangs;
    const GpuNs n = static_cast<GpuNs>(h.culprits.size());
    std::vector<std::string> counted;  // a hang counts once per node
    for (size_t k = 0; k < h.culprits.size(); ++k) {
      const goodput::RankRecord& where = h.culprits[k];
      const std::string host = where.host.empty() ? "(unknown)" : where.host;
      HangNode& node = nodes[host];
      node.host = host;
      node.gpu_ns += cost / n + (k == 0 ? cost % n : 0);
      if (std::find(counted.begin(), counted.end(), host) == counted.end()) {
        ++node.hangs;
        counted.push_back(host);
      }
      if (where.device.empty()) continue;
      add_unique(node.gpus, where.device + (where.pci_bus_id.empty() ? "" : " " + where.pci_bus_id));
      const auto faults = c.gpu_faults.find(where.device);
      if (faults == c.gpu_faults.end()) continue;
      std::string fields;
      for (const std::string& f : faults->second) fields += (fields.empty() ? "" : ", ") + f;
      add_unique(node.faults, where.device + ": " + fields);
    }
  }
}

}  // namespace

std::vector<WorkItem> work_list(const Cluster& c, GroupBy by, size_t top) {
  std::vector<WorkItem> items(kClasses);
  std::vector<std::unordered_map<std::string, GroupItem>> groups(kClasses);
  std::unordered_map<std::string, HangNode> nodes;
  for (const JobResult& r : c.results) {
    // A job counted from its accounting alone (crossing the window) counts no ledger, so no hang.
    if (r.source != JobSource::kSacct) add_hangs(c, r, items[static_cast<size_t>(Category::kDetectionTeardown)], nodes);
    const ClusterJob& job = c.jobs[r.job];
    const std::string key = group_key(job, by);
    for (size_t i = 0; i < kClasses; ++i) {
      const GpuNs v = class_ns(r.gpu, i);
      if (v == 0) continue;
      GroupItem& g = groups[i][key];
      g.name = key;
      g.gpu_ns += v;
      g.sdc_gpu_ns += class_sdc_ns(r.gpu, i);
      if (by == GroupBy::kJob && i == static_cast<size_t>(Category::kRework)) g.advice = advise(c, r);
    }
    if (r.tally && r.source != JobSource::kSacct) {
      WorkItem& b = items[static_cast<size_t>(Category::kBlockingOverhead)];
      const goodput::Activity* a[4] = {&r.tally->saves, &r.tally->data_waits, &r.tally->evals, &r.tally->probes};
      for (size_t k = 0; k < 4; ++k) b.blocking[k] += static_cast<GpuNs>(a[k]->ns) * r.gpus;
    }
  }
  for (size_t i = 0; i < kClasses; ++i) {
    WorkItem& w = items[i];
    w.key = class_key(i);
    w.title = class_title(i);
    w.owner = owner_of(i);
    w.lever = lever_of(i);
    w.gpu_ns = class_ns(c.total, i);
    w.sdc_gpu_ns = class_sdc_ns(c.total, i);
    for (auto& [name, g] : groups[i]) w.top.push_back(std::move(g));
    std::sort(w.top.begin(), w.top.end(), [](const GroupItem& a, const GroupItem& b) {
      return a.gpu_ns != b.gpu_ns ? a.gpu_ns > b.gpu_ns : a.name < b.name;
    });
    if (w.top.size() > top) w.top.resize(top);
  }
  WorkItem& dt = items[static_cast<size_t>(Category::kDetectionTeardown)];
  for (auto& [host, node] : nodes) dt.nodes.push_back(std::move(node));
  std::sort(dt.nodes.begin(), dt.nodes.end(), [](const HangNode& a, const HangNode& b) {
    return a.gpu_ns != b.gpu_ns ? a.gpu_ns > b.gpu_ns : a.host < b.host;
  });
  if (dt.nodes.size() > top) dt.nodes.resize(top);
  std::stable_sort(items.begin(), items.end(),
                   [](const WorkItem& a, const WorkItem& b) { return a.gpu_ns > b.gpu_ns; });
  items.erase(std::remove_if(items.begin(), items.end(), [](const WorkItem& w) { return w.gpu_ns == 0; }), items.end());
  return items;
}

namespace {

struct Counts {
  int64_t summaries = 0, logs = 0, sacct = 0, crossing = 0;
};
Counts counts(const Cluster& c) {
  Counts n;
  for (const JobResult& r : c.results) {
    if (r.source == JobSource::kSummary) ++n.summaries;
    if (r.source == JobSource::kLogs) ++n.logs;
    if (r.source == JobSource::kSacct) ++n.sacct;
    if (r.crosses_window) ++n.crossing;
  }
  return n;
}

// How many job ids a report lists of a longer list.
constexpr size_t kFirstIds = 10;

// "3, 4, 5", or the first kFirstIds and "and N more".
std::string first_ids(const std::vector<int64_t>& ids) {
  std::string s;
  for (size_t i = 0; i < std::min(ids.size(), kFirstIds); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  if (ids.size() > kFirstIds) s += " and " + std::to_string(ids.size() - kFirstIds) + " more";
  return s;
}

// The instrumented jobs' ETTR: their productive over their wall.
double instrumented_ettr(const Cluster& c) {
  GpuNs productive = 0;
  for (const JobResult& r : c.results) {
    if (r.source != JobSource::kSacct) productive += r.gpu.productive;
  }
  return fraction(productive, c.total.instrumented_wall);
}

}  // namespace

std::string text_report(const Cluster& c, const std::vector<WorkItem>& work, GroupBy by) {
  const ClusterBreakdown& t = c.total;
  const Counts n = counts(c);
  std::ostringstream o;
  o << "Cluster ETTR (GPU-weighted): " << format("%.4f", t.ettr()) << "  (productive " << hours(t.productive) << " of "
    << hours(t.wall) << " GPU-hours, " << utc(c.window.since_s) << " to " << utc(c.window.until_s) << ")\n";
  o << "Instrumented: " << share(t.instrumented_wall, t.wall) << " of GPU-time, ETTR "
    << format("%.4f", instrumented_ettr(c)) << "; jobs: " << n.summaries << " from summaries, " << n.logs
    << " from logs, " << n.sacct << " from sacct alone";
  if (n.crossing > 0) o << " (" << n.crossing << " of them have a ledger but cross the window's edge)";
  o << "\n";
  if (!c.logs_matched_nothing.empty()) {
    o << "--logs matched no file for " << c.logs_matched_nothing.size() << " of " << c.results.size()
      << " jobs (counted from sacct alone): " << first_ids(c.logs_matched_nothing) << "\n";
  }
  if (c.jobs_without_gpus > 0) o << "Jobs without GPUs, not counted: " << c.jobs_without_gpus << "\n";
  if (c.summaries_without_record > 0) {
    o << "Summaries of jobs not in the accounting, not counted: " << c.summaries_without_record << "\n";
  }
  o << "Incidents: " << c.incidents.count << " in " << format("%.1f", c.incidents.gpu_days)
    << " instrumented GPU-days = " << format("%.4g", c.incidents.per_gpu_day)
    << " per GPU-day (95%: " << format("%.4g", c.incidents.low) << " to " << format("%.4g", c.incidents.high)
    << ")\n\n";
  o << "Work list (largest first; GPU-hours, share of the gap of " << hours(t.gap()) << " GPU-h, SDC share):\n";
  int rank = 1;
  for (const WorkItem& w : work) {
    o << "  " << rank++ << ". " << w.title << ": " << hours(w.gpu_ns) << " GPU-h (" << share(w.gpu_ns, t.gap())
      << " of the gap; SDC " << hours(w.sdc_gpu_ns) << ")\n     owner: " << w.owner << "\n     lever: " << w.lever
      << "\n";
    if (w.key == "blocking_overhead") o << "     " << blocking_text(w) << "\n";
    if (w.hangs > 0) {
      o << "     hangs: " << hangs_text(w) << (w.nodes.empty() ? "" : "; nodes by the GPU-hours their hangs cost:")
        << "\n";
      for (const HangNode& n : w.nodes) o << "       node " << node_text(n) << "\n";
    }
    for (const GroupItem& g : w.top) {
      o << "       " << group_by_name(by) << " " << g.name << ": " << hours(g.gpu_ns) << " GPU-h ("
        << share(g.gpu_ns, t.gap()) << ")\n";
      if (g.advice) o << "         " << advice_text(*g.advice) << "\n";
    }
  }
  if (work.empty()) o << "  nothing lost\n";
  return o.str();
}

std::string markdown_report(const Cluster& c, const std::vector<WorkItem>& work, GroupBy by) {
  const ClusterBreakdown& t = c.total;
  std::ostringstream o;
  o << "# Cluster goodput, " << utc(c.window.since_s) << " to " << utc(c.window.until_s) << "\n\n";
  o << "Cluster ETTR (GPU-weighted): **" << format("%.4f", t.ettr()) << "**; instrumented "
    << share(t.instrumented_wall, t.wall) << " of GPU-time (ETTR " << format("%.4f", instrumented_ettr(c)) << ").\n\n";
  o << "| where the GPU-time went | GPU-hours | share of wall | share of gap | SDC GPU-hours |\n";
  o << "| --- | ---: | ---: | ---: | ---: |\n";
  o << "| productive | " << hours(t.productive) << " | " << share(t.productive, t.wall) << " | | |\n";
  for (size_t i = 0; i < kClasses; ++i) {
    o << "| " << class_title(i) << " | " << hours(class_ns(t, i)) << " | " << share(class_ns(t, i), t.wall) << " | "
      << share(class_ns(t, i), t.gap()) << " | " << hours(class_sdc_ns(t, i)) << " |\n";
  }
  o << "| wall | " << hours(t.wall) << " | 100.0% | | |\n\n## Work list\n\n";
  int rank = 1;
  for (const WorkItem& w : work) {
    o << rank++ << ". **" << w.title << "**: " << hours(w.gpu_ns) << " GPU-h, " << share(w.gpu_ns, t.gap())
      << " of the gap (SDC " << hours(w.sdc_gpu_ns) << "). Owner: " << w.owner << ". " << w.lever << ".\n";
    if (w.key == "blocking_overhead") o << "   - " << blocking_text(w) << "\n";
    if (w.hangs > 0) o << "   - hangs: " << hangs_text(w) << "\n";
    for (const HangNode& n : w.nodes) o << "   - node " << node_text(n) << "\n";
    for (const GroupItem& g : w.top) {
      o << "   - " << group_by_name(by) << " `" << g.name << "`: " << hours(g.gpu_ns) << " GPU-h ("
        << share(g.gpu_ns, t.gap()) << ")";
      if (g.advice) o << "; " << advice_text(*g.advice);
      o << "\n";
    }
  }
  return o.str();
}

std::string json_report(const Cluster& c, const std::vector<WorkItem>& work, GroupBy by) {
  using nlohmann::ordered_json;
  const ClusterBreakdown& t = c.total;
  const Counts n = counts(c);
  ordered_json j;
  j["window"] = {{"since", utc(c.window.since_s)},
                 {"until", utc(c.window.until_s)},
                 {"since_s", c.window.since_s},
                 {"until_s", c.window.until_s}};
  j["ettr"] = t.ettr();
  j["instrumented_fraction"] = fraction(t.instrumented_wall, t.wall);
  j["instrumented_ettr"] = instrumented_ettr(c);
  // GPU-nanoseconds as decimal strings: a month of a large cluster exceeds 64 bits.
  ordered_json g;
  g["wall"] = to_string(t.wall);
  g["productive"] = to_string(t.productive);
  g["instrumented_wall"] = to_string(t.instrumented_wall);
  for (size_t i = 0; i < kClasses; ++i) {
    g[class_key(i)] = {{"gpu_ns", to_string(class_ns(t, i))}, {"sdc_gpu_ns", to_string(class_sdc_ns(t, i))}};
  }
  j["gpu_ns"] = g;
  j["jobs"] = {
      {"from_summaries", n.summaries},
      {"from_logs", n.logs},
      {"from_sacct", n.sacct},
      {"ledger_crossing_window", n.crossing},
      {"without_gpus", c.jobs_without_gpus},
      {"summaries_without_record", c.summaries_without_record},
      {"logs_matched_nothing", c.logs_matched_nothing.size()},
      {"logs_matched_nothing_first",
       std::vector<int64_t>(c.logs_matched_nothing.begin(),
                            c.logs_matched_nothing.begin() + std::min(c.logs_matched_nothing.size(), kFirstIds))}};
  j["incidents"] = {{"count", c.incidents.count},
                    {"gpu_days", c.incidents.gpu_days},
                    {"per_gpu_day", c.incidents.per_gpu_day},
                    {"low", c.incidents.low},
                    {"high", c.incidents.high}};
  ordered_json list = ordered_json::array();
  for (const WorkItem& w : work) {
    ordered_json item = {{"category", w.key},
                         {"owner", w.owner},
                         {"gpu_hours", gpu_hours(w.gpu_ns)},
                         {"share_of_gap", fraction(w.gpu_ns, t.gap())},
                         {"sdc_gpu_hours", gpu_hours(w.sdc_gpu_ns)}};
    if (w.key == "blocking_overhead") {
      item["measured_gpu_hours"] = {{"saves", gpu_hours(w.blocking[0])},
                                    {"data_waits", gpu_hours(w.blocking[1])},
                                    {"evals", gpu_hours(w.blocking[2])},
                                    {"probes", gpu_hours(w.blocking[3])}};
    }
    if (w.hangs > 0) {
      ordered_json nodes = ordered_json::array();
      for (const HangNode& n : w.nodes) {
        nodes.push_back({{"host", n.host},
                         {"gpu_hours", gpu_hours(n.gpu_ns)},
                         {"hangs", n.hangs},
                         {"gpus", n.gpus},
                         {"hardware", n.hardware()},
                         {"faults", n.faults}});
      }
      item["hangs"] = {{"gpu_hours", gpu_hours(w.hang_gpu_ns)}, {"count", w.hangs}, {"nodes", nodes}};
    }
    ordered_json top = ordered_json::array();
    for (const GroupItem& gi : w.top) {
      ordered_json e = {{std::string(group_by_name(by)), gi.name},
                        {"gpu_hours", gpu_hours(gi.gpu_ns)},
                        {"share_of_gap", fraction(gi.gpu_ns, t.gap())},
                        {"sdc_gpu_hours", gpu_hours(gi.sdc_gpu_ns)}};
      if (gi.advice) {
        const Advice& a = *gi.advice;
        auto num = [](double v) { return std::isinf(v) ? ordered_json(nullptr) : ordered_json(v); };
        e["planner"] = a.available ? ordered_json{{"save_s", a.save_s},
                                                  {"interval_now_s", a.interval_now_s},
                                                  {"interval_s", num(a.interval_s)},
                                                  {"interval_low_s", num(a.interval_low_s)},
                                                  {"interval_high_s", num(a.interval_high_s)},
                                                  {"saved_gpu_hours", a.saved_gpu_hours},
                                                  {"saved_low", num(a.saved_low)},
                                                  {"saved_high", num(a.saved_high)}}
                                   : ordered_json{{"unavailable", a.why_not}};
      }
      top.push_back(e);
    }
    item["top"] = top;
    list.push_back(item);
  }
  j["work_list"] = list;
  ordered_json days = ordered_json::array();
  for (const auto& [day, b] : c.days) {
    ordered_json d = {
        {"day", utc(day).substr(0, 10)}, {"wall", to_string(b.wall)}, {"productive", to_string(b.productive)}};
    for (size_t i = 0; i < kClasses; ++i) d[class_key(i)] = to_string(class_ns(b, i));
    days.push_back(d);
  }
  j["days"] = days;
  return j.dump(2) + "\n";
}

std::string svg_report(const Cluster& c, const std::vector<WorkItem>& work) {
  // Days, or weeks (from the first day) past 62 days.
  std::vector<std::pair<int64_t, ClusterBreakdown>> bars;
  const bool weekly = c.days.size() > 62;
  for (const auto& [day, b] : c.days) {
    const int64_t key = weekly ? day - (day - c.days.begin()->first) % (7 * 86400) : day;
    if (bars.empty() || bars.back().first != key) bars.push_back({key, {}});
    bars.back().second.add(b);
  }
  GpuNs largest = 1;
  for (const auto& [key, b] : bars) largest = std::max(largest, b.wall);
  constexpr double kWidth = 960, kChartTop = 90, kChartHeight = 260;
  const size_t shown = std::min<size_t>(work.size(), 8);
  const double height = kChartTop + kChartHeight + 90 + 28.0 * static_cast<double>(shown);
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << kWidth << " " << height << "\" font-family=\"sans-serif\" font-size=\"14\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"20\" y=\"32\" font-size=\"20\" font-weight=\"bold\">Where the cluster's GPU-time went: ETTR "
    << format("%.1f%%", 100.0 * c.total.ettr()) << "</text>\n";
  s << "<text x=\"20\" y=\"54\" fill=\"#444\">" << escape_xml(utc(c.window.since_s) + " to " + utc(c.window.until_s))
    << ", " << hours(c.total.wall) << " GPU-h, instrumented "
    << escape_xml(share(c.total.instrumented_wall, c.total.wall)) << "; a bar per " << (weekly ? "week" : "day")
    << " (a ledger's time in the day its job ended)</text>\n";
  const double slot = (kWidth - 40) / static_cast<double>(std::max<size_t>(bars.size(), 1));
  const double bar = std::max(1.0, slot * 0.8);
  for (size_t k = 0; k < bars.size(); ++k) {
    const ClusterBreakdown& b = bars[k].second;
    const double x = 20 + slot * static_cast<double>(k);
    double y = kChartTop + kChartHeight;
    auto segment = [&](size_t colour_index, GpuNs v, const std::string& title) {
      const double h = kChartHeight * static_cast<double>(v) / static_cast<double>(largest);
      y -= h;
      s << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << bar << "\" height=\"" << h << "\" fill=\""
        << colour(colour_index) << "\"><title>"
        << escape_xml(utc(bars[k].first).substr(0, 10) + " " + title + " " + hours(v) + " GPU-h")
        << "</title></rect>\n";
    };
    segment(0, b.productive, "productive");
    for (size_t i = 0; i < kClasses; ++i) segment(i + 1, class_ns(b, i), class_title(i));
  }
  double lx = 20;
  const double ly = kChartTop + kChartHeight + 20;
  for (size_t i = 0; i <= kClasses; ++i) {
    const std::string name = i == 0 ? "productive" : class_title(i - 1);
    s << "<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"12\" height=\"12\" fill=\"" << colour(i) << "\"/>";
    s << "<text x=\"" << lx + 16 << "\" y=\"" << ly + 11 << "\" font-size=\"11\">" << escape_xml(name) << "</text>\n";
    lx += 24 + 6.0 * static_cast<double>(name.size());
    if (lx > kWidth - 150) lx = 20;
  }
  double y = ly + 50;
  s << "<text x=\"20\" y=\"" << y - 14 << "\" font-size=\"16\" font-weight=\"bold\">Work list, largest first</text>\n";
  for (size_t k = 0; k < shown; ++k) {
    const WorkItem& w = work[k];
    std::string line = std::to_string(k + 1) + ". " + w.title + ": " + hours(w.gpu_ns) + " GPU-h (" +
                       share(w.gpu_ns, c.total.gap()) + " of the gap), owner " + w.owner;
    if (!w.top.empty()) line += "; largest: " + w.top[0].name + " " + hours(w.top[0].gpu_ns) + " GPU-h";
    s << "<text x=\"20\" y=\"" << y + 6 << "\">" << escape_xml(line) << "</text>\n";
    y += 28;
  }
  s << "</svg>\n";
  return s.str();
}

std::string prometheus_report(const Cluster& c) {
  std::map<std::string, ClusterBreakdown> partitions;
  for (const JobResult& r : c.results) {
    const std::string& p = c.jobs[r.job].partition;
    partitions[p.empty() ? "(none)" : p].add(r.gpu);
  }
  std::ostringstream o;
  o.precision(17);
  o << "# HELP sdcprobe_cluster_ettr GPU-weighted effective training time ratio of the window.\n"
       "# TYPE sdcprobe_cluster_ettr gauge\n"
    << "sdcprobe_cluster_ettr " << c.total.ettr() << "\n";
  o << "# HELP sdcprobe_cluster_instrumented_ratio Share of the window's GPU-time labelled by a job ledger.\n"
       "# TYPE sdcprobe_cluster_instrumented_ratio gauge\n"
    << "sdcprobe_cluster_instrumented_ratio " << fraction(c.total.instrumented_wall, c.total.wall) << "\n";
  auto seconds = [](GpuNs v) { return static_cast<double>(v) / kNsPerS; };
  auto categories = [&](const std::string& labels, const ClusterBreakdown& b) {
    o << "sdcprobe_cluster_gpu_seconds{" << labels << "category=\"productive\"} " << seconds(b.productive) << "\n";
    for (size_t i = 0; i < kClasses; ++i) {
      o << "sdcprobe_cluster_gpu_seconds{" << labels << "category=\"" << class_key(i) << "\"} "
        << seconds(class_ns(b, i)) << "\n";
    }
  };
  o << "# HELP sdcprobe_cluster_gpu_seconds GPU-seconds of the window by category; partition=\"\" is the cluster.\n"
       "# TYPE sdcprobe_cluster_gpu_seconds gauge\n";
  categories("partition=\"\",", c.total);
  for (const auto& [p, b] : partitions) categories("partition=\"" + escape_label(p) + "\",", b);
  o << "# HELP sdcprobe_partition_ettr GPU-weighted ETTR of the window's jobs in the partition.\n"
       "# TYPE sdcprobe_partition_ettr gauge\n";
  for (const auto& [p, b] : partitions)
    o << "sdcprobe_partition_ettr{partition=\"" << escape_label(p) << "\"} " << b.ettr() << "\n";
  o << "# HELP sdcprobe_cluster_window_end_timestamp_seconds End of the window the cluster ledger covers.\n"
       "# TYPE sdcprobe_cluster_window_end_timestamp_seconds gauge\n"
    << "sdcprobe_cluster_window_end_timestamp_seconds " << c.window.until_s << "\n";
  return o.str();
}

}  // namespace sdc::goodput::cluster
