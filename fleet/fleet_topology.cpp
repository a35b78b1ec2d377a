#include "fleet/fleet_topology.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "host/error.hpp"

namespace sdc {
namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

void check_name(std::string_view s, const char* what) {
  if (s.empty()) throw std::invalid_argument(std::string("empty ") + what);
  for (char c : s) {
    if (!name_char(c)) throw std::invalid_argument(std::string(what) + " '" + std::string(s) + "': bad character");
  }
}

// The commas of `s` outside brackets split it.
std::vector<std::string_view> split_top_level(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']') --depth;
    if (depth < 0 || depth > 1) throw std::invalid_argument("unbalanced or nested '['");
    if (s[i] == ',' && depth == 0) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) throw std::invalid_argument("unbalanced '['");
  parts.push_back(s.substr(start));
  return parts;
}

uint64_t parse_index(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) throw std::invalid_argument("bad index '" + std::string(digits) + "'");
  uint64_t v = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      throw std::invalid_argument("bad index '" + std::string(digits) + "'");
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// One name with brackets: the first bracket expanded, the rest by recursion.
void expand_one(std::string_view item, std::vector<std::string>& out) {
  const size_t open = item.find('[');
  if (open == std::string_view::npos) {
    check_name(item, "host");
    out.emplace_back(item);
    return;
  }
  const size_t close = item.find(']', open);
  const std::string prefix(item.substr(0, open));
  if (!prefix.empty()) check_name(prefix, "host prefix");
  const std::string_view ranges = item.substr(open + 1, close - open - 1), rest = item.substr(close + 1);
  if (ranges.empty()) throw std::invalid_argument("empty '[]'");
  std::vector<std::string> tails;
  if (rest.empty()) {
    tails.emplace_back();
  } else {
    expand_one(rest, tails);
  }
  size_t from = 0;
  while (from <= ranges.size()) {
    size_t comma = ranges.find(',', from);
    if (comma == std::string_view::npos) comma = ranges.size();
    const std::string_view range = ranges.substr(from, comma - from);
    const size_t dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const std::string_view hi_text = dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    const uint64_t lo = parse_index(lo_text), hi = parse_index(hi_text);
    if (hi < lo) throw std::invalid_argument("range '" + std::string(range) + "' runs backwards");
    const size_t width = lo_text.size();  // "01-08": two digits, zero padded
    if ((hi - lo + 1) * tails.size() > kMaxHostlistHosts ||
        out.size() + (hi - lo + 1) * tails.size() > kMaxHostlistHosts) {
      throw std::invalid_argument("more than " + std::to_string(kMaxHostlistHosts) + " hosts");
    }
    for (uint64_t i = lo; i <= hi; ++i) {
      std::string index = std::to_string(i);
      if (index.size() < width) index.insert(0, width - index.size(), '0');
      for (const auto& tail : tails) out.push_back(prefix + index + tail);
    }
    from = comma + 1;
  }
}

std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  std::istringstream in{std::string(line)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expression) {
  if (expression.empty()) throw std::invalid_argument("empty host list");
  std::vector<std::string> out;
  for (std::string_view item : split_top_level(expression)) expand_one(item, out);
  return out;
}

Topology parse_topology(const std::string& name, std::string_view text) {
  Topology topology;
  // topology.conf's switches: their own nodes, and the lower switches they link (with the line that
  // named them first, for errors).
  std::map<std::string, std::vector<std::string>> switch_nodes;
  std::map<std::string, std::vector<std::pair<std::string, size_t>>> switch_children;
  size_t line_no = 0, start = 0;
  const auto fail = [&](size_t line, const std::string& why) {
    throw InputError(name + ": line " + std::to_string(line) + ": " + why);
  };
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    line = line.substr(0, line.find('#'));
    const std::vector<std::string> w = words(line);
    if (w.empty()) continue;
    try {
      if (w[0].rfind("SwitchName=", 0) == 0) {
        // SwitchName=S Nodes=... and/or Switches=...; LinkSpeed and other keys are ignored.
        const std::string sw = w[0].substr(11);
        check_name(sw, "switch name");
        auto& nodes = switch_nodes[sw];
        auto& children = switch_children[sw];
        for (size_t i = 1; i < w.size(); ++i) {
          if (w[i].rfind("Nodes=", 0) == 0) {
            for (auto& host : expand_hostlist(w[i].substr(6))) nodes.push_back(std::move(host));
          } else if (w[i].rfind("Switches=", 0) == 0) {
            for (auto& child : expand_hostlist(w[i].substr(9))) children.emplace_back(std::move(child), line_no);
          }
        }
        continue;
      }
      check_name(w[0], "node");
      if (w.size() < 2) fail(line_no, "node '" + w[0] + "' names no group (expected KIND=NAME, e.g. rack=R1)");
      auto& groups = topology[w[0]];
      for (size_t i = 1; i < w.size(); ++i) {
        const size_t eq = w[i].find('=');
        if (eq == std::string::npos) fail(line_no, "'" + w[i] + "' is not KIND=NAME");
        check_name(w[i].substr(0, eq), "group kind");
        check_name(w[i].substr(eq + 1), "group name");
        groups.push_back(w[i]);
      }
    } catch (const std::invalid_argument& e) {
      fail(line_no, e.what());
    }
  }
  // Each switch holds the nodes below it, through any depth of links (a cycle adds nothing twice).
  for (const auto& [sw, own] : switch_nodes) {
    std::set<std::string> seen = {sw};
    std::vector<std::string> pending = {sw};
    while (!pending.empty()) {
      const std::string at = pending.back();
      pending.pop_back();
      for (const auto& host : switch_nodes.at(at)) topology[host].push_back("switch=" + sw);
      for (const auto& [child, line] : switch_children.at(at)) {
        if (switch_nodes.count(child) == 0) fail(line, "switch '" + child + "' is not defined");
        if (seen.insert(child).second) pending.push_back(child);
      }
    }
  }
  if (topology.empty()) throw InputError(name + ": no node in it");
  for (auto& [host, groups] : topology) {
    std::sort(groups.begin(), groups.end());
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  }
  return topology;
}

Topology load_topology(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("--topology " + path + ": cannot read it");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_topology("--topology " + path, text.str());
}

}  // namespace sdc
