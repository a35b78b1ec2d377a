// What a parser's answer must satisfy, shared by the seeded fuzz tests (fuzz_test.cpp) and the
// libFuzzer harnesses (*_fuzzer.cpp): written independently of the parsers they check.
#pragma once

#include <cctype>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>

namespace sdc::fuzz {

// host/parse_number.hpp's integer grammar: decimal without leading zeros, or 0x hex, fitting 64 bits.
inline std::optional<uint64_t> reference_unsigned(const std::string& s) {
  static const std::regex dec("^(0|[1-9][0-9]*)$"), hex("^0[xX][0-9a-fA-F]+$");
  const bool is_hex = std::regex_match(s, hex);
  if (!is_hex && !std::regex_match(s, dec)) return std::nullopt;
  unsigned __int128 v = 0;
  for (char c : s.substr(is_hex ? 2 : 0)) {
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10);
    v = v * (is_hex ? 16 : 10) + static_cast<unsigned>(d);
    if (v > UINT64_MAX) return std::nullopt;
  }
  return static_cast<uint64_t>(v);
}

// A byte count: the integer grammar, then nothing or one of K, M, G (x 2^10, 2^20, 2^30), fitting 64 bits.
inline std::optional<uint64_t> reference_size(const std::string& s) {
  int shift = 0;
  std::string digits = s;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M' || s.back() == 'G')) {
    shift = s.back() == 'K' ? 10 : s.back() == 'M' ? 20 : 30;
    digits.pop_back();
  }
  const auto v = reference_unsigned(digits);
  if (!v || (static_cast<unsigned __int128>(*v) << shift) > UINT64_MAX) return std::nullopt;
  return *v << shift;
}

// strtod's syntax without white space, "inf", "nan" or hex floats.
inline bool real_syntax(const std::string& s) {
  static const std::regex real(R"(^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$)");
  return std::regex_match(s, real);
}

// A sysfs attribute holding one hex number: "0x" (or "0X") and 1 to 8 hex digits, with spaces, tabs,
// carriage returns and newlines around it.
inline std::optional<unsigned> reference_sysfs_hex(const std::string& text) {
  // Not a regex: libstdc++'s recurses once per character, and a fuzzed value can be long.
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return std::nullopt;
  const std::string s = text.substr(first, text.find_last_not_of(" \t\r\n") + 1 - first);
  if (s.size() < 3 || s.size() > 10 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return std::nullopt;
  if (s.find_first_not_of("0123456789abcdefABCDEF", 2) != std::string::npos) return std::nullopt;
  return static_cast<unsigned>(std::stoul(s.substr(2), nullptr, 16));
}

// A PCI bus id as CUDA prints it: 00000000:3B:00.0, device at most 0x1f, function at most 7.
inline bool canonical_pci_bus_id(const std::string& id) {
  static const std::regex canonical("^[0-9A-F]{8}:[0-9A-F]{2}:[01][0-9A-F]\\.[0-7]$");
  return std::regex_match(id, canonical);
}

// An --inject error names the spec's field, clause or fault.
inline bool names_an_inject_field(const std::string& message) {
  static const std::regex named(
      R"(^bad --inject spec( '[\s\S]*')?: (field '[\s\S]*'|clause [0-9]+ is empty|empty|control character))");
  return std::regex_search(message, named);
}

// A golden file's error: "--golden PATH: <field>: ...".
inline bool names_a_golden_field(const std::string& message, const std::string& path) {
  static const std::regex field(
      R"(^(\(file\)|format|version|seed|level|size_bytes|iterations|entries(\[[0-9]+\](\.(class|probe|digest))?)?): .+)");
  const std::string prefix = "--golden " + path + ": ";
  return message.rfind(prefix, 0) == 0 && std::regex_search(message.substr(prefix.size()), field);
}

// A goodput reader's error: "line N: ..." with N in [1, lines].
inline bool names_a_line(const std::string& message, uint64_t lines) {
  static const std::regex line("^line ([0-9]{1,19}): .");
  std::smatch m;
  if (!std::regex_search(message, m, line)) return false;
  const uint64_t n = std::stoull(m[1].str());
  return n >= 1 && n <= lines;
}

// A topology's error: "NAME: line N: ..." with N in [1, lines], or "NAME: no node in it".
inline bool names_a_topology_line(const std::string& message, const std::string& name, uint64_t lines) {
  if (message.rfind(name + ": ", 0) != 0) return false;
  const std::string rest = message.substr(name.size() + 2);
  if (rest == "no node in it") return true;
  static const std::regex line("^line ([0-9]{1,19}): .");
  std::smatch m;
  if (!std::regex_search(rest, m, line)) return false;
  const uint64_t n = std::stoull(m[1].str());
  return n >= 1 && n <= lines;
}

// A parsed topology: non-empty host names of [A-Za-z0-9._-], each with groups "kind=name" of the same.
template <typename Topology>
inline bool topology_well_formed(const Topology& t) {
  static const std::regex host("^[A-Za-z0-9._-]+$"), group("^[A-Za-z0-9._-]+=[A-Za-z0-9._-]+$");
  for (const auto& [h, groups] : t) {
    if (!std::regex_match(h, host) || groups.empty()) return false;
    for (const auto& g : groups) {
      if (!std::regex_match(g, group)) return false;
    }
  }
  return !t.empty();
}

}  // namespace sdc::fuzz
