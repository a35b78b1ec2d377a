#include "fleet/fleet_sdc_tally.hpp"

#include <algorithm>

namespace sdc {
namespace {

double earliest(double a, double b) { return a == 0 ? b : b == 0 ? a : std::min(a, b); }

}  // namespace

void DigestTally::add(uint32_t device, bool failed, double at) {
  ++runs;
  ids_.push_back(device);
  if (ids_.size() >= 2 * unique_ + 64) deduplicate();
  if (members.size() >= kMaxNamedPerDigest) return;
  const bool known =
      std::any_of(members.begin(), members.end(), [&](const VoteMember& m) { return m.device == device; });
  if (!known) members.push_back({device, failed, at});
}

void DigestTally::merge(DigestTally&& o, const std::vector<uint32_t>& remap) {
  runs += o.runs;
  for (uint32_t id : o.device_ids()) ids_.push_back(remap[id]);
  deduplicate();
  for (auto& m : o.members) {
    m.device = remap[m.device];
    if (members.size() >= kMaxNamedPerDigest) break;
    const bool known =
        std::any_of(members.begin(), members.end(), [&](const VoteMember& x) { return x.device == m.device; });
    if (!known) members.push_back(m);
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
  tested_s += o.tested_s;
  failures += o.failures;
  first_failure = earliest(first_failure, o.first_failure);
}

void FleetDevice::merge(const FleetDevice& o) {
  first_seen = earliest(first_seen, o.first_seen);
  last_seen = std::max(last_seen, o.last_seen);
  for (const auto& [family, counts] : o.families) families[family].add(counts);
  for (const auto& s : o.sites) {
    if (sites.size() < kMaxSitesPerDevice) sites.push_back(s);
  }
  released_at = std::max(released_at, o.released_at);
  failures_before_release += o.failures_before_release;
  failures_after_release += o.failures_after_release;
  if (driver.empty()) driver = o.driver;
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
    if (!added && !into.golden) into.golden = vote.golden;
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

std::string fleet_device_key(std::string_view host, std::string_view uuid) {
  std::string key;
  key.reserve(host.size() + 1 + uuid.size());
  return key.append(host).append(1, '/').append(uuid);
}

std::string probe_family(const std::string& probe) { return probe.substr(0, probe.find('.')); }

}  // namespace sdc
