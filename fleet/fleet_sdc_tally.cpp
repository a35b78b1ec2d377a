#include "fleet/fleet_sdc_tally.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

namespace sdc {
namespace {

double earliest(double a, double b) { return a == 0 ? b : b == 0 ? a : std::min(a, b); }

bool site_before(const FaultSite& a, const FaultSite& b) {
  return std::tie(a.at, a.probe, a.record) < std::tie(b.at, b.probe, b.record);
}

// Adds `m` to `members`, or moves a member that is there to m's run when that came earlier.
void add_member(std::vector<VoteMember>& members, const VoteMember& m) {
  const auto known =
      std::find_if(members.begin(), members.end(), [&](const VoteMember& x) { return x.device == m.device; });
  if (known == members.end()) {
    if (members.size() < kMaxNamedPerDigest) members.push_back(m);
  } else if (m.at < known->at) {
    *known = m;
  }
}

}  // namespace

void DigestTally::add(uint32_t device, bool failed, double at) {
  ++runs;
  ids_.push_back(device);
  if (ids_.size() >= 2 * unique_ + 64) deduplicate();
  add_member(members, {device, failed, at});
}

void DigestTally::set_counts(uint64_t devices, uint64_t hosts) { counted_ = {devices, hosts}; }

uint64_t DigestTally::hosts(const FleetTally& tally) const {
  if (counted_) return counted_->second;
  std::set<std::string_view> named;
  for (uint32_t id : device_ids()) named.insert(tally.by_id[id]->host);
  return named.size();
}

void DigestTally::merge(DigestTally&& o, const std::vector<uint32_t>& remap) {
  runs += o.runs;
  for (uint32_t id : o.device_ids()) ids_.push_back(remap[id]);
  deduplicate();
  for (auto& m : o.members) {
    m.device = remap[m.device];
    add_member(members, m);
  }
}

const std::vector<uint32_t>& DigestTally::device_ids() const {
  if (unique_ != ids_.size()) deduplicate();
  return ids_;
}

void DigestTally::deduplicate() const {
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  unique_ = ids_.size();
}

void FamilyCounts::add(const FamilyCounts& o) {
  results += o.results;
  tested_ns += o.tested_ns;
  failures += o.failures;
  first_failure = earliest(first_failure, o.first_failure);
}

void FleetDevice::seen(double at, std::string_view bus_id, std::string_view model_name, std::string_view driver_version,
                       std::string_view backend_name) {
  if (uuid.empty()) return;  // named by the caller first
  if (first_seen == 0 || at < first_seen) {
    first_seen = at;
    pci_bus_id = bus_id;
    model = model_name;
    driver = driver_version;
    backend = backend_name;
  }
  last_seen = std::max(last_seen, at);
}

void BurnCounts::add(const BurnCounts& o) {
  results += o.results;
  failures += o.failures;
  tested_ns += o.tested_ns;
}

void FleetDevice::add_conditions(const BurnConditions& c, bool failed, int64_t tested_ns) {
  const BurnCounts one{1, failed ? 1u : 0u, tested_ns};
  // The same arithmetic as the engines' SQL (fleet_engine.py), so that the bands agree exactly.
  if (!std::isnan(c.temperature_c)) by_degree[static_cast<int64_t>(std::floor(c.temperature_c))].add(one);
  if (!std::isnan(c.power_w) && c.power_limit_w > 0) {
    by_power_pct[static_cast<int64_t>(std::floor(c.power_w / c.power_limit_w * 10)) * 10].add(one);
  }
}

void FleetDevice::add_site(FaultSite&& site) {
  if (sites.size() < kMaxSitesPerDevice) {
    sites.push_back(std::move(site));
    return;
  }
  const auto latest = std::max_element(sites.begin(), sites.end(), site_before);
  if (site_before(site, *latest)) *latest = std::move(site);
}

void FleetDevice::merge(const FleetDevice& o) {
  if (o.first_seen != 0) seen(o.first_seen, o.pci_bus_id, o.model, o.driver, o.backend);
  last_seen = std::max(last_seen, o.last_seen);
  for (const auto& [family, counts] : o.families) families[family].add(counts);
  for (FaultSite s : o.sites) add_site(std::move(s));
  for (const auto& [degree, counts] : o.by_degree) by_degree[degree].add(counts);
  for (const auto& [tenth, counts] : o.by_power_pct) by_power_pct[tenth].add(counts);
  released_at = std::max(released_at, o.released_at);
  failures_before_release += o.failures_before_release;
  failures_after_release += o.failures_after_release;
}

FleetDevice& FleetTally::device(const std::string& key) {
  auto [it, added] = devices.try_emplace(key);
  if (added) {
    it->second.id = static_cast<uint32_t>(by_id.size());
    by_id.push_back(&it->second);
  }
  return it->second;
}

void FleetTally::merge(FleetTally&& o) {
  std::vector<uint32_t> remap(o.by_id.size());  // o's device ids -> this tally's
  for (auto& [key, device] : o.devices) {
    const bool added = devices.count(key) == 0;
    FleetDevice& into = this->device(key);
    remap[device.id] = into.id;
    if (added) {
      const uint32_t id = into.id;
      into = std::move(device);
      into.id = id;
    } else {
      into.merge(device);
    }
  }
  for (auto& [key, vote] : o.votes) {
    std::map<std::pair<uint64_t, uint64_t>, DigestTally> digests;
    digests.swap(vote.digests);
    auto [it, added] = votes.try_emplace(key, std::move(vote));  // moved only when added
    VoteTally& into = it->second;
    if (!added) keep_golden(into, vote.golden);
    for (auto& [digest, tally] : digests) into.digests[digest].merge(std::move(tally), remap);
  }
  for (const auto& [key, n] : o.failures_by_day) failures_by_day[key] += n;
  files += o.files;
  reports += o.reports;
  histories += o.histories;
  results += o.results;
  skipped += o.skipped;
  with_injections += o.with_injections;
  results_without_digests += o.results_without_digests;
}

void FleetTally::order_members() {
  const auto before = [this](const VoteMember& a, const VoteMember& b) {
    const FleetDevice& x = *by_id[a.device];
    const FleetDevice& y = *by_id[b.device];
    return std::tie(a.at, x.host, x.uuid) < std::tie(b.at, y.host, y.uuid);
  };
  for (auto& [key, vote] : votes) {
    for (auto& [digest, tally] : vote.digests) std::sort(tally.members.begin(), tally.members.end(), before);
  }
}

std::string fleet_device_key(std::string_view host, std::string_view uuid) {
  std::string key;
  key.reserve(host.size() + 1 + uuid.size());
  return key.append(host).append(1, '/').append(uuid);
}

void keep_golden(VoteTally& vote, const std::optional<Digest128>& golden) {
  if (golden && (!vote.golden || std::tie(golden->hi, golden->lo) > std::tie(vote.golden->hi, vote.golden->lo))) {
    vote.golden = golden;
  }
}

std::string vote_config(std::string_view level, std::optional<uint64_t> size_bytes, std::optional<uint64_t> iterations) {
  return std::string(level) + "|" + (size_bytes ? std::to_string(*size_bytes) : "") + "|" +
         (iterations ? std::to_string(*iterations) : "");
}

std::string vote_key(std::string_view class_key, std::string_view probe, std::string_view config) {
  std::string key;
  key.reserve(class_key.size() + probe.size() + config.size() + 2);
  return key.append(class_key).append(1, '\x1f').append(probe).append(1, '\x1f').append(config);
}

std::string probe_family(const std::string& probe) { return probe.substr(0, probe.find('.')); }

}  // namespace sdc
