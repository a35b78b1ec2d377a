// A strict reader of the Prometheus text exposition format, so that metric tests never pass just
// because promtool is missing. Returns the samples by series ("name{labels}") or throws naming the line.
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace sdc::test {

inline bool metric_name_ok(const std::string& n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_' || n[0] == ':')) return false;
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':')) return false;
  }
  return true;
}

inline std::map<std::string, double> parse_prometheus_text(const std::string& text) {
  if (text.empty() || text.back() != '\n') throw std::runtime_error("does not end with a newline (truncated?)");
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
  std::set<std::string> finished;  // families whose samples are over: they may not reappear
  std::string current;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("line " + std::to_string(number) + ": " + why + ": " + line);
  };
  auto enter = [&](const std::string& family) {
    if (family == current) return;
    if (finished.count(family)) fail("family " + family + " is not contiguous");
    if (!current.empty()) finished.insert(current);
    current = family;
  };
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, name, rest;
      words >> hash >> kind >> name;
      if (kind != "HELP" && kind != "TYPE") continue;
      if (!metric_name_ok(name)) fail("bad metric name");
      enter(name);
      if (kind == "TYPE") {
        words >> rest;
        if (rest != "counter" && rest != "gauge" && rest != "histogram" && rest != "summary" && rest != "untyped") {
          fail("bad type");
        }
        if (types.count(name)) fail("second TYPE");
        types[name] = rest;
      }
      continue;
    }
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    const std::string name = line.substr(0, i);
    if (!metric_name_ok(name)) fail("bad metric name");
    if (!types.count(name)) fail("sample before its TYPE");
    enter(name);
    std::string labels;
    if (i < line.size() && line[i] == '{') {
      const size_t open = i++;
      std::set<std::string> seen;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) fail("label without '='");
        const std::string label = line.substr(i, eq - i);
        if (!metric_name_ok(label) || label.find(':') != std::string::npos) fail("bad label name '" + label + "'");
        if (!seen.insert(label).second) fail("repeated label " + label);
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') fail("label value not quoted");
        ++i;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            if (i + 1 >= line.size() || std::string("\\\"n").find(line[i + 1]) == std::string::npos) fail("bad escape");
            ++i;
          }
          ++i;
        }
        if (i >= line.size()) fail("unterminated label value");
        ++i;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) fail("unterminated label set");
      labels = line.substr(open, i - open + 1);
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') fail("no value");
    const std::string value = line.substr(i + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') fail("value is not a number");
    if (!samples.emplace(name + labels, v).second) fail("duplicate series");
  }
  return samples;
}

}  // namespace sdc::test
