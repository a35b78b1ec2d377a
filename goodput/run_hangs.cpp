#include "goodput/run_hangs.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "goodput/flight_recorder.hpp"

namespace sdc::goodput {
namespace {

namespace fs = std::filesystem;

// A log's process_start names its rank and host (GoodputLog writes both); the first one counts.
constexpr int kLinesToProcessStart = 1000;

void hosts_from_log(const std::string& path, std::map<int64_t, std::string>& hosts) {
  std::ifstream in(path);
  std::string line;
  for (int n = 0; n < kLinesToProcessStart && std::getline(in, line); ++n) {
    if (line.find("process_start") == std::string::npos) continue;
    const nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_object() || e.value("event", "") != "process_start") continue;
    auto rank = e.find("rank");
    auto host = e.find("host");
    if (rank != e.end() && rank->is_number_integer() && host != e.end() && host->is_string()) {
      hosts.emplace(rank->get<int64_t>(), host->get<std::string>());
    }
    return;
  }
}

}  // namespace

std::vector<RunHang> find_run_hangs(const std::vector<std::string>& event_paths) {
  std::set<fs::path> folders;
  for (const std::string& p : event_paths) {
    std::error_code ec;
    const fs::path base = fs::path(p).parent_path() / "flight_recorder";
    if (p == "-" || !fs::is_directory(base, ec)) continue;
    for (const fs::directory_entry& d : fs::directory_iterator(base, ec)) {
      // Only the folders the integrations write (attempt<N>); a folder without files is an attempt
      // that ended before any rank dumped.
      const std::string name = d.path().filename().string();
      const bool attempt = name.size() > 7 && name.compare(0, 7, "attempt") == 0 &&
                           name.find_first_not_of("0123456789", 7) == std::string::npos;
      if (attempt && d.is_directory(ec) && !fs::is_empty(d.path(), ec)) folders.insert(d.path());
    }
  }
  if (folders.empty()) return {};
  std::map<int64_t, std::string> hosts;
  for (const std::string& p : event_paths) {
    if (p != "-") hosts_from_log(p, hosts);
  }
  std::vector<RunHang> hangs;
  for (const fs::path& folder : folders) {
    RunHang h;
    h.folder = folder.string();
    const std::vector<FrDump> dumps = read_fr_dumps(h.folder);
    h.report = attribute_hang(dumps);
    // Each rank's newest collective is the one it was in when the job stopped: its timeout is how
    // long the waiting ranks waited.
    for (const FrDump& d : dumps) {
      if (!d.entries.empty()) h.timeout_ms = std::max(h.timeout_ms, d.entries.back().timeout_ms);
    }
    for (const HangRank& c : h.report.culprits) {
      auto host = hosts.find(c.rank);
      h.culprit_hosts.push_back(host == hosts.end() ? "" : host->second);
    }
    hangs.push_back(std::move(h));
  }
  return hangs;
}

nlohmann::ordered_json run_hangs_json(const std::vector<RunHang>& hangs) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const RunHang& h : hangs) {
    nlohmann::ordered_json culprits = nlohmann::ordered_json::array();
    for (size_t k = 0; k < h.report.culprits.size(); ++k) {
      culprits.push_back(
          {{"rank", h.report.culprits[k].rank}, {"host", h.culprit_hosts[k]}, {"why", h.report.culprits[k].why}});
    }
    nlohmann::ordered_json undecided = nlohmann::ordered_json::array();
    for (const HangRank& r : h.report.undecided) undecided.push_back({{"rank", r.rank}, {"why", r.why}});
    a.push_back({{"cause", "hang"},
                 {"folder", h.folder},
                 {"verdict", verdict_name(h.report.verdict)},
                 {"timeout_ms", h.timeout_ms},
                 {"culprits", culprits},
                 {"undecided", undecided}});
  }
  return a;
}

std::string run_hangs_text(const std::vector<RunHang>& hangs) {
  std::string out;
  for (const RunHang& h : hangs) {
    if (h.report.verdict == HangReport::Verdict::kNoHang) continue;
    out += "Hang (" + h.folder + (h.timeout_ms > 0 ? ", timeout " + std::to_string(h.timeout_ms / 1000) + " s" : "") +
           "): ";
    if (h.report.culprits.empty()) out += "cannot decide which rank";
    for (size_t k = 0; k < h.report.culprits.size(); ++k) {
      out += std::string(k == 0 ? "" : ", ") + "rank " + std::to_string(h.report.culprits[k].rank) +
             (h.culprit_hosts[k].empty() ? "" : " on " + h.culprit_hosts[k]);
    }
    out += "\n";
    for (const HangRank& c : h.report.culprits) out += "  rank " + std::to_string(c.rank) + ": " + c.why + "\n";
    for (const HangRank& r : h.report.undecided) out += "  rank " + std::to_string(r.rank) + ": " + r.why + "\n";
  }
  return out;
}

}  // namespace sdc::goodput
