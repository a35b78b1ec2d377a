// The goodput reader against reading each line of a log alone, shared by the seeded fuzz test
// (goodput_fuzz_test.cpp) and the reader's libFuzzer harness. The reader reads a piece of a log's
// lines at once and falls back to one line at a time; both must give the same events from the same
// lines, and the same error or skipped lines.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "goodput/event.hpp"
#include "host/error.hpp"

namespace sdc::fuzz {

using goodput::Event;
using goodput::EventReader;

struct Reading {
  std::vector<std::pair<uint64_t, Event>> events;
  std::string error;
  uint64_t skipped = 0;
  std::string first_skip;
};

// The sink refuses some events, as the ledger would.
inline bool refused(const Event& e) { return e.t % 7 == 3; }

inline bool same(const std::shared_ptr<const goodput::RankRecord>& a,
                 const std::shared_ptr<const goodput::RankRecord>& b) {
  if (!a || !b) return !a && !b;
  return a->host == b->host && a->device == b->device && a->pci_bus_id == b->pci_bus_id;
}

inline bool same(const Event& a, const Event& b) {
  return a.t == b.t && a.kind == b.kind && a.step == b.step && a.last_good_step == b.last_good_step &&
         a.rank == b.rank && a.blocking == b.blocking && a.slurm_restart == b.slurm_restart && a.attempt == b.attempt &&
         same(a.where, b.where);
}

inline bool same(const Reading& a, const Reading& b) {
  return a.error == b.error && a.skipped == b.skipped && a.first_skip == b.first_skip &&
         std::equal(a.events.begin(), a.events.end(), b.events.begin(), b.events.end(),
                    [](const auto& x, const auto& y) { return x.first == y.first && same(x.second, y.second); });
}

inline Reading read_each_line_alone(const std::string& log, bool lenient) {
  Reading out;
  uint64_t number = 0;
  for (size_t at = 0; at < log.size();) {
    size_t nl = log.find('\n', at);
    if (nl == std::string::npos) nl = log.size();
    std::string line = log.substr(at, nl - at);
    at = nl + 1;
    ++number;
    if (line.size() > (1 << 20)) {  // too long to be an event, lenient or not
      out.error = "line " + std::to_string(number) + ": line longer than 1 MiB";
      return out;
    }
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (line.empty()) continue;
    try {
      const Event e = goodput::parse_event(line);
      if (refused(e)) throw InputError("refused");
      out.events.push_back({number, e});
    } catch (const InputError& e) {
      const std::string message = "line " + std::to_string(number) + ": " + e.what();
      if (!lenient) {
        out.error = message;
        return out;
      }
      if (out.skipped++ == 0) out.first_skip = message;
    }
  }
  return out;
}

inline Reading read_with_reader(const std::string& log, bool lenient) {
  Reading out;
  EventReader reader(lenient);
  std::istringstream in(log);
  try {
    const EventReader::Stats stats = reader.read(in, [&](const Event& e) {
      if (refused(e)) throw InputError("refused");
      out.events.push_back({reader.line(), e});
    });
    out.skipped = stats.skipped;
    out.first_skip = stats.first_skip;
  } catch (const InputError& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace sdc::fuzz
