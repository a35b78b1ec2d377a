#include "fleet/fleet_sdc_output.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <set>
#include <sstream>

#include "probes/result.hpp"

namespace sdc {
namespace {

constexpr size_t kMaxListed = 200;  // votes, suspects and locations listed in full in the JSON

std::string day_text(int64_t day) {
  const std::time_t t = static_cast<std::time_t>(day * 86400);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &tm);
  return text;
}

std::string number(double v, const char* format = "%.3g") {
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string escape_label(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

// Markdown table cells: a pipe would end the cell.
std::string cell(std::string s) {
  std::replace(s.begin(), s.end(), '|', '/');
  return s;
}

nlohmann::json device_json(const FleetDevice& d) {
  return {{"host", d.host}, {"uuid", d.uuid}, {"pci_bus_id", d.pci_bus_id}, {"model", d.model}, {"driver", d.driver}};
}

nlohmann::json lemon_json(const Lemon& l) {
  nlohmann::json j = l.device ? device_json(*l.device) : nlohmann::json{{"host", l.host}, {"model", l.model}};
  if (l.nodes > 0) j = {{"group", l.host}, {"nodes", l.nodes}, {"model", l.model}};
  j.update({{"failures", l.failures},
            {"device_hours", l.device_hours},
            {"expected", l.expected},
            {"p_value", l.p},
            {"q_value", l.q}});
  return j;
}

nlohmann::json bands_json(const std::vector<BandRate>& bands, const char* unit) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& b : bands) {
    out.push_back({{"model", b.model},
                   {unit, b.band},
                   {"devices", b.devices},
                   {"results", b.results},
                   {"device_hours", b.device_hours},
                   {"failures", b.failures},
                   {"failures_per_device_hour", b.rate},
                   {"failures_per_device_hour_ci95", {b.rate_lo, b.rate_hi}}});
  }
  return out;
}

}  // namespace

