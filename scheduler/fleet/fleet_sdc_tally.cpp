#include "scheduler/fleet/fleet_sdc_tally.hpp"

#include <algorithm>

namespace sdc {
namespace {

double earliest(double a, double b) { return a == 0 ? b : b == 0 ? a : std::min(a, b); }

void merge_digest(DigestTally& into, DigestTally&& from) {
  into.runs += from.runs;
  for (auto& m : from.members) {
    const bool known = std::any_of(into.members.begin(), into.members.end(),
                                   [&](const VoteMember& x) { return x.device == m.device; });
    if (known) continue;
    if (into.members.size() < kMaxNamedPerDigest) {
      into.members.push_back(std::move(m));
    } else {
      into.truncated = true;
    }
  }
  into.truncated = into.truncated || from.truncated;
  for (const auto& h : from.hosts) {
    if (into.hosts.size() < kMaxHostsPerDigest) into.hosts.insert(h);
  }
}

}  // namespace

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

void FleetTally::merge(FleetTally&& o) {
  for (auto& [key, device] : o.devices) {
    auto [it, added] = devices.try_emplace(key, device);
    if (!added) it->second.merge(device);
  }
  for (auto& [key, vote] : o.votes) {
    auto [it, added] = votes.try_emplace(key);
    if (added) {
      it->second = std::move(vote);
      continue;
    }
    if (!it->second.golden) it->second.golden = vote.golden;
    for (auto& [digest, tally] : vote.digests) merge_digest(it->second.digests[digest], std::move(tally));
  }
  for (const auto& [key, n] : o.failures_by_day) failures_by_day[key] += n;
  files += o.files;
  reports += o.reports;
  histories += o.histories;
  results += o.results;
  skipped += o.skipped;
  with_injections += o.with_injections;
}

std::string fleet_device_key(const std::string& host, const std::string& uuid) { return host + "/" + uuid; }

std::string probe_family(const std::string& probe) { return probe.substr(0, probe.find('.')); }

}  // namespace sdc
