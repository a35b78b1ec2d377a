// The fleet seed: `--seed fleet[:day|:hour]` derives the run seed from the UTC day (or hour) and a
// site secret (FLEET_SECRET= in /etc/default/sdcprobe), so every node of a class runs the same inputs
// in the same period and the digests of the deterministic probes compare across the whole fleet,
// while the inputs still change over time. The secret keeps the inputs from being known in advance;
// the derivation is a mix, not a cryptographic MAC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sdc {

inline constexpr const char* kSiteDefaultsFile = "/etc/default/sdcprobe";
// Overrides kSiteDefaultsFile (tests, and sites that keep the secret elsewhere).
inline constexpr const char* kSiteDefaultsEnv = "SDCPROBE_DEFAULTS_FILE";
inline constexpr const char* kFleetSecretSetting = "FLEET_SECRET";

enum class SeedPeriod { kDay, kHour };

// "fleet", "fleet:day" or "fleet:hour"; nothing for any text not starting with "fleet". Throws
// InputError for another period ("fleet:week").
std::optional<SeedPeriod> parse_fleet_seed(const std::string& text);

// The file the secret is read from: $SDCPROBE_DEFAULTS_FILE, else /etc/default/sdcprobe.
std::string site_defaults_path();

// The FLEET_SECRET= value of a shell-assignment file (comments and blank lines skipped, one level of
// single or double quotes removed; the last assignment wins). Throws InputError naming the setting
// and the file when the file cannot be read or holds no non-empty FLEET_SECRET.
std::string read_fleet_secret(const std::string& path);

struct FleetSeed {
  uint64_t seed = 0;
  std::string origin;  // "fleet:day:2026-12-01" or "fleet:hour:2026-12-01T15"
};

// The seed of the period holding `unix_seconds` (UTC).
FleetSeed fleet_seed(const std::string& secret, SeedPeriod period, int64_t unix_seconds);

}  // namespace sdc