nlohmann::json fleet_json(const FleetTally& tally, const FleetAnalysis& a, const FleetOptions& options) {
  nlohmann::json votes = {{"total", a.votes.size()}};
  for (FleetVoteKind k : {FleetVoteKind::kAgreed, FleetVoteKind::kMajority, FleetVoteKind::kGolden,
                          FleetVoteKind::kInconclusive, FleetVoteKind::kNoPeers}) {
    votes[fleet_vote_kind_name(k)] = a.count(k);
  }
  nlohmann::json inconclusive = nlohmann::json::array();
  for (const auto& v : a.votes) {
    if (v.kind != FleetVoteKind::kInconclusive || inconclusive.size() >= kMaxListed) continue;
    nlohmann::json digests = nlohmann::json::array();
    for (const auto& [d, t] : v.tally->digests) {
      nlohmann::json members = nlohmann::json::array();
      for (const auto& m : t.members)
        members.push_back(fleet_device_key(tally.by_id[m.device]->host, tally.by_id[m.device]->uuid));
      digests.push_back({{"digest", digest_hex({d.second, d.first})}, {"devices", t.devices()}, {"members", members}});
    }
    inconclusive.push_back({{"class", v.tally->class_key}, {"probe", v.tally->probe}, {"digests", digests}});
  }
  nlohmann::json suspects = nlohmann::json::array();
  for (const auto& s : a.suspects) {
    if (suspects.size() >= kMaxListed) break;
    nlohmann::json j = device_json(*s.device);
    j.update({{"votes_lost", s.votes_lost},
              {"probes", s.probes},
              {"majority_size", s.largest_majority},
              {"own_checks_failed", s.own_checks_failed}});
    suspects.push_back(std::move(j));
  }
  nlohmann::json rates = nlohmann::json::array();
  for (const auto& r : a.rates) {
    nlohmann::json j = {{"model", r.model},
                        {"driver", r.driver},
                        {"family", r.family},
                        {"devices", r.devices},
                        {"device_hours", r.device_hours},
                        {"failures", r.failures},
                        {"failures_per_device_hour", r.rate},
                        {"failures_per_device_hour_ci95", {r.rate_lo, r.rate_hi}},
                        {"failures_per_device", static_cast<double>(r.failures) / static_cast<double>(r.devices)},
                        {"devices_failing", r.devices_failing},
                        {"fraction_failing", static_cast<double>(r.devices_failing) / static_cast<double>(r.devices)},
                        {"fraction_failing_ci95", {r.fraction_lo, r.fraction_hi}}};
    if (r.ttff_median_h >= 0) {
      j["time_to_first_failure_h"] = {{"median", r.ttff_median_h}, {"max", r.ttff_max_h}};
    }
    rates.push_back(std::move(j));
  }
  nlohmann::json lemon_devices = nlohmann::json::array(), lemon_nodes = nlohmann::json::array();
  for (const auto& l : a.lemon_devices) lemon_devices.push_back(lemon_json(l));
  for (const auto& l : a.lemon_nodes) lemon_nodes.push_back(lemon_json(l));
  nlohmann::json lemon_groups = nlohmann::json::array();
  for (const auto& l : a.lemon_groups) lemon_groups.push_back(lemon_json(l));
  nlohmann::json refailed = nlohmann::json::array();
  for (const FleetDevice* d : a.refailed) {
    nlohmann::json j = device_json(*d);
    j.update({{"released_at", d->released_at},
              {"failures_before_release", d->failures_before_release},
              {"failures_after_release", d->failures_after_release}});
    refailed.push_back(std::move(j));
  }
  nlohmann::json locations = nlohmann::json::array();
  for (const auto& l : a.locations) {
    if (locations.size() >= kMaxListed) break;
    nlohmann::json j = device_json(*l.device);
    j.update({{"sites", l.sites}, {"runs", l.runs}, {"pattern", l.pattern}});
    if (l.compute_sites > 0) {
      j["compute"] = {{"sites", l.compute_sites},
                      {"top_unit", l.top_unit},
                      {"top_unit_sites", l.top_unit_sites},
                      {"top_lane", l.top_lane},
                      {"top_lane_sites", l.top_lane_sites}};
    }
    if (l.memory_sites > 0) {
      j["memory"] = {{"sites", l.memory_sites},  {"top_row", l.top_row},   {"same_row", l.same_row},
                     {"same_bank", l.same_bank}, {"top_page", l.top_page}, {"same_page", l.same_page}};
    }
    if (l.top_bit >= 0) j["top_bit"] = {{"bit", l.top_bit}, {"sites", l.top_bit_sites}};
    locations.push_back(std::move(j));
  }
  nlohmann::json triggered = nlohmann::json::array();
  for (const auto& t : a.temperature_triggered) {
    nlohmann::json j = device_json(*t.device);
    j.update({{"trigger_c", t.trigger_c},
              {"failures", t.failures},
              {"results_at_or_above", t.results_at_or_above},
              {"passes_below", t.passes_below},
              {"p_value", t.p}});
    triggered.push_back(std::move(j));
  }
  nlohmann::json by_day = nlohmann::json::array();
  for (const auto& [key, n] : a.failures_by_day)
    by_day.push_back({{"model", key.first}, {"day", day_text(key.second)}, {"failures", n}});
  return {{"tool", "sdcprobe"},
          {"kind", "fleet_sdc"},
          {"exit_code", a.exit_code()},
          {"inputs",
           {{"files", tally.files},
            {"reports", tally.reports},
            {"histories", tally.histories},
            {"results", tally.results},
            {"skipped", tally.skipped},
            {"reports_with_injections", tally.with_injections},
            {"history_results_without_digests", tally.results_without_digests},
            {"devices", a.devices_tested},
            {"nodes", a.nodes_tested},
            {"groups", a.groups_tested},
            {"nodes_without_group", a.nodes_without_group}}},
          {"votes", votes},
          {"inconclusive", inconclusive},
          {"suspects", suspects},
          {"rates", rates},
          {"lemons",
           {{"test",
             "Poisson, each unit against its model and driver's rate without it; Benjamini-Hochberg (devices, nodes, "
             "topology groups each)"},
            {"fdr", options.fdr},
            {"devices", lemon_devices},
            {"nodes", lemon_nodes},
            {"groups", lemon_groups}}},
          {"refailed_after_release", refailed},
          {"address_model",
           {{"row_bytes", 1 << kRowShift},
            {"banks", kBanks},
            {"page_bytes", 1 << kPageShift},
            {"note", "byte offsets in the probe's buffer; bank = row mod banks is a hint (vendors hash addresses)"}}},
          {"locations", locations},
          {"locations_total", a.locations.size()},
          {"locations_cut", a.locations.size() > locations.size()},
          {"failures_by_day", by_day},
          {"burn_conditions",
           {{"note",
             "results with a burn's conditions (temperature, power against the enforced limit), by model and band of "
             "10 degrees C or 10% of the limit (lower bounds)"},
            {"temperature_bands", bands_json(a.temperature_bands, "band_c")},
            {"power_bands", bands_json(a.power_bands, "band_pct_of_limit")},
            {"temperature_triggered", triggered},
            {"trigger_rule",
             "every failure at or above trigger_c (its coolest failing result's degree), passes below it, at least " +
                 std::to_string(kTriggerMinFailures) +
                 " failures, and p <= 0.01: the chance that failures spread at random over its results miss every "
                 "one below trigger_c"}}}};
}

