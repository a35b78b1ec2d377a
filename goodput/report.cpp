#include "goodput/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "host/time.hpp"

namespace sdc::goodput {
namespace {

std::string printf_string(const char* format, double a, double b = 0, double c = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

std::string percent(int64_t part, int64_t whole) {
  return whole > 0 ? printf_string("%.2f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

std::string pad(std::string s, size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// Loss categories, largest first (ties in the fixed category order).
std::vector<Category> ranked(const Breakdown& b) {
  std::vector<Category> order(kCategories.begin(), kCategories.end());
  std::stable_sort(order.begin(), order.end(), [&](Category x, Category y) { return b[x].ns > b[y].ns; });
  return order;
}

nlohmann::ordered_json breakdown_object(const Breakdown& b) {
  nlohmann::ordered_json j;
  j["wall_ns"] = b.wall_ns;
  j["productive_ns"] = b.productive_ns;
  j["ettr"] = b.ettr();
  j["sdc_lost_ns"] = b.sdc_lost_ns();
  nlohmann::ordered_json cats = nlohmann::ordered_json::object();
  for (Category c : kCategories) {
    cats[std::string(category_key(c))] = {{"ns", b[c].ns}, {"sdc_ns", b[c].sdc_ns}};
  }
  j["categories"] = cats;
  return j;
}

std::string escape_xml(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '&') {
      out += "&amp;";
    } else if (ch == '<') {
      out += "&lt;";
    } else if (ch == '>') {
      out += "&gt;";
    } else {
      out += ch;
    }
  }
  return out;
}

// Colour-blind-safe palette (Okabe-Ito); productive is green, SDC shares are drawn darker.
const char* colour(int index) {
  static const char* kColours[] = {"#009E73", "#999999", "#E69F00", "#56B4E9", "#D55E00", "#CC79A7"};
  return kColours[index];
}
const char* dark_colour(int index) {
  static const char* kDark[] = {"#006B4F", "#555555", "#8F6300", "#1F6E99", "#7F3800", "#8A3F6E"};
  return kDark[index];
}

}  // namespace

std::string text_report(const Analysis& a, bool diagnostics) {
  const Breakdown& b = a.breakdown;
  std::ostringstream out;
  out << "Effective training time ratio (ETTR): " << printf_string("%.4f", b.ettr()) << "  (productive "
      << format_duration_ns(b.productive_ns) << " of " << format_duration_ns(b.wall_ns) << " wall)\n\n";
  out << pad("category", 22) << pad("time", 16, true) << pad("share", 9, true) << pad("of it SDC", 16, true) << "\n";
  out << pad("productive", 22) << pad(format_duration_ns(b.productive_ns), 16, true)
      << pad(percent(b.productive_ns, b.wall_ns), 9, true) << "\n";
  for (Category c : kCategories) {
    out << pad(std::string(category_title(c)), 22) << pad(format_duration_ns(b[c].ns), 16, true)
        << pad(percent(b[c].ns, b.wall_ns), 9, true) << pad(format_duration_ns(b[c].sdc_ns), 16, true) << "\n";
  }
  out << pad("wall", 22) << pad(format_duration_ns(b.wall_ns), 16, true) << pad(percent(b.wall_ns, b.wall_ns), 9, true)
      << "\n\n";
  out << "SDC time lost: " << format_duration_ns(b.sdc_lost_ns()) << " (" << percent(b.sdc_lost_ns(), b.wall_ns)
      << " of wall; probes, SDC triage, restarts and rework after SDC)\n\n";
  out << "Work list (largest loss first):\n";
  int rank = 1;
  for (Category c : ranked(b)) {
    if (b[c].ns == 0) continue;
    out << "  " << rank++ << ". " << category_title(c) << ": " << format_duration_ns(b[c].ns) << " ("
        << percent(b[c].ns, b.wall_ns) << ")\n     owner: " << category_owner(c)
        << "\n     lever: " << category_lever(c) << "\n";
  }
  if (rank == 1) out << "  nothing lost\n";
  if (!diagnostics) return out.str();
  out << "\nDiagnostics: " << b.gap_count << " gaps (" << format_duration_ns(b.gap_ns) << "), " << b.rollbacks
      << " rollbacks, " << a.stats.events << " events, " << a.stats.skipped << " lines skipped\n";
  if (b.overlapped_probe_ns > 0) {
    out << "  overlapped probe time: " << format_duration_ns(b.overlapped_probe_ns)
        << " (SDC probes the loop did not wait for; the steps they overlapped keep their labels)\n";
  }
  if (a.stats.skipped > 0) out << "  first skipped: " << a.stats.first_skip << "\n";
  return out.str();
}

std::string json_breakdown(const Breakdown& b) { return breakdown_object(b).dump(2) + "\n"; }

nlohmann::ordered_json json_report(const Analysis& a) {
  nlohmann::ordered_json j = breakdown_object(a.breakdown);
  j["diagnostics"] = {{"gaps", {{"count", a.breakdown.gap_count}, {"ns", a.breakdown.gap_ns}}},
                      {"rollbacks", a.breakdown.rollbacks},
                      {"overlapped_probe_ns", a.breakdown.overlapped_probe_ns},
                      {"events", a.stats.events},
                      {"skipped_lines", a.stats.skipped}};
  return j;
}

std::string svg_report(const Breakdown& b) {
  constexpr double kWidth = 960, kLeft = 200, kBarWidth = 400;
  const std::vector<Category> order = ranked(b);
  const double height = 250 + 44.0 * kCategoryCount;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << kWidth << " " << height << "\" font-family=\"sans-serif\" font-size=\"14\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"20\" y=\"32\" font-size=\"20\" font-weight=\"bold\">Where the wall time went: ETTR "
    << printf_string("%.1f%%", 100.0 * b.ettr()) << "</text>\n";
  s << "<text x=\"20\" y=\"54\" fill=\"#444\">wall " << escape_xml(format_duration_ns(b.wall_ns)) << ", productive "
    << escape_xml(format_duration_ns(b.productive_ns)) << ", lost " << escape_xml(format_duration_ns(b.lost_ns()))
    << ", of it SDC " << escape_xml(format_duration_ns(b.sdc_lost_ns())) << "</text>\n";

  // 1. The whole wall time as one stacked bar.
  const double wall = b.wall_ns > 0 ? static_cast<double>(b.wall_ns) : 1.0;
  double x = 20;
  const double full = kWidth - 40;
  auto segment = [&](int index, int64_t ns, const std::string& title) {
    const double w = full * static_cast<double>(ns) / wall;
    s << "<rect x=\"" << x << "\" y=\"72\" width=\"" << w << "\" height=\"36\" fill=\"" << colour(index) << "\"><title>"
      << escape_xml(title) << "</title></rect>\n";
    x += w;
  };
  segment(0, b.productive_ns, "productive " + format_duration_ns(b.productive_ns));
  for (Category c : kCategories) {
    segment(static_cast<int>(c) + 1, b[c].ns, std::string(category_title(c)) + " " + format_duration_ns(b[c].ns));
  }
  // Legend under the bar.
  double lx = 20;
  for (int i = 0; i <= static_cast<int>(kCategoryCount); ++i) {
    const std::string name =
        i == 0 ? "productive" : std::string(category_title(kCategories[static_cast<size_t>(i - 1)]));
    s << "<rect x=\"" << lx << "\" y=\"118\" width=\"12\" height=\"12\" fill=\"" << colour(i) << "\"/>";
    s << "<text x=\"" << lx + 16 << "\" y=\"129\" font-size=\"12\">" << escape_xml(name) << "</text>\n";
    lx += 26 + 7.2 * static_cast<double>(name.size());
  }

  // 2. The losses, ranked, on their own scale, each with its SDC share drawn darker.
  s << "<text x=\"20\" y=\"170\" font-size=\"16\" font-weight=\"bold\">Losses, largest first (darker: SDC "
       "share)</text>\n";
  int64_t largest = 1;
  for (Category c : kCategories) largest = std::max(largest, b[c].ns);
  double y = 186;
  for (Category c : order) {
    const int index = static_cast<int>(c) + 1;
    const double w = kBarWidth * static_cast<double>(b[c].ns) / static_cast<double>(largest);
    const double ws = kBarWidth * static_cast<double>(b[c].sdc_ns) / static_cast<double>(largest);
    s << "<text x=\"" << kLeft - 10 << "\" y=\"" << y + 20 << "\" text-anchor=\"end\">" << escape_xml(category_title(c))
      << "</text>\n";
    s << "<rect x=\"" << kLeft << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"30\" fill=\"" << colour(index)
      << "\"/>\n";
    s << "<rect x=\"" << kLeft << "\" y=\"" << y << "\" width=\"" << ws << "\" height=\"30\" fill=\""
      << dark_colour(index) << "\"/>\n";
    std::string label = format_duration_ns(b[c].ns) + " = " + percent(b[c].ns, b.wall_ns) + " of wall";
    if (b[c].sdc_ns > 0) label += "  (SDC " + format_duration_ns(b[c].sdc_ns) + ")";
    s << "<text x=\"" << kLeft + w + 8 << "\" y=\"" << y + 20 << "\">" << escape_xml(label) << "</text>\n";
    y += 44;
  }
  s << "<text x=\"20\" y=\"" << y + 16
    << "\" font-size=\"12\" fill=\"#444\">owners: queue: scheduler; detection &amp; "
       "teardown: monitoring; restart &amp; warm-up: launcher;</text>\n";
  s << "<text x=\"20\" y=\"" << y + 32
    << "\" font-size=\"12\" fill=\"#444\">rework: checkpoint cadence, detection "
       "latency; blocking overhead: I/O, data, this tool (probes)</text>\n";
  s << "</svg>\n";
  return s.str();
}

}  // namespace sdc::goodput
