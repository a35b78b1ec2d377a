#include "goodput/run_hangs.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "goodput/flight_recorder.hpp"
#include "host/error.hpp"
#include "host/input_file.hpp"

namespace sdc::goodput {
namespace {

namespace fs = std::filesystem;

// `text` is a whole number of at most 18 digits.
bool whole_number(const std::string& text, int64_t& out) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::stoll(text);
  return true;
}

std::string seconds(int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / 1e9);
  return buf;
}

}  // namespace

bool attempt_of_folder(const std::string& name, int64_t& slurm_restart, int64_t& attempt) {
  // GoodputLog's names: attempt<N>, and requeue<S>.attempt<N> inside a Slurm job.
  std::string rest = name;
  slurm_restart = -1;
  if (rest.rfind("requeue", 0) == 0) {
    const size_t dot = rest.find('.');
    if (dot == std::string::npos || !whole_number(rest.substr(7, dot - 7), slurm_restart)) return false;
    rest = rest.substr(dot + 1);
  }
  return rest.rfind("attempt", 0) == 0 && whole_number(rest.substr(7), attempt);
}

RankRecord place_of(const std::vector<RankStart>& starts, int rank, int64_t slurm_restart, int64_t attempt) {
  RankRecord found;
  for (const RankStart& s : starts) {
    // A rank may run on another node after a restart: only that attempt's record says where.
    if (s.rank == rank && (attempt < 0 || (s.attempt == attempt && s.slurm_restart == slurm_restart))) found = s.where;
  }
  return found;
}

std::string place_text(const RankRecord& where) {
  std::string out;
  for (const std::string* s : {&where.host, &where.device, &where.pci_bus_id}) {
    if (!s->empty()) out += (out.empty() ? "" : ", ") + *s;
  }
  return out;
}

std::vector<RankStart> read_rank_starts(const std::vector<std::string>& paths) {
  TallyCounter tally;
  for (size_t i = 0; i < paths.size(); ++i) {
    std::ifstream in = open_input(paths[i], "event log");
    EventReader reader(false);
    tally.start_file(i, rank_from_name(paths[i]), paths.size() == 1);
    try {
      reader.read(in, [&](const Event& e) { tally.add(e); });
    } catch (const InputError& e) {
      check_read(in, paths[i], "event log");
      throw InputError(paths[i] + ": " + e.what());
    }
    check_read(in, paths[i], "event log");
    tally.end_file();
  }
  return tally.finish().starts;
}

std::vector<RunHang> find_run_hangs(const std::vector<std::string>& event_paths, const std::vector<RankStart>& starts,
                                    const std::vector<AttemptLoss>& attempts) {
  std::set<fs::path> folders;
  for (const std::string& p : event_paths) {
    std::error_code ec;
    const fs::path base = fs::path(p).parent_path() / "flight_recorder";
    if (p == "-" || !fs::is_directory(base, ec)) continue;
    for (const fs::directory_entry& d : fs::directory_iterator(base, ec)) {
      // Only the folders the integrations write; a folder without files is an attempt that ended
      // before any rank dumped.
      int64_t s = 0, a = 0;
      if (attempt_of_folder(d.path().filename().string(), s, a) && d.is_directory(ec) && !fs::is_empty(d.path(), ec)) {
        folders.insert(d.path());
      }
    }
  }
  std::vector<RunHang> hangs;
  for (const fs::path& folder : folders) {
    RunHang h;
    h.folder = folder.string();
    attempt_of_folder(folder.filename().string(), h.slurm_restart, h.attempt);
    const std::vector<FrDump> dumps = read_fr_dumps(h.folder);
    h.report = attribute_hang(dumps);
    // Each rank's newest collective is the one it was in when the job stopped: its timeout is how
    // long the waiting ranks waited.
    for (const FrDump& d : dumps) {
      if (!d.entries.empty()) h.timeout_ms = std::max(h.timeout_ms, d.entries.back().timeout_ms);
    }
    for (const HangRank& c : h.report.culprits) {
      h.culprit_places.push_back(place_of(starts, c.rank, h.slurm_restart, h.attempt));
    }
    for (const AttemptLoss& a : attempts) {
      if (a.attempt == h.attempt && a.slurm_restart == h.slurm_restart) h.loss = a;
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
      const RankRecord& p = h.culprit_places[k];
      culprits.push_back({{"rank", h.report.culprits[k].rank},
                          {"host", p.host},
                          {"device", p.device},
                          {"pci_bus_id", p.pci_bus_id},
                          {"why", h.report.culprits[k].why}});
    }
    nlohmann::ordered_json undecided = nlohmann::ordered_json::array();
    for (const HangRank& r : h.report.undecided) undecided.push_back({{"rank", r.rank}, {"why", r.why}});
    nlohmann::ordered_json j = {{"cause", "hang"}, {"folder", h.folder}};
    if (h.slurm_restart >= 0) j["slurm_restart"] = h.slurm_restart;
    j["attempt"] = h.attempt;
    j["verdict"] = verdict_name(h.report.verdict);
    j["timeout_ms"] = h.timeout_ms;
    j["detection_teardown_ns"] = h.loss.detection_ns + h.loss.teardown_ns;
    j["waited_ns"] = h.loss.detection_ns;
    j["teardown_ns"] = h.loss.teardown_ns;
    j["culprits"] = culprits;
    j["undecided"] = undecided;
    a.push_back(std::move(j));
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
      const RankRecord& p = h.culprit_places[k];
      const std::string gpu = place_text({"", p.device, p.pci_bus_id});
      out += std::string(k == 0 ? "" : ", ") + "rank " + std::to_string(h.report.culprits[k].rank) +
             (p.host.empty() ? "" : " on " + p.host) + (gpu.empty() ? "" : " (" + gpu + ")");
    }
    out += "\n";
    const int64_t lost = h.loss.detection_ns + h.loss.teardown_ns;
    if (lost > 0) {
      out += "  detection & teardown " + seconds(lost) + ": " + seconds(h.loss.detection_ns) +
             " waiting from the last progress to the fault, " + seconds(h.loss.teardown_ns) + " of teardown\n";
    }
    for (const HangRank& c : h.report.culprits) out += "  rank " + std::to_string(c.rank) + ": " + c.why + "\n";
    for (const HangRank& r : h.report.undecided) out += "  rank " + std::to_string(r.rank) + ": " + r.why + "\n";
  }
  return out;
}

}  // namespace sdc::goodput
