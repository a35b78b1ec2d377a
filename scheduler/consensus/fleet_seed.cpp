#include "scheduler/consensus/fleet_seed.hpp"

#include <cstdlib>
#include <ctime>
#include <fstream>

#include "host/error.hpp"
#include "host/input_file.hpp"
#include "kernels/common/random.hpp"

namespace sdc {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

std::optional<SeedPeriod> parse_fleet_seed(const std::string& text) {
  if (text.rfind("fleet", 0) != 0) return std::nullopt;
  if (text == "fleet" || text == "fleet:day") return SeedPeriod::kDay;
  if (text == "fleet:hour") return SeedPeriod::kHour;
  throw InputError("--seed: expected a number, fleet, fleet:day or fleet:hour, got '" + text + "'");
}

std::string site_defaults_path() {
  const char* path = std::getenv(kSiteDefaultsEnv);
  return path != nullptr && *path != '\0' ? path : kSiteDefaultsFile;
}

std::string read_fleet_secret(const std::string& path) {
  const std::string why = std::string("--seed fleet needs the site secret ") + kFleetSecretSetting + "= in";
  std::ifstream in = open_input(path, why);
  std::string secret;
  const std::string prefix = std::string(kFleetSecretSetting) + "=";
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (line.rfind("export ", 0) == 0) line = trim(line.substr(7));
    if (line.rfind(prefix, 0) != 0) continue;
    std::string value = line.substr(prefix.size());
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    secret = value;
  }
  check_read(in, path, why);
  if (secret.empty()) throw InputError(why + " " + path + ": the setting is missing or empty");
  return secret;
}

FleetSeed fleet_seed(const std::string& secret, SeedPeriod period, int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof(when), period == SeedPeriod::kDay ? "%Y-%m-%d" : "%Y-%m-%dT%H", &tm);
  FleetSeed out;
  out.origin = std::string("fleet:") + (period == SeedPeriod::kDay ? "day:" : "hour:") + when;
  // FNV-1a over the secret and the period's name, each byte through the SplitMix finaliser.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : secret + "\n" + out.origin) h = mix64((h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL);
  out.seed = h;
  return out;
}

}  // namespace sdc