std::string fleet_markdown(const FleetTally& tally, const FleetAnalysis& a, const FleetOptions& options) {
  std::ostringstream md;
  md << "# Fleet SDC\n\n"
     << tally.reports << " reports and " << tally.histories << " histories: " << tally.results << " results ("
     << tally.skipped << " skipped) on " << a.devices_tested << " devices of " << a.nodes_tested << " nodes";
  if (tally.with_injections > 0) md << "; " << tally.with_injections << " reports ran with injected faults";
  if (tally.results_without_digests > 0) {
    md << "; " << tally.results_without_digests
       << " history results predate the digests in histories (schema 3) and count in the rates, not the votes";
  }
  md << ".\n\n## Consensus\n\n"
     << a.votes.size() << " votes: " << a.count(FleetVoteKind::kAgreed) << " agreed, "
     << a.count(FleetVoteKind::kMajority) << " by majority, " << a.count(FleetVoteKind::kGolden) << " by golden, "
     << a.count(FleetVoteKind::kInconclusive) << " inconclusive, " << a.count(FleetVoteKind::kNoPeers)
     << " with one device only (no evidence).\n\n";
  if (a.suspects.empty()) {
    md << "No suspect.\n\n";
  } else {
    md << "| host | UUID | PCI bus id | model | votes lost | majority | probes | own checks |\n"
       << "| --- | --- | --- | --- | ---: | ---: | --- | --- |\n";
    for (const auto& s : a.suspects) {
      std::string probes;
      for (const auto& p : s.probes) probes += (probes.empty() ? "" : ", ") + p;
      md << "| " << cell(s.device->host) << " | " << cell(s.device->uuid) << " | " << cell(s.device->pci_bus_id)
         << " | " << cell(s.device->model) << " | " << s.votes_lost << " | " << s.largest_majority << " | "
         << cell(probes) << " | " << (s.own_checks_failed ? "failed too" : "passed") << " |\n";
    }
    md << "\n";
  }
  md << "## Rates\n\nFailures per device-hour tested (Garwood's exact 95% interval) and devices ever failing "
        "(Clopper-Pearson's).\n\n| model | driver | family | devices | device-hours | failures | per device-hour [95%] "
        "| "
        "devices failing [95%] | first failure after (median h) |\n| --- | --- | --- | ---: | ---: | ---: | --- | --- "
        "| ---: |\n";
  for (const auto& r : a.rates) {
    md << "| " << cell(r.model) << " | " << cell(r.driver) << " | " << r.family << " | " << r.devices << " | "
       << number(r.device_hours, "%.1f") << " | " << r.failures << " | " << number(r.rate) << " [" << number(r.rate_lo)
       << ", " << number(r.rate_hi) << "] | " << r.devices_failing << " [" << number(100 * r.fraction_lo) << "%, "
       << number(100 * r.fraction_hi) << "%] | " << (r.ttff_median_h >= 0 ? number(r.ttff_median_h, "%.1f") : "-")
       << " |\n";
  }
  md << "\n## Lemons\n\nPoisson test of each device and node against its model and driver's rate without it, at "
        "a Benjamini-Hochberg false-discovery rate of "
     << options.fdr << ".\n\n";
  if (!options.topology.empty()) {
    md << a.groups_tested
       << " topology groups (racks, switches, power domains) tested as nodes are, in one "
          "Benjamini-Hochberg over every group";
    if (a.nodes_without_group > 0)
      md << "; " << a.nodes_without_group << " tested nodes are in no group of the topology";
    md << ".\n\n";
  }
  if (a.lemon_devices.empty() && a.lemon_nodes.empty() && a.lemon_groups.empty()) md << "No lemon.\n";
  for (const auto* list : {&a.lemon_devices, &a.lemon_nodes, &a.lemon_groups}) {
    for (const auto& l : *list) {
      const std::string unit = l.device  ? "device " + l.host + " " + l.device->uuid
                               : l.nodes ? "group " + l.host + " (" + std::to_string(l.nodes) + " nodes)"
                                         : "node " + l.host;
      md << "- " << unit << ": " << l.failures << " failures in " << number(l.device_hours, "%.1f") << " device-hours, "
         << number(l.expected) << " expected (p " << number(l.p) << ", q " << number(l.q) << ")\n";
    }
  }
  for (const FleetDevice* d : a.refailed) {
    md << "- " << d->host << " " << d->uuid << " failed again after its release (" << d->failures_before_release
       << " failures before, " << d->failures_after_release << " after)\n";
  }
  if (!a.locations.empty()) {
    md << "\n## Where on the chip\n\nMemory offsets in rows of " << (1 << kRowShift) << " bytes, " << kBanks
       << " banks per row interleave (a hint), pages of " << (1 << kPageShift) << " bytes.\n\n"
       << "| host | UUID | sites | runs | pattern | top SM/core | top bit | same row | same page |\n"
       << "| --- | --- | ---: | ---: | --- | --- | --- | ---: | ---: |\n";
    for (const auto& l : a.locations) {
      md << "| " << cell(l.device->host) << " | " << cell(l.device->uuid) << " | " << l.sites << " | " << l.runs
         << " | " << l.pattern << " | "
         << (l.top_unit >= 0 ? std::to_string(l.top_unit) + " (" + std::to_string(l.top_unit_sites) + ")" : "-")
         << " | " << (l.top_bit >= 0 ? std::to_string(l.top_bit) + " (" + std::to_string(l.top_bit_sites) + ")" : "-")
         << " | " << l.same_row << " | " << l.same_page << " |\n";
    }
  }
  if (!a.temperature_bands.empty()) {
    md << "\n## Temperature\n\nBurns by the GPU's temperature (10 degree bands): failures per device-hour, "
          "Garwood's 95% interval.\n\n| model | from C | devices | device-hours | failures | per device-hour (95%) |\n"
          "| --- | ---: | ---: | ---: | ---: | --- |\n";
    for (const auto& b : a.temperature_bands) {
      md << "| " << cell(b.model) << " | " << b.band << " | " << b.devices << " | " << number(b.device_hours, "%.1f")
         << " | " << b.failures << " | " << number(b.rate) << " (" << number(b.rate_lo) << "-" << number(b.rate_hi)
         << ") |\n";
    }
    for (const auto& t : a.temperature_triggered) {
      md << "- " << t.device->host << " " << t.device->uuid << " fails only from " << t.trigger_c << " C: "
         << t.failures << " failures in " << t.results_at_or_above << " burns at or above it, " << t.passes_below
         << " passes below (p " << number(t.p) << ")\n";
    }
  }
  return md.str();
}

