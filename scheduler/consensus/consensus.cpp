#include "scheduler/consensus/consensus.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace sdc {
namespace {

std::string device_key(const ConsensusRecord& r) { return r.host + "/" + std::to_string(r.rank) + "/" + r.uuid; }

nlohmann::json record_json(const ConsensusRecord& r) {
  nlohmann::json j = {{"host", r.host},
                      {"rank", r.rank},
                      {"device_index", r.device_index},
                      {"uuid", r.uuid},
                      {"pci_bus_id", r.pci_bus_id},
                      {"class", r.class_key},
                      {"probe", r.probe},
                      {"digest", digest_hex(r.digest)}};
  if (r.golden) j["golden"] = digest_hex(*r.golden);
  return j;
}

ConsensusRecord record_from_json(const nlohmann::json& j) {
  ConsensusRecord r;
  r.host = j.at("host").get<std::string>();
  r.rank = j.at("rank").get<int>();
  r.device_index = j.at("device_index").get<int>();
  r.uuid = j.at("uuid").get<std::string>();
  r.pci_bus_id = j.at("pci_bus_id").get<std::string>();
  r.class_key = j.at("class").get<std::string>();
  r.probe = j.at("probe").get<std::string>();
  r.digest = parse_digest(j.at("digest").get<std::string>());
  if (j.contains("golden")) r.golden = parse_digest(j.at("golden").get<std::string>());
  return r;
}

void decide(const std::vector<ConsensusRecord>& records, ClassVote& v) {
  std::map<std::pair<uint64_t, uint64_t>, size_t> counts;
  std::optional<Digest128> golden;
  for (size_t i : v.members) {
    ++counts[{records[i].digest.hi, records[i].digest.lo}];
    if (!golden) golden = records[i].golden;
  }
  const size_t n = v.members.size();
  std::optional<Digest128> winner;
  for (const auto& [d, count] : counts) {
    if (n >= 3 && 2 * count > n) winner = Digest128{d.second, d.first};
  }
  if (golden) {
    // Known correct (IEEE or recorded on known-good hardware): it also overrules a majority that
    // shares a wrong answer.
    const bool all_match = counts.size() == 1 && records[v.members.front()].digest == *golden;
    v.kind = all_match ? VoteKind::kAgreed : VoteKind::kGolden;
    winner = golden;
  } else if (winner) {
    v.kind = counts.size() == 1 ? VoteKind::kAgreed : VoteKind::kMajority;
  } else if (counts.size() == 1) {
    winner = records[v.members.front()].digest;
    v.kind = VoteKind::kAgreed;
  } else {
    v.kind = VoteKind::kInconclusive;
    return;
  }
  v.winner = winner;
  for (size_t i : v.members) {
    if (records[i].digest != *winner) v.suspects.push_back(i);
  }
}

}  // namespace

const char* vote_kind_name(VoteKind kind) {
  switch (kind) {
    case VoteKind::kAgreed: return "agreed";
    case VoteKind::kMajority: return "majority";
    case VoteKind::kGolden: return "golden";
    case VoteKind::kInconclusive: return "inconclusive";
  }
  return "";
}

bool ConsensusOutcome::inconclusive() const {
  return std::any_of(votes.begin(), votes.end(), [](const ClassVote& v) { return v.kind == VoteKind::kInconclusive; });
}

bool ConsensusOutcome::implicates(const std::string& host, int rank) const {
  for (const auto& s : suspects) {
    if (s.device.host == host && s.device.rank == rank) return true;
  }
  for (const auto& v : votes) {
    if (v.kind != VoteKind::kInconclusive) continue;
    for (size_t i : v.members) {
      if (records[i].host == host && records[i].rank == rank) return true;
    }
  }
  return false;
}

