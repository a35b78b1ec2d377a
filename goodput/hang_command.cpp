#include "goodput/hang_command.hpp"

#include <filesystem>

#include "goodput/flight_recorder.hpp"
#include "goodput/merge.hpp"
#include "goodput/run_hangs.hpp"
#include "host/atomic_file.hpp"

namespace sdc::goodput {
namespace {

nlohmann::json ranks_json(const std::vector<HangRank>& ranks) {
  nlohmann::json a = nlohmann::json::array();
  for (const HangRank& r : ranks) a.push_back({{"rank", r.rank}, {"why", r.why}});
  return a;
}

}  // namespace

nlohmann::json hang_report_json(const HangReport& report, const std::vector<RankRecord>& places) {
  nlohmann::json groups = nlohmann::json::array();
  for (const HangGroup& g : report.groups) {
    groups.push_back({{"group", g.group},
                      {"desc", g.desc},
                      {"members", g.members},
                      {"no_dump", g.no_dump},
                      {"first_incomplete", g.first_incomplete},
                      {"op", g.op},
                      {"timeout_ms", g.timeout_ms},
                      {"missing", g.missing}});
  }
  nlohmann::json mismatches = nlohmann::json::array();
  for (const HangMismatch& m : report.mismatches) {
    mismatches.push_back({{"group", m.group},
                          {"seq", m.seq},
                          {"field", m.field},
                          {"odd", m.odd},
                          {"odd_value", m.odd_value},
                          {"common_value", m.common_value}});
  }
  nlohmann::json culprits = ranks_json(report.culprits);
  for (size_t k = 0; k < places.size(); ++k) {
    culprits[k]["host"] = places[k].host;
    culprits[k]["device"] = places[k].device;
    culprits[k]["pci_bus_id"] = places[k].pci_bus_id;
  }
  return {{"verdict", verdict_name(report.verdict)},
          {"world_size", report.world_size},
          {"dumped", report.dumped},
          {"culprits", culprits},
          {"undecided", ranks_json(report.undecided)},
          {"groups", groups},
          {"mismatches", mismatches}};
}

int hang_command(const HangOptions& options, std::ostream& out) {
  HangReport report = attribute_hang(read_fr_dumps(options.dir), options.world_size);
  std::vector<RankRecord> places;
  if (!options.events.empty()) {
    const std::vector<RankStart> starts = read_rank_starts(expand_event_paths(options.events));
    int64_t slurm_restart = -1, attempt = -1;
    attempt_of_folder(std::filesystem::path(options.dir).lexically_normal().filename().string(), slurm_restart,
                      attempt);
    for (const HangRank& c : report.culprits) places.push_back(place_of(starts, c.rank, slurm_restart, attempt));
  }
  out << "flight-recorder dumps of " << report.dumped.size() << " of " << report.world_size << " ranks in "
      << options.dir << "\n";
  switch (report.verdict) {
    case HangReport::Verdict::kNoHang: out << "no hang: every rank enqueued the same collectives\n"; break;
    case HangReport::Verdict::kCulprit: out << "hung by rank"; break;
    case HangReport::Verdict::kCannotDecide: out << "cannot decide which rank hung the job\n"; break;
  }
  if (report.verdict == HangReport::Verdict::kCulprit) {
    for (size_t k = 0; k < report.culprits.size(); ++k) out << (k == 0 ? " " : ", ") << report.culprits[k].rank;
    out << "\n";
  }
  for (size_t k = 0; k < report.culprits.size(); ++k) {
    const std::string where = k < places.size() ? place_text(places[k]) : "";
    out << "  culprit rank " << report.culprits[k].rank << (where.empty() ? "" : " (" + where + ")") << ": "
        << report.culprits[k].why << "\n";
  }
  for (const HangRank& r : report.undecided) out << "  cannot decide rank " << r.rank << ": " << r.why << "\n";
  if (!options.json_path.empty())
    write_file_atomically(options.json_path, hang_report_json(report, places).dump(1) + "\n");
  return 0;
}

}  // namespace sdc::goodput
