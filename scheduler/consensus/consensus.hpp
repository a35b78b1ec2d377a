// Cross-device consensus: devices of one equivalence class ran the same deterministic probes with
// the same seed, so their output digests must be equal. Within each (class, probe) a golden digest
// (the host's IEEE golden, or a golden file's) decides where there is one; otherwise a strict
// majority of three or more wins and the minority are suspects; otherwise a split vote is
// inconclusive, never a guess.
// Disagreeing pairs accuse each other; the device accused by the most distinct peers comes first.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "host/communicator.hpp"
#include "host/device.hpp"
#include "probes/result.hpp"

namespace sdc {

inline constexpr const char* kConsensusProbe = "xdev.consensus";

struct ConsensusRecord {
  std::string host;
  int rank = 0;
  int device_index = 0;
  std::string uuid;
  std::string pci_bus_id;
  std::string class_key;  // equivalence class, without the probe
  std::string probe;
  Digest128 digest;
  std::optional<Digest128> golden;  // the host's IEEE golden digest, where the probe has one
};

enum class VoteKind { kAgreed, kMajority, kGolden, kInconclusive };
const char* vote_kind_name(VoteKind kind);

struct ClassVote {
  std::string class_key;
  std::string probe;
  VoteKind kind = VoteKind::kAgreed;
  std::optional<Digest128> winner;
  std::vector<size_t> members;   // indices into the records
  std::vector<size_t> suspects;  // members whose digest lost
};

struct Suspect {
  ConsensusRecord device;           // probe and digest of its first losing vote
  int accusers = 0;                 // distinct peers whose digest differed from its own
  std::vector<std::string> probes;  // the probes it lost
};

struct ConsensusOutcome {
  std::vector<ConsensusRecord> records;
  std::vector<ClassVote> votes;
  std::vector<Suspect> suspects;  // most accusers first
  // qualify --golden: "probe on class" for this rank's results the golden file has no digest for.
  std::vector<std::string> golden_missing;
  bool inconclusive() const;
  // Whether a suspect or an inconclusive vote involves a device of (host, rank).
  bool implicates(const std::string& host, int rank) const;
};

ConsensusOutcome vote(std::vector<ConsensusRecord> records);

// (backend, model, compute units, compute capability, driver and runtime versions, library
// version and algorithm where the probe reports them, seed).
std::string equivalence_class(const DeviceIdentity& device, const ProbeResult& result);

// One record per result that carries a digest (passed or failed; skipped results have none).
std::vector<ConsensusRecord> consensus_records(const std::vector<DeviceIdentity>& devices,
                                               const std::vector<ProbeResult>& results, const std::string& host,
                                               int rank);

// Gathers every rank's records over `comm` and votes; every rank gets the same outcome.
ConsensusOutcome gather_and_vote(Communicator& comm, const std::vector<ConsensusRecord>& mine);

nlohmann::json to_json(const ConsensusOutcome& outcome);

}  // namespace sdc