std::string fleet_svg(const FleetAnalysis& a) {
  constexpr int kWidth = 900, kPlotH = 240, kLeft = 60, kTop = 40;
  std::set<std::string> models;
  int64_t first = INT64_MAX, last = INT64_MIN;
  uint64_t peak = 1;
  for (const auto& [key, n] : a.failures_by_day) {
    models.insert(key.first);
    first = std::min(first, key.second);
    last = std::max(last, key.second);
    peak = std::max(peak, n);
  }
  const size_t listed = std::min<size_t>(a.suspects.size(), 10);
  const int height = kTop + kPlotH + 60 + 20 * static_cast<int>(models.size() + listed) + 40;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<text x=\"20\" y=\"24\" font-size=\"16\">Failures per model per day (own checks and lost votes)</text>\n"
    << "<line x1=\"" << kLeft << "\" y1=\"" << kTop + kPlotH << "\" x2=\"" << kWidth - 20 << "\" y2=\"" << kTop + kPlotH
    << "\" stroke=\"#888\"/>\n<text x=\"10\" y=\"" << kTop + 10 << "\">" << peak << "</text>\n";
  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  const double span = last > first ? static_cast<double>(last - first) : 1.0;
  int m = 0;
  for (const auto& model : models) {
    const char* colour = colours[m % 6];
    std::string points;
    for (const auto& [key, n] : a.failures_by_day) {
      if (key.first != model) continue;
      const double x = kLeft + (kWidth - 20 - kLeft) * (static_cast<double>(key.second - first) / span);
      const double y = kTop + kPlotH - kPlotH * static_cast<double>(n) / static_cast<double>(peak);
      points += number(x, "%.1f") + "," + number(y, "%.1f") + " ";
      s << "<circle cx=\"" << number(x, "%.1f") << "\" cy=\"" << number(y, "%.1f") << "\" r=\"3\" fill=\"" << colour
        << "\"/>\n";
    }
    s << "<polyline fill=\"none\" stroke=\"" << colour << "\" points=\"" << points << "\"/>\n"
      << "<text x=\"" << kLeft << "\" y=\"" << kTop + kPlotH + 40 + 20 * m << "\" fill=\"" << colour << "\">"
      << escape_xml(model) << "</text>\n";
    ++m;
  }
  if (first <= last) {
    s << "<text x=\"" << kLeft << "\" y=\"" << kTop + kPlotH + 16 << "\">" << day_text(first) << "</text>\n"
      << "<text x=\"" << kWidth - 100 << "\" y=\"" << kTop + kPlotH + 16 << "\">" << day_text(last) << "</text>\n";
  }
  int y = kTop + kPlotH + 50 + 20 * m;
  s << "<text x=\"20\" y=\"" << y << "\" font-size=\"16\">Top suspects</text>\n";
  if (listed == 0) s << "<text x=\"20\" y=\"" << y + 20 << "\">none</text>\n";
  for (size_t i = 0; i < listed; ++i) {
    const FleetSuspect& x = a.suspects[i];
    y += 20;
    s << "<text x=\"20\" y=\"" << y << "\">"
      << escape_xml(x.device->host + " " + x.device->uuid + " " + x.device->pci_bus_id + ": " +
                    std::to_string(x.votes_lost) + " votes lost against majorities of up to " +
                    std::to_string(x.largest_majority))
      << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

std::string fleet_prometheus(const FleetAnalysis& a) {
  std::ostringstream p;
  const auto head = [&](const char* name, const char* help) {
    p << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n";
  };
  const auto labels = [](const FleetRate& r) {
    return "{modelName=\"" + escape_label(r.model) + "\",driver=\"" + escape_label(r.driver) + "\",family=\"" +
           escape_label(r.family) + "\"}";
  };
  head("sdcprobe_fleet_failures_per_device_hour", "Failures per device-hour tested, fleet-wide.");
  for (const auto& r : a.rates) p << "sdcprobe_fleet_failures_per_device_hour" << labels(r) << " " << r.rate << "\n";
  head("sdcprobe_fleet_failures_per_device_hour_upper95", "Garwood exact 95% upper bound of the rate.");
  for (const auto& r : a.rates)
    p << "sdcprobe_fleet_failures_per_device_hour_upper95" << labels(r) << " " << r.rate_hi << "\n";
  head("sdcprobe_fleet_devices", "Devices tested.");
  for (const auto& r : a.rates) p << "sdcprobe_fleet_devices" << labels(r) << " " << r.devices << "\n";
  head("sdcprobe_fleet_devices_failing", "Devices that ever failed.");
  for (const auto& r : a.rates) p << "sdcprobe_fleet_devices_failing" << labels(r) << " " << r.devices_failing << "\n";
  head("sdcprobe_fleet_suspects", "Devices in the minority of a fleet-wide vote.");
  p << "sdcprobe_fleet_suspects " << a.suspects.size() << "\n";
  head("sdcprobe_fleet_lemon_devices", "Devices failing improbably often at the stated false-discovery rate.");
  p << "sdcprobe_fleet_lemon_devices " << a.lemon_devices.size() << "\n";
  head("sdcprobe_fleet_lemon_nodes", "Nodes failing improbably often at the stated false-discovery rate.");
  p << "sdcprobe_fleet_lemon_nodes " << a.lemon_nodes.size() << "\n";
  head("sdcprobe_fleet_lemon_groups", "Topology groups failing improbably often at the stated false-discovery rate.");
  p << "sdcprobe_fleet_lemon_groups " << a.lemon_groups.size() << "\n";
  head("sdcprobe_fleet_inconclusive_votes", "Votes without a strict majority.");
  p << "sdcprobe_fleet_inconclusive_votes " << a.count(FleetVoteKind::kInconclusive) << "\n";
  return p.str();
}

}  // namespace sdc
