// `qualify --seed fleet` and `fleet sdc` through the real binary: nodes of CPU virtual devices run
// the same fleet seed; one device hands back a consistent wrong digest (model=digest), passes its
// own node's checks, and is named by the fleet.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/run_sdcprobe.hpp"

namespace sdc::test {
namespace {

namespace fs = std::filesystem;

class FleetCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fleet_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    defaults_ = (dir_ / "sdcprobe").string();
    std::ofstream(defaults_) << "# site settings\nFLEET_SECRET=cli-test-secret\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  Outcome with_secret(const std::string& args) const {
    return run_command("SDCPROBE_DEFAULTS_FILE=" + defaults_ + " " + std::string(SDC_BINARY_DIR) + "/cli/sdcprobe " +
                       args);
  }
  // A node's qualify report, with the node's own host name (these runs share one machine).
  nlohmann::json qualify(const std::string& host, int devices, const std::string& inject, int expect_code) const {
    const std::string path = (dir_ / (host + ".json")).string();
    const Outcome o = with_secret("--backend cpu --cpu-devices " + std::to_string(devices) +
                                  " qualify --seed fleet --size 64K --iterations 64 --json " + path +
                                  (inject.empty() ? "" : " --inject '" + inject + "'"));
    EXPECT_EQ(o.code, expect_code) << o.out;
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in);
    j["host"] = host;
    std::ofstream(path) << j.dump();
    return j;
  }

  fs::path dir_;
  std::string defaults_;
};

TEST_F(FleetCli, SeedFleetNeedsTheSiteSecret) {
  const Outcome o = run_command("SDCPROBE_DEFAULTS_FILE=" + (dir_ / "absent").string() + " " +
                                std::string(SDC_BINARY_DIR) + "/cli/sdcprobe --backend cpu qualify --seed fleet");
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("FLEET_SECRET"), std::string::npos) << o.out;
  EXPECT_EQ(with_secret("--backend cpu qualify --seed fleet:week").code, 2);
}

TEST_F(FleetCli, FleetNamesTheDeviceItsOwnNodePassed) {
  const nlohmann::json a = qualify("node-a", 2, "", 0);
  // Its own checks pass: the digest alone is wrong.
  const nlohmann::json b = qualify("node-b", 3, "device=1,probe=sfu.transcendental,model=digest", 0);
  qualify("node-c", 4, "", 0);
  EXPECT_EQ(a["seed"], b["seed"]);
  EXPECT_EQ(a["seed_origin"].get<std::string>().rfind("fleet:day:", 0), 0u) << a.dump();
  const std::string bad_uuid = b["devices"][1]["uuid"], bad_bus = b["devices"][1]["pci_bus_id"];

  const std::string out_json = (dir_ / "fleet.json").string();
  const std::string golden = (dir_ / "golden.json").string();
  const Outcome f = sdcprobe("fleet sdc " + (dir_ / "node-a.json").string() + " " + (dir_ / "node-b.json").string() +
                             " " + (dir_ / "node-c.json").string() + " --json " + out_json + " --svg " +
                             (dir_ / "fleet.svg").string() + " --prom " + (dir_ / "fleet.prom").string());
  EXPECT_EQ(f.code, 1) << f.out;
  std::ifstream in(out_json);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["suspects"].size(), 1u) << j.dump(2);
  EXPECT_EQ(j["suspects"][0]["host"], "node-b");
  EXPECT_EQ(j["suspects"][0]["uuid"], bad_uuid);
  EXPECT_EQ(j["suspects"][0]["pci_bus_id"], bad_bus);
  EXPECT_EQ(j["suspects"][0]["probes"], nlohmann::json::array({"sfu.transcendental"}));
  EXPECT_EQ(j["suspects"][0]["majority_size"], 8);
  EXPECT_EQ(j["suspects"][0]["own_checks_failed"], false);
  EXPECT_EQ(j["votes"]["inconclusive"], 0);
  EXPECT_EQ(j["inputs"]["reports_with_injections"], 1);
  EXPECT_NE(f.out.find(bad_uuid), std::string::npos) << f.out;
  EXPECT_TRUE(fs::exists(dir_ / "fleet.svg"));
  std::ifstream prom(dir_ / "fleet.prom");
  EXPECT_NE(std::string(std::istreambuf_iterator<char>(prom), {}).find("sdcprobe_fleet_suspects 1"), std::string::npos);

  // The golden file of the clean nodes' majority equals one recorded on a clean node with the same
  // seed and sizes. (With node-b, sfu.transcendental's majority is 8 of 9, under 99%: no entry.)
  const Outcome clean = sdcprobe("fleet sdc " + (dir_ / "node-a.json").string() + " " +
                                 (dir_ / "node-c.json").string() + " --golden-out " + golden + " --golden-min-nodes 2");
  ASSERT_EQ(clean.code, 0) << clean.out;
  const std::string recorded = (dir_ / "recorded.json").string();
  const Outcome r =
      sdcprobe("--backend cpu --cpu-devices 2 golden record --out " + recorded + " --level quick --seed " +
               std::to_string(a["seed"].get<uint64_t>()) + " --size 64K --iterations 64");
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream g1(golden), g2(recorded);
  EXPECT_EQ(nlohmann::json::parse(g1), nlohmann::json::parse(g2));

  // Any one node alone: its votes have no peers across nodes... except its own devices, which agree.
  const Outcome alone = sdcprobe("fleet sdc " + (dir_ / "node-b.json").string());
  EXPECT_EQ(alone.code, 1) << alone.out;  // three devices on node-b: the local majority sees it too
}

