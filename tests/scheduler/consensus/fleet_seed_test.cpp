// The fleet seed: the same inputs on every node of a class within a UTC day or hour, from the site secret.
#include "scheduler/consensus/fleet_seed.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "host/error.hpp"

namespace sdc {
namespace {

constexpr int64_t kDay0 = 1796083200;  // 2026-12-01T00:00:00Z

TEST(FleetSeed, SameEverywhereInAPeriodAndNewEachPeriod) {
  const FleetSeed a = fleet_seed("s3cret", SeedPeriod::kDay, kDay0 + 10);
  EXPECT_EQ(a.seed, fleet_seed("s3cret", SeedPeriod::kDay, kDay0 + 86399).seed);
  EXPECT_NE(a.seed, fleet_seed("s3cret", SeedPeriod::kDay, kDay0 + 86400).seed);
  EXPECT_NE(a.seed, fleet_seed("other", SeedPeriod::kDay, kDay0 + 10).seed);
  EXPECT_EQ(a.origin, "fleet:day:2026-12-01");
  const FleetSeed h = fleet_seed("s3cret", SeedPeriod::kHour, kDay0 + 15 * 3600 + 5);
  EXPECT_EQ(h.origin, "fleet:hour:2026-12-01T15");
  EXPECT_NE(h.seed, fleet_seed("s3cret", SeedPeriod::kHour, kDay0 + 16 * 3600).seed);
  EXPECT_EQ(parse_fleet_seed("fleet"), SeedPeriod::kDay);
  EXPECT_EQ(parse_fleet_seed("fleet:hour"), SeedPeriod::kHour);
  EXPECT_EQ(parse_fleet_seed("42"), std::nullopt);
  EXPECT_THROW(parse_fleet_seed("fleet:week"), InputError);
}

TEST(FleetSeed, SecretIsReadOrRefusedNamingTheSetting) {
  const auto dir = std::filesystem::temp_directory_path() / ("fleet_seed_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "sdcprobe").string();
  std::ofstream(path) << "# site settings\nSDCPROBE_LEVEL=quick\nFLEET_SECRET=\"abc def\"\n";
  EXPECT_EQ(read_fleet_secret(path), "abc def");
  std::ofstream(path) << "#FLEET_SECRET=commented\n";
  try {
    read_fleet_secret(path);
    FAIL() << "a file without the setting was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("FLEET_SECRET"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_fleet_secret((dir / "missing").string()), InputError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sdc
