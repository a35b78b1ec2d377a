#include "goodput/hang_attribution.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "host/error.hpp"

namespace sdc::goodput {
namespace {

// "0, 1, 3, 5-9": runs of three or more as ranges, so that a world of thousands stays short.
std::string list_ranks(const std::set<int>& ranks) {
  std::string s;
  for (auto it = ranks.begin(); it != ranks.end();) {
    auto end = std::next(it);
    while (end != ranks.end() && *end == *std::prev(end) + 1) ++end;
    const int first = *it, last = *std::prev(end), run = last - first + 1;
    s += s.empty() ? "" : ", ";
    if (run >= 3) {
      s += std::to_string(first) + "-" + std::to_string(last);
    } else {
      s += std::to_string(first) + (run == 2 ? ", " + std::to_string(last) : "");
    }
    it = end;
  }
  return s;
}

// "rank 3" or "ranks 0, 1, 3".
std::string name_ranks(const std::set<int>& r) { return (r.size() == 1 ? "rank " : "ranks ") + list_ranks(r); }

std::string group_name(const std::string& group, const std::string& desc) {
  return "process group " + group + (desc.empty() || desc == "undefined" ? "" : " (" + desc + ")");
}

bool is_world(const std::string& group, const std::string& desc) { return group == "0" || desc == "default_pg"; }

// Which of an entry's fields must agree between the ranks: the op and dtypes always; the sizes
// where every rank passes the same shape (all_gather's output and reduce_scatter's input hold
// every rank's part; all_to_all, gather and scatter may differ by design).
std::vector<std::pair<const char*, std::string FrEntry::*>> compared_fields(const std::string& op) {
  std::vector<std::pair<const char*, std::string FrEntry::*>> fields = {
      {"op", &FrEntry::op}, {"input_dtypes", &FrEntry::input_dtypes}, {"output_dtypes", &FrEntry::output_dtypes}};
  auto has = [&](const char* s) { return op.find(s) != std::string::npos; };
  if (has("all_reduce") || has("allreduce") || op == "broadcast" || op == "reduce" || has("barrier")) {
    fields.emplace_back("input_sizes", &FrEntry::input_sizes);
    fields.emplace_back("output_sizes", &FrEntry::output_sizes);
  } else if (has("gather") && !has("scatter") && op != "gather") {
    fields.emplace_back("input_sizes", &FrEntry::input_sizes);
  } else if (has("reduce_scatter")) {
    fields.emplace_back("output_sizes", &FrEntry::output_sizes);
  }
  return fields;
}

int world_of(const std::vector<FrDump>& dumps, int world_size) {
  int inferred = 0;
  for (const FrDump& d : dumps) {
    inferred = std::max({inferred, d.rank + 1, d.largest_rank_named + 1});
    auto world = d.config_ranks.find("0");
    if (world_size == 0 && world != d.config_ranks.end()) world_size = static_cast<int>(world->second.size());
  }
  if (world_size == 0) return inferred;
  for (const FrDump& d : dumps) {
    if (d.rank >= world_size || d.largest_rank_named >= world_size) {
      throw InputError(d.path + ": rank " + std::to_string(std::max(d.rank, d.largest_rank_named)) +
                       " is outside the job's " + std::to_string(world_size) + " ranks");
    }
  }
  return world_size;
}

}  // namespace

const char* verdict_name(HangReport::Verdict v) {
  switch (v) {
    case HangReport::Verdict::kNoHang: return "no_hang";
    case HangReport::Verdict::kCulprit: return "culprit";
    case HangReport::Verdict::kCannotDecide: return "cannot_decide";
  }
  return "";
}

HangReport attribute_hang(const std::vector<FrDump>& dumps, int world_size) {
  HangReport report;
  report.world_size = world_of(dumps, world_size);
  std::map<int, const FrDump*> by_rank;
  for (const FrDump& d : dumps) by_rank[d.rank] = &d;
  for (const auto& [rank, d] : by_rank) report.dumped.push_back(rank);

  // Each group's members, from the entries, pg_config and the world.
  std::map<std::string, std::set<int>> members;
  std::map<std::string, std::string> desc;
  for (const FrDump& d : dumps) {
    for (const FrEntry& e : d.entries) {
      members[e.group].insert(d.rank);
      desc.emplace(e.group, e.group_desc);
    }
  }
  for (const FrDump& d : dumps) {
    for (const auto& [group, ranks] : d.config_ranks) {
      if (members.count(group) != 0) members[group].insert(ranks.begin(), ranks.end());
    }
  }

  // Who waits for whom: definitely (a dumped member lags), or perhaps (a member has no dump).
  std::map<int, std::vector<std::string>> waits_in;  // the groups a rank waits in for a dumped rank
  std::map<std::string, std::set<int>> behind_in;    // per group, the ranks the others wait for
  std::map<int, std::set<int>> may_wait_on;
  std::map<int, std::string> why_needed;         // for a rank others wait for: where
  std::map<int, std::set<int>> waited_by_maybe;  // for a rank without a dump: who may wait for it
  std::map<int, std::string> where_maybe;
  for (auto& [group, ranks] : members) {
    if (is_world(group, desc[group])) {
      for (int r = 0; r < report.world_size; ++r) ranks.insert(r);
    }
    HangGroup g;
    g.group = group;
    g.desc = desc[group];
    std::map<int, int64_t> last;
    for (int r : ranks) {
      g.members.push_back(r);
      auto d = by_rank.find(r);
      if (d == by_rank.end()) {
        g.no_dump.push_back(r);
        continue;
      }
      auto l = d->second->last_enqueued.find(group);
      last[r] = l == d->second->last_enqueued.end() ? 0 : l->second;
    }
    if (last.empty()) continue;
    int64_t lo = INT64_MAX, hi = 0;
    for (const auto& [r, l] : last) lo = std::min(lo, l), hi = std::max(hi, l);
    if (lo < hi) {
      g.first_incomplete = lo + 1;
      std::set<int> behind, ahead;
      for (const auto& [r, l] : last) (l == lo ? behind : ahead).insert(r);
      g.missing.assign(behind.begin(), behind.end());
      for (const auto& [r, l] : last) {
        for (const FrEntry& e : by_rank[r]->entries) {
          if (e.group == group && e.seq == g.first_incomplete) {
            g.op = e.op;
            g.timeout_ms = std::max(g.timeout_ms, e.timeout_ms);
          }
        }
      }
      for (const auto& [r, l] : last) {
        if (l > lo) waits_in[r].push_back(group);
      }
      behind_in[group] = behind;
      for (int m : behind) {
        why_needed[m] += std::string(why_needed[m].empty() ? "" : "; ") + "never enqueued collective " +
                         std::to_string(g.first_incomplete) + (g.op.empty() ? "" : " (" + g.op + ")") + " of " +
                         group_name(group, g.desc) + ", which " + name_ranks(ahead) + " enqueued";
      }
    }
    // Any rank of the group may be waiting, inside its own newest collective, for a rank without a
    // dump: one behind too (its peers may have finished a collective it is still in, when the
    // killed rank sent them its part and died before it sent the rest).
    int64_t entered = INT64_MAX;
    for (const auto& [r, l] : last) {
      if (l > 0) entered = std::min(entered, l);
    }
    for (int u : g.no_dump) {
      for (const auto& [r, l] : last) {
        if (l > 0) {
          may_wait_on[r].insert(u);
          waited_by_maybe[u].insert(r);
        }
      }
      if (entered != INT64_MAX) {
        where_maybe[u] = (entered == hi ? "collective " + std::to_string(hi)
                                        : "collectives " + std::to_string(entered) + " to " + std::to_string(hi)) +
                         " of " + group_name(group, g.desc);
      }
    }
    if (g.first_incomplete != 0 || !g.no_dump.empty()) report.groups.push_back(std::move(g));
  }

  // Collectives that differ at one sequence number.
  std::map<int, std::string> why_mismatch;
  std::set<int> mismatch_undecided;
  std::map<std::pair<std::string, int64_t>, std::vector<std::pair<int, const FrEntry*>>> at_seq;
  for (const auto& [rank, d] : by_rank) {
    for (const FrEntry& e : d->entries) at_seq[{e.group, e.seq}].emplace_back(rank, &e);
  }
  for (const auto& [key, entries] : at_seq) {
    if (entries.size() < 2) continue;
    for (const auto& [name, field] : compared_fields(entries.front().second->op)) {
      std::map<std::string, std::set<int>> values;
      for (const auto& [r, e] : entries) values[e->*field].insert(r);
      if (values.size() < 2) continue;
      auto common = std::max_element(values.begin(), values.end(),
                                     [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
      bool majority = common->second.size() * 2 > entries.size();
      for (const auto& [value, ranks] : values) {
        if (majority && value == common->first) continue;
        HangMismatch m{key.first, key.second, name, {ranks.begin(), ranks.end()}, value, majority ? common->first : ""};
        std::string what = std::string(name) + " " + value + " at collective " + std::to_string(key.second) + " of " +
                           group_name(key.first, desc[key.first]);
        for (int r : ranks) {
          if (majority) {
            why_mismatch[r] += std::string(why_mismatch[r].empty() ? "" : "; ") + "its " + what + " differs from " +
                               common->first + " of " + name_ranks(common->second);
          } else {
            mismatch_undecided.insert(r);
            why_mismatch[r] += std::string(why_mismatch[r].empty() ? "" : "; ") + "its " + what +
                               " differs from the others' with no majority";
          }
        }
        report.mismatches.push_back(std::move(m));
      }
      break;  // the first field that differs says it; the rest follow from it
    }
  }

  bool anyone_waits = !waits_in.empty() || !may_wait_on.empty();

  // A rank others wait for that waits for no one is a culprit; one that may wait for a rank
  // without a dump cannot be decided; one that waits behind another is not named.
  std::map<int, std::string> culprits, undecided;
  for (const auto& [r, why] : why_mismatch) {
    (mismatch_undecided.count(r) != 0 ? undecided : culprits)[r] = why;
  }
  bool blocker_found = false;
  for (const auto& [r, why] : why_needed) {
    if (waits_in.count(r) != 0) continue;
    blocker_found = true;
    if (may_wait_on.count(r) == 0) {
      culprits[r] += (culprits[r].empty() ? "" : "; ") + why + "; it waits in no collective";
    } else {
      undecided[r] = why + ", but it may be waiting for " + name_ranks(may_wait_on.at(r)) + ", whose dump is missing";
    }
  }
  // Everyone that others wait for waits too: a cycle.
  if (!why_needed.empty() && !blocker_found) {
    for (const auto& [r, why] : why_needed) {
      if (undecided.count(r) != 0) continue;
      std::set<int> waited_for;
      for (const std::string& g : waits_in[r]) waited_for.insert(behind_in[g].begin(), behind_in[g].end());
      undecided[r] = why + ", while waiting for " + name_ranks(waited_for) +
                     " itself: the ranks wait for each other (collectives entered in a different order)";
    }
  }
  for (int r = 0; r < report.world_size; ++r) {
    if (by_rank.count(r) != 0) continue;
    std::string why = "no dump";
    if (waited_by_maybe.count(r) != 0) {
      why += ": " + name_ranks(waited_by_maybe[r]) + " may be waiting for it in " + where_maybe[r];
    }
    undecided[r] = why;
  }
  for (const auto& [r, why] : culprits) report.culprits.push_back({r, why});
  for (const auto& [r, why] : undecided) {
    if (culprits.count(r) == 0) report.undecided.push_back({r, why});
  }
  if (!report.culprits.empty()) {
    report.verdict = HangReport::Verdict::kCulprit;
  } else if (!report.undecided.empty() || anyone_waits) {
    report.verdict = HangReport::Verdict::kCannotDecide;
  }
  return report;
}

}  // namespace sdc::goodput
