// Golden files: digests of the deterministic probes per equivalence class, recorded on known-good
// hardware (`sdcprobe golden record`) and compared against by `qualify --golden`. Versioned JSON,
// documented in docs/consensus.md and checked field by field on load.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "probes/probe.hpp"
#include "scheduler/consensus/consensus.hpp"

namespace sdc {

// Version 2: the digest of the 32x32-bit multiply mix (version 1 files hold the earlier digest).
inline constexpr int kGoldenVersion = 2;
// The largest size_bytes a golden file may hold (256 TiB): far from any allocation arithmetic's wrap.
inline constexpr uint64_t kMaxGoldenSizeBytes = uint64_t{1} << 48;

struct GoldenFile {
  // The run parameters the digests depend on; qualify --golden runs with them.
  uint64_t seed = 0;
  Level level = Level::kQuick;
  std::optional<uint64_t> size_bytes;
  std::optional<uint32_t> iterations;
  std::map<std::pair<std::string, std::string>, Digest128> digests;  // (class, probe) -> digest
};

// The probes whose digests a golden file holds.
std::vector<std::string> golden_probe_globs();

// From a clean run's records. Throws std::runtime_error when a vote named a suspect or was
// inconclusive: such a machine is not known-good.
GoldenFile golden_from_outcome(const ConsensusOutcome& outcome, uint64_t seed, Level level,
                               std::optional<uint64_t> size_bytes, std::optional<uint32_t> iterations);

std::string golden_to_json(const GoldenFile& golden);
// Throws InputError naming the file and the field.
GoldenFile load_golden(const std::string& path);

// Gives each record without a golden digest the file's digest for its (class, probe); returns the
// (class, probe) pairs the file lacks, each once, as "probe on class". A run with any such pair
// could not be compared as asked: it exits 2 (could not test) unless it found a fault.
std::vector<std::string> apply_golden(const GoldenFile& golden, std::vector<ConsensusRecord>& records);

}  // namespace sdc