ConsensusOutcome vote(std::vector<ConsensusRecord> records) {
  ConsensusOutcome out;
  out.records = std::move(records);
  const auto& recs = out.records;
  std::map<std::pair<std::string, std::string>, size_t> by_group;
  for (size_t i = 0; i < recs.size(); ++i) {
    auto [it, added] = by_group.try_emplace({recs[i].class_key, recs[i].probe}, out.votes.size());
    if (added) {
      ClassVote v;
      v.class_key = recs[i].class_key;
      v.probe = recs[i].probe;
      out.votes.push_back(std::move(v));
    }
    out.votes[it->second].members.push_back(i);
  }
  // Pairwise accusations over every vote: a peer counts once per device, however many probes differ.
  std::map<std::string, std::set<std::string>> accusers;
  for (auto& v : out.votes) {
    decide(recs, v);
    for (size_t a : v.members) {
      for (size_t b : v.members) {
        if (recs[a].digest != recs[b].digest) accusers[device_key(recs[a])].insert(device_key(recs[b]));
      }
    }
  }
  std::map<std::string, size_t> suspect_at;
  for (const auto& v : out.votes) {
    for (size_t i : v.suspects) {
      auto [it, added] = suspect_at.try_emplace(device_key(recs[i]), out.suspects.size());
      if (added) {
        Suspect s;
        s.device = recs[i];
        s.accusers = static_cast<int>(accusers[device_key(recs[i])].size());
        out.suspects.push_back(std::move(s));
      }
      out.suspects[it->second].probes.push_back(v.probe);
    }
  }
  std::stable_sort(out.suspects.begin(), out.suspects.end(), [](const Suspect& a, const Suspect& b) {
    if (a.accusers != b.accusers) return a.accusers > b.accusers;
    return std::tie(a.device.rank, a.device.device_index) < std::tie(b.device.rank, b.device.device_index);
  });
  return out;
}

std::string equivalence_class(const DeviceIdentity& d, const ProbeResult& r) {
  // Only what can change a result: the CPU's kernel release cannot (a kernel upgrade must not orphan
  // every golden file), a GPU driver can (it JIT-compiles PTX).
  std::string key = d.backend + "|" + d.name + "|" + std::to_string(d.compute_units) + "|" + d.compute_capability +
                    "|" + (d.backend == "cpu" ? std::string() : d.driver_version + "|") + d.runtime_version;
  for (const char* field : {"library_version", "algorithm"}) {
    if (r.params.contains(field)) key += "|" + r.params.at(field).get<std::string>();
  }
  return key + "|seed " + std::to_string(r.seed);
}

std::vector<ConsensusRecord> consensus_records(const std::vector<DeviceIdentity>& devices,
                                               const std::vector<ProbeResult>& results, const std::string& host,
                                               int rank) {
  std::vector<ConsensusRecord> records;
  for (const auto& r : results) {
    if (!r.digest) continue;
    for (const auto& d : devices) {
      if (d.uuid != r.device_uuid) continue;
      ConsensusRecord c;
      c.host = host;
      c.rank = rank;
      c.device_index = d.index;
      c.uuid = d.uuid;
      c.pci_bus_id = d.pci_bus_id;
      c.class_key = equivalence_class(d, r);
      c.probe = r.probe;
      c.digest = *r.digest;
      c.golden = r.golden_digest;
      records.push_back(std::move(c));
    }
  }
  return records;
}

ConsensusOutcome gather_and_vote(Communicator& comm, const std::vector<ConsensusRecord>& mine) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& r : mine) array.push_back(record_json(r));
  std::vector<ConsensusRecord> all;
  for (const std::string& text : comm.all_gather(array.dump())) {
    for (const auto& j : nlohmann::json::parse(text)) all.push_back(record_from_json(j));
  }
  return vote(std::move(all));
}

nlohmann::json to_json(const ConsensusOutcome& outcome) {
  nlohmann::json votes = nlohmann::json::array();
  for (const auto& v : outcome.votes) {
    nlohmann::json members = nlohmann::json::array();
    for (size_t i : v.members) members.push_back(record_json(outcome.records[i]));
    nlohmann::json j = {
        {"class", v.class_key}, {"probe", v.probe}, {"kind", vote_kind_name(v.kind)}, {"members", members}};
    if (v.winner) j["winner"] = digest_hex(*v.winner);
    votes.push_back(std::move(j));
  }
  nlohmann::json suspects = nlohmann::json::array();
  for (const auto& s : outcome.suspects) {
    suspects.push_back({{"host", s.device.host},
                        {"rank", s.device.rank},
                        {"device_index", s.device.device_index},
                        {"uuid", s.device.uuid},
                        {"pci_bus_id", s.device.pci_bus_id},
                        {"accusers", s.accusers},
                        {"probes", s.probes}});
  }
  nlohmann::json j = {
      {"probe", kConsensusProbe}, {"votes", votes}, {"suspects", suspects}, {"inconclusive", outcome.inconclusive()}};
  if (!outcome.golden_missing.empty()) j["golden_missing"] = outcome.golden_missing;
  return j;
}

}  // namespace sdc
