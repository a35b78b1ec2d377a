#include "fleet/fleet_sdc_analysis.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string_view>

#include <boost/math/distributions/binomial.hpp>
#include <boost/math/special_functions/beta.hpp>
#include <boost/math/special_functions/gamma.hpp>

#include "host/error.hpp"
#include "probes/probe.hpp"

namespace sdc {
namespace {

double hours(double seconds) { return seconds / 3600; }
double hours_ns(int64_t nanoseconds) { return static_cast<double>(nanoseconds) / 3.6e12; }

void decide(FleetVote& v, const FleetTally& fleet) {
  const VoteTally& t = *v.tally;
  const DigestTally* top = nullptr;
  std::pair<uint64_t, uint64_t> top_digest{};
  for (const auto& [digest, d] : t.digests) {
    v.devices += d.devices();
    if (top == nullptr || d.devices() > top->devices()) {
      top = &d;
      top_digest = digest;
    }
  }
  const auto as_digest = [](std::pair<uint64_t, uint64_t> d) { return Digest128{d.second, d.first}; };
  if (t.golden) {
    v.kind =
        t.digests.size() == 1 && as_digest(top_digest) == *t.golden ? FleetVoteKind::kAgreed : FleetVoteKind::kGolden;
    v.winner = t.golden;
  } else if (v.devices < 2) {
    v.kind = FleetVoteKind::kNoPeers;
    return;
  } else if (t.digests.size() == 1) {
    v.kind = FleetVoteKind::kAgreed;
    v.winner = as_digest(top_digest);
  } else if (v.devices >= 3 && 2 * top->devices() > v.devices) {
    v.kind = FleetVoteKind::kMajority;
    v.winner = as_digest(top_digest);
  } else {
    v.kind = FleetVoteKind::kInconclusive;
    return;
  }
  const auto w = t.digests.find({v.winner->hi, v.winner->lo});
  if (w != t.digests.end()) {
    v.majority_devices = w->second.devices();
    v.majority_hosts = w->second.hosts(fleet);
  }
}

FaultLocation locate(const FleetDevice& d) {
  FaultLocation l;
  l.device = &d;
  l.sites = d.sites.size();
  std::map<int, size_t> units, lanes, bits;
  std::map<int64_t, size_t> rows, banks, pages;
  std::set<double> runs;
  for (const auto& s : d.sites) {
    runs.insert(s.at);
    if (s.unit >= 0) {
      ++units[s.unit];
      ++l.compute_sites;
    }
    if (s.byte_offset >= 0) {
      ++l.memory_sites;
      ++rows[s.byte_offset >> kRowShift];
      ++banks[(s.byte_offset >> kRowShift) % kBanks];
      ++pages[s.byte_offset >> kPageShift];
    }
    if (s.lane >= 0) ++lanes[s.lane];
    for (int b : s.bits) ++bits[b];
  }
  l.runs = runs.size();
  const auto top = [](const auto& counts, auto& key, size_t& n) {
    for (const auto& [k, c] : counts) {
      if (c > n) {
        key = k;
        n = c;
      }
    }
  };
  top(units, l.top_unit, l.top_unit_sites);
  top(lanes, l.top_lane, l.top_lane_sites);
  top(bits, l.top_bit, l.top_bit_sites);
  int64_t bank = -1;
  top(rows, l.top_row, l.same_row);
  top(banks, bank, l.same_bank);
  top(pages, l.top_page, l.same_page);
  if (l.sites < 2) {
    l.pattern = "too_few";
  } else {
    // One place: every compute fault on one SM or core, every memory fault in one row or page.
    const bool one_unit = l.compute_sites == 0 || l.top_unit_sites == l.compute_sites;
    const bool one_region = l.memory_sites == 0 || l.same_page == l.memory_sites || l.same_row == l.memory_sites;
    l.pattern = one_unit && one_region ? "one_location" : "spread";
  }
  return l;
}

// Rates per model and band of `bands` (device -> band -> counts), band_width wide.
std::vector<BandRate> band_rates(const std::vector<std::pair<const FleetDevice*, const std::map<int64_t, BurnCounts>*>>& bands,
                                 int64_t band_width) {
  std::map<std::pair<std::string, int64_t>, BandRate> rates;
  for (const auto& [device, counts] : bands) {
    std::set<int64_t> seen;
    for (const auto& [value, c] : *counts) {
      const int64_t band = static_cast<int64_t>(std::floor(static_cast<double>(value) / static_cast<double>(band_width))) *
                           band_width;
      BandRate& r = rates[{device->model, band}];
      r.model = device->model;
      r.band = band;
      r.devices += seen.insert(band).second;
      r.results += c.results;
      r.failures += c.failures;
      r.device_hours += hours_ns(c.tested_ns);
    }
  }
  std::vector<BandRate> out;
  for (auto& [key, r] : rates) {
    if (r.device_hours > 0) {
      r.rate = static_cast<double>(r.failures) / r.device_hours;
      const auto [lo, hi] = garwood_interval(r.failures);
      r.rate_lo = lo / r.device_hours;
      r.rate_hi = hi / r.device_hours;
    }
    out.push_back(r);
  }
  return out;
}

// The device's triggering temperature, when its failures say it has one (TriggeredDevice).
std::optional<TriggeredDevice> temperature_trigger(const FleetDevice& d) {
  TriggeredDevice t;
  t.device = &d;
  bool failed = false;
  for (const auto& [degree, c] : d.by_degree) {
    if (!failed && c.failures > 0) {
      failed = true;
      t.trigger_c = degree;
    }
    if (failed) {
      t.results_at_or_above += c.results;
      t.failures += c.failures;
    } else {
      t.passes_below += c.results;
    }
  }
  if (t.failures < kTriggerMinFailures || t.passes_below == 0) return std::nullopt;
  // Every failure among the results at or above trigger_c: prod (a - i) / (a + b - i), i < failures.
  const double a = static_cast<double>(t.results_at_or_above), b = static_cast<double>(t.passes_below);
  t.p = 1;
  for (uint64_t i = 0; i < t.failures; ++i) t.p *= (a - static_cast<double>(i)) / (a + b - static_cast<double>(i));
  if (t.p > kTriggerP) return std::nullopt;
  return t;
}

// Lemons among `units` (devices or nodes): each a (failures, hours) per model and driver group,
// tested against the group's rate without the unit. Jeffreys' half failure keeps a clean fleet's
// rate above zero, so a single failure is never "impossible".
struct Exposure {
  std::map<std::string, std::pair<uint64_t, double>> by_group;  // group -> (failures, hours)
};

std::vector<Lemon> find_lemons(std::vector<Lemon> units, const std::vector<Exposure>& exposures,
                               const std::map<std::string, std::pair<uint64_t, double>>& fleet, double fdr) {
  std::vector<double> p;
  for (size_t i = 0; i < units.size(); ++i) {
    double mu = 0;
    for (const auto& [group, fh] : exposures[i].by_group) {
      const auto& all = fleet.at(group);
      const double others_h = all.second - fh.second;
      if (others_h <= 0) continue;  // alone in its group: no fleet rate to compare with
      mu += (static_cast<double>(all.first - fh.first) + 0.5) / others_h * fh.second;
    }
    units[i].expected = mu;
    units[i].p = mu > 0 ? poisson_upper_tail(units[i].failures, mu) : 1.0;
    p.push_back(units[i].p);
  }
  const std::vector<double> q = bh_q_values(p);
  std::vector<Lemon> lemons;
  for (size_t i = 0; i < units.size(); ++i) {
    units[i].q = q[i];
    if (q[i] <= fdr && units[i].failures > 0) lemons.push_back(units[i]);
  }
  std::sort(lemons.begin(), lemons.end(), [](const Lemon& a, const Lemon& b) { return a.p < b.p; });
  return lemons;
}

// A group against the rest of the fleet, given the failures of both: under one rate per model and
// driver, the group's share of each stratum's failures is binomial with its share of the hours. This
// conditional test counts the uncertainty of the others' rate, which the Poisson test of a node
// neglects and which matters when a group holds a large part of the fleet (a switch of 32 of 96
// nodes). Strata (groups of mixed models) are convolved, at a cost of the product of their fleet
// failures; P(S >= k).
double conditional_upper_tail(uint64_t k, const Exposure& unit,
                              const std::map<std::string, std::pair<uint64_t, double>>& fleet) {
  if (k == 0) return 1.0;
  using boost::math::binomial_distribution;
  const auto share_of = [&](const std::string& group, double hours) {
    const auto& all = fleet.at(group);
    return std::pair{all.first, std::clamp(hours / all.second, 0.0, 1.0)};  // a whole stratum: share 1
  };
  if (unit.by_group.size() == 1) {
    const auto [n, share] = share_of(unit.by_group.begin()->first, unit.by_group.begin()->second.second);
    if (k > n) return 0.0;
    return boost::math::cdf(boost::math::complement(binomial_distribution<double>(static_cast<double>(n), share),
                                                    static_cast<double>(k - 1)));
  }
  std::vector<double> pmf = {1.0};
  for (const auto& [group, fh] : unit.by_group) {
    const auto [n, share] = share_of(group, fh.second);
    const binomial_distribution<double> b(static_cast<double>(n), share);
    std::vector<double> next(pmf.size() + n, 0.0);
    for (uint64_t j = 0; j <= n; ++j) {
      const double pj = boost::math::pdf(b, static_cast<double>(j));
      if (pj == 0) continue;
      for (size_t i = 0; i < pmf.size(); ++i) next[i + j] += pmf[i] * pj;
    }
    pmf = std::move(next);
  }
  double tail = 0;
  for (size_t i = k; i < pmf.size(); ++i) tail += pmf[i];
  return std::clamp(tail, 0.0, 1.0);
}

}  // namespace

const char* fleet_vote_kind_name(FleetVoteKind kind) {
  switch (kind) {
    case FleetVoteKind::kAgreed: return "agreed";
    case FleetVoteKind::kMajority: return "majority";
    case FleetVoteKind::kGolden: return "golden";
    case FleetVoteKind::kInconclusive: return "inconclusive";
    case FleetVoteKind::kNoPeers: return "no_peers";
  }
  return "";
}

size_t FleetAnalysis::count(FleetVoteKind kind) const {
  return std::count_if(votes.begin(), votes.end(), [&](const FleetVote& v) { return v.kind == kind; });
}

int FleetAnalysis::exit_code() const {
  if (!suspects.empty() || !lemon_devices.empty() || !lemon_nodes.empty() || !lemon_groups.empty() ||
      !refailed.empty() || !temperature_triggered.empty() || count(FleetVoteKind::kInconclusive) > 0) {
    return 1;
  }
  uint64_t failures = 0;
  for (const auto& r : rates) failures += r.failures;
  const bool compared = votes.size() > count(FleetVoteKind::kNoPeers);
  return failures > 0 ? 1 : compared ? 0 : 2;
}

std::pair<double, double> garwood_interval(uint64_t k, double confidence) {
  const double alpha = 1 - confidence, n = static_cast<double>(k);
  const double lo = k == 0 ? 0.0 : boost::math::gamma_p_inv(n, alpha / 2);
  return {lo, boost::math::gamma_p_inv(n + 1, 1 - alpha / 2)};
}

std::pair<double, double> clopper_pearson_exact(uint64_t k, uint64_t n, double confidence) {
  if (n == 0 || k > n) throw std::invalid_argument("clopper_pearson_exact: need 0 <= k <= n, n > 0");
  const double alpha = 1 - confidence, x = static_cast<double>(k), m = static_cast<double>(n);
  const double lo = k == 0 ? 0.0 : boost::math::ibeta_inv(x, m - x + 1, alpha / 2);
  const double hi = k == n ? 1.0 : boost::math::ibeta_inv(x + 1, m - x, 1 - alpha / 2);
  return {lo, hi};
}

double poisson_upper_tail(uint64_t k, double mu) {
  // P(X >= k) is the regularized lower incomplete gamma P(k, mu) for k >= 1.
  return k == 0 ? 1.0 : boost::math::gamma_p(static_cast<double>(k), mu);
}

std::vector<double> bh_q_values(const std::vector<double>& p) {
  const size_t m = p.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<double> q(m, 1.0);
  double running = 1.0;
  for (size_t r = m; r-- > 0;) {
    running = std::min(running, p[order[r]] * static_cast<double>(m) / static_cast<double>(r + 1));
    q[order[r]] = running;
  }
  return q;
}

FleetAnalysis analyze_fleet(const FleetTally& tally, const FleetOptions& options) {
  FleetAnalysis out;
  out.failures_by_day = tally.failures_by_day;
  // Each device's counts per family, with the votes it lost where its own checks passed.
  std::map<std::string, std::map<std::string, FamilyCounts>> families;
  for (const auto& [key, d] : tally.devices) families[key] = d.families;

  std::map<std::string, size_t> suspect_at;
  std::vector<const std::pair<const std::string, VoteTally>*> in_order;  // by key, so output is reproducible
  for (const auto& entry : tally.votes) in_order.push_back(&entry);
  std::sort(in_order.begin(), in_order.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  for (const auto* entry : in_order) {
    const VoteTally& tallied = entry->second;
    FleetVote v;
    v.tally = &tallied;
    decide(v, tally);
    out.votes.push_back(v);
    if (!v.winner) continue;
    for (const auto& [digest, d] : tallied.digests) {
      if (Digest128{digest.second, digest.first} == *v.winner) continue;
      for (const auto& m : d.members) {
        const FleetDevice& device = *tally.by_id[m.device];
        const std::string key = fleet_device_key(device.host, device.uuid);
        auto [it, added] = suspect_at.try_emplace(key, out.suspects.size());
        if (added) out.suspects.push_back({&device, 0, {}, 0, false});
        FleetSuspect& s = out.suspects[it->second];
        ++s.votes_lost;
        s.probes.insert(tallied.probe);
        s.largest_majority = std::max(s.largest_majority, v.majority_devices);
        s.own_checks_failed = s.own_checks_failed || m.failed;
        if (m.failed) continue;  // already counted as its own failure
        FamilyCounts& f = families[key][probe_family(tallied.probe)];
        ++f.failures;
        f.first_failure = f.first_failure == 0 ? m.at : std::min(f.first_failure, m.at);
        ++out.failures_by_day[{device.model, static_cast<int64_t>(std::floor(m.at / 86400))}];
      }
    }
  }
  std::stable_sort(out.suspects.begin(), out.suspects.end(),
                   [](const FleetSuspect& a, const FleetSuspect& b) { return a.votes_lost > b.votes_lost; });

  // Rates per model x driver x family.
  struct Group {
    FleetRate rate;
    std::vector<double> ttff_h;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Group> groups;
  for (const auto& [key, fams] : families) {
    const FleetDevice& d = tally.devices.at(key);
    for (const auto& [family, c] : fams) {
      if (c.results == 0) continue;
      Group& g = groups[{d.model, d.driver, family}];
      g.rate.model = d.model;
      g.rate.driver = d.driver;
      g.rate.family = family;
      ++g.rate.devices;
      g.rate.failures += c.failures;
      g.rate.device_hours += hours_ns(c.tested_ns);
      if (c.failures > 0) {
        ++g.rate.devices_failing;
        g.ttff_h.push_back(std::max(0.0, hours(c.first_failure - d.first_seen)));
      }
    }
  }
  for (auto& [key, g] : groups) {
    FleetRate& r = g.rate;
    // Garwood's exact Poisson interval of the failures, over the device-hours tested.
    r.rate = r.device_hours > 0 ? static_cast<double>(r.failures) / r.device_hours : 0;
    if (r.device_hours > 0) {
      const auto [lo, hi] = garwood_interval(r.failures);
      r.rate_lo = lo / r.device_hours;
      r.rate_hi = hi / r.device_hours;
    }
    std::tie(r.fraction_lo, r.fraction_hi) = clopper_pearson_exact(r.devices_failing, r.devices);
    if (!g.ttff_h.empty()) {
      std::sort(g.ttff_h.begin(), g.ttff_h.end());
      r.ttff_median_h = g.ttff_h[g.ttff_h.size() / 2];
      r.ttff_max_h = g.ttff_h.back();
    }
    out.rates.push_back(r);
  }

  // Lemons: devices, then nodes, each against its model and driver group's rate.
  std::map<std::string, std::pair<uint64_t, double>> fleet;
  std::vector<Lemon> devices, nodes;
  std::vector<Exposure> device_exposure, node_exposure;
  std::map<std::string, size_t> node_at;
  for (const auto& [key, fams] : families) {
    const FleetDevice& d = tally.devices.at(key);
    const std::string group = d.model + "|" + d.driver;
    Lemon l{d.host, &d, d.model};
    for (const auto& [family, c] : fams) {
      l.failures += c.failures;
      l.device_hours += hours_ns(c.tested_ns);
    }
    if (l.device_hours <= 0) continue;
    fleet[group].first += l.failures;
    fleet[group].second += l.device_hours;
    devices.push_back(l);
    device_exposure.push_back({{{group, {l.failures, l.device_hours}}}});
    auto [it, added] = node_at.try_emplace(d.host, nodes.size());
    if (added) {
      nodes.push_back({d.host, nullptr, ""});
      node_exposure.emplace_back();
    }
    Lemon& n = nodes[it->second];
    n.failures += l.failures;
    n.device_hours += l.device_hours;
    n.model = n.model.empty() || n.model == d.model ? d.model : "mixed";
    auto& e = node_exposure[it->second].by_group[group];
    e.first += l.failures;
    e.second += l.device_hours;
  }
  out.devices_tested = devices.size();
  out.nodes_tested = nodes.size();
  out.lemon_devices = find_lemons(devices, device_exposure, fleet, options.fdr);
  out.lemon_nodes = find_lemons(nodes, node_exposure, fleet, options.fdr);

  // Groups of nodes (racks, switches, power domains): each the sum of its nodes, tested against
  // the rest of the fleet, with one Benjamini-Hochberg over every group of every kind.
  if (!options.topology.empty()) {
    std::map<std::string, size_t> group_at;
    std::vector<Lemon> groups;
    std::vector<Exposure> group_exposure;
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto where = options.topology.find(nodes[i].host);
      if (where == options.topology.end())
        where = options.topology.find(nodes[i].host.substr(0, nodes[i].host.find('.')));
      if (where == options.topology.end()) {
        ++out.nodes_without_group;
        continue;
      }
      for (const std::string& name : where->second) {
        auto [it, added] = group_at.try_emplace(name, groups.size());
        if (added) {
          groups.push_back({name, nullptr, ""});
          group_exposure.emplace_back();
        }
        Lemon& g = groups[it->second];
        ++g.nodes;
        g.failures += nodes[i].failures;
        g.device_hours += nodes[i].device_hours;
        g.model = g.model.empty() || g.model == nodes[i].model ? nodes[i].model : "mixed";
        for (const auto& [model, fh] : node_exposure[i].by_group) {
          auto& e = group_exposure[it->second].by_group[model];
          e.first += fh.first;
          e.second += fh.second;
        }
      }
    }
    out.groups_tested = groups.size();
    std::vector<double> p;
    for (size_t i = 0; i < groups.size(); ++i) {
      groups[i].expected = 0;
      for (const auto& [model, fh] : group_exposure[i].by_group) {
        const auto& all = fleet.at(model);
        groups[i].expected += static_cast<double>(all.first) * fh.second / all.second;
      }
      groups[i].p = conditional_upper_tail(groups[i].failures, group_exposure[i], fleet);
      p.push_back(groups[i].p);
    }
    const std::vector<double> q = bh_q_values(p);
    for (size_t i = 0; i < groups.size(); ++i) {
      groups[i].q = q[i];
      if (q[i] <= options.fdr && groups[i].failures > 0) out.lemon_groups.push_back(groups[i]);
    }
    std::sort(out.lemon_groups.begin(), out.lemon_groups.end(),
              [](const Lemon& a, const Lemon& b) { return a.p < b.p; });
  }

  std::vector<std::pair<const FleetDevice*, const std::map<int64_t, BurnCounts>*>> degrees, power;
  for (const auto& entry : families) {  // by key, so output is reproducible
    const FleetDevice& d = tally.devices.at(entry.first);
    if (d.failures_before_release > 0 && d.failures_after_release > 0) out.refailed.push_back(&d);
    if (!d.sites.empty()) out.locations.push_back(locate(d));
    if (!d.by_degree.empty()) degrees.push_back({&d, &d.by_degree});
    if (!d.by_power_pct.empty()) power.push_back({&d, &d.by_power_pct});
    if (const auto t = temperature_trigger(d)) out.temperature_triggered.push_back(*t);
  }
  out.temperature_bands = band_rates(degrees, 10);
  out.power_bands = band_rates(power, 10);
  std::stable_sort(out.temperature_triggered.begin(), out.temperature_triggered.end(),
                   [](const TriggeredDevice& a, const TriggeredDevice& b) { return a.p < b.p; });
  // Most significant first: one-location devices (candidates for remapping), then spread, then too
  // few sites; more sites first within each, host and UUID order last.
  const auto rank = [](const FaultLocation& l) {
    return l.pattern == "one_location" ? 0 : l.pattern == "spread" ? 1 : 2;
  };
  std::stable_sort(out.locations.begin(), out.locations.end(), [&](const FaultLocation& a, const FaultLocation& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a.sites > b.sites;
  });
  return out;
}

GoldenFile fleet_golden(const FleetAnalysis& analysis, const FleetOptions& options) {
  // (seed, config) -> eligible votes.
  std::map<std::pair<uint64_t, std::string>, std::vector<const FleetVote*>> runs;
  for (const auto& v : analysis.votes) {
    if (!v.winner || v.kind == FleetVoteKind::kInconclusive || v.kind == FleetVoteKind::kNoPeers) continue;
    if (v.majority_hosts < options.golden_min_nodes) continue;
    if (static_cast<double>(v.majority_devices) < options.golden_min_share * static_cast<double>(v.devices)) continue;
    if (options.golden_seed && v.tally->seed != *options.golden_seed) continue;
    runs[{v.tally->seed, v.tally->config}].push_back(&v);
  }
  if (runs.empty()) {
    throw InputError("--golden-out: no vote" +
                     (options.golden_seed ? " of seed " + std::to_string(*options.golden_seed) : std::string()) +
                     " has a majority of at least " + std::to_string(options.golden_min_nodes) + " nodes and " +
                     std::to_string(static_cast<int>(options.golden_min_share * 100)) + "% of its devices");
  }
  const auto best = std::max_element(runs.begin(), runs.end(),
                                     [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  GoldenFile g;
  g.seed = best->first.first;
  const std::string& config = best->first.second;
  const size_t bar = config.find('|'), bar2 = config.find('|', bar + 1);
  g.level = parse_level(config.substr(0, bar));
  if (bar2 > bar + 1) g.size_bytes = std::stoull(config.substr(bar + 1, bar2 - bar - 1));
  if (bar2 + 1 < config.size()) g.iterations = static_cast<uint32_t>(std::stoul(config.substr(bar2 + 1)));
  for (const FleetVote* v : best->second) {
    if (!g.digests.emplace(std::make_pair(v->tally->class_key, v->tally->probe), *v->winner).second) {
      throw InputError("--golden-out: " + v->tally->probe + " on " + v->tally->class_key +
                       " ran with different parameters at the same seed: no single golden digest");
    }
  }
  return g;
}

}  // namespace sdc