TEST_F(FleetCli, SweepSpoolsEachPassWithTheFleetSeed) {
  const fs::path spool = dir_ / "spool";
  fs::create_directories(spool);
  const Outcome s =
      with_secret("--backend cpu --cpu-devices 3 sweep --once --level quick --state-dir " + (dir_ / "state").string() +
                  " --spool-dir " + spool.string() + " --seed fleet:hour --size 64K --iterations 64 --budget 60s");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("(fleet:hour:"), std::string::npos) << s.out;
  std::vector<fs::path> files(fs::directory_iterator(spool), fs::directory_iterator{});
  ASSERT_EQ(files.size(), 1u);
  std::ifstream in(files[0]);
  const nlohmann::json report = nlohmann::json::parse(in);
  EXPECT_EQ(report["mode"], "sweep");
  EXPECT_EQ(report["seed_origin"].get<std::string>().rfind("fleet:hour:", 0), 0u) << report["seed_origin"];

  // The spool directory as a site would collect it: three agreeing devices, nothing found.
  const std::string out_json = (dir_ / "fleet.json").string();
  const Outcome f = sdcprobe("fleet sdc " + spool.string() + " --json " + out_json);
  EXPECT_EQ(f.code, 0) << f.out;
  std::ifstream fj(out_json);
  const nlohmann::json j = nlohmann::json::parse(fj);
  EXPECT_GT(j["votes"]["agreed"].get<int>(), 0) << j.dump(2);
  EXPECT_TRUE(j["suspects"].empty());
  EXPECT_EQ(j["inputs"]["reports"], 1);

  // The sweep's history holds the same digests under the same classes and parameters: alone it
  // casts the same votes, and with the report beside it each device still counts once.
  const std::string history = (dir_ / "state" / "history.db").string();
  auto fleet_json = [&](const std::string& inputs) {
    const std::string path = (dir_ / "out.json").string();
    const Outcome o = sdcprobe("fleet sdc " + inputs + " --json " + path);
    EXPECT_EQ(o.code, 0) << o.out;
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  };
  const nlohmann::json alone = fleet_json(history);
  EXPECT_EQ(alone["inputs"]["histories"], 1);
  EXPECT_EQ(alone["inputs"]["history_results_without_digests"], 0);
  EXPECT_EQ(alone["votes"], j["votes"]) << alone.dump(2);
  const nlohmann::json both = fleet_json(history + " " + spool.string());
  EXPECT_EQ(both["votes"], j["votes"]) << both.dump(2);
  EXPECT_TRUE(both["suspects"].empty());
}

TEST_F(FleetCli, BadReportIsRefusedNamingTheFileAndField) {
  const std::string path = (dir_ / "broken.json").string();
  std::ofstream(path) << R"({"tool": "sdcprobe", "host": "x", "started_at": "yesterday"})";
  const Outcome o = sdcprobe("fleet sdc " + path);
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find(path + ": started_at"), std::string::npos) << o.out;
  EXPECT_EQ(sdcprobe("fleet sdc " + (dir_ / "missing.json").string()).code, 2);
}

}  // namespace
}  // namespace sdc::test
