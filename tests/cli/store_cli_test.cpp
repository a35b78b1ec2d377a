// The fleet store through the real binary: qualify and sweep on CPU virtual devices write their rows
// beside their reports, `fleet import` of the same reports and of the sweep's history.db, and a
// store that cannot be written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "scheduler/consensus/consensus.hpp"
#include "scheduler/qualify/runner.hpp"
#include "scheduler/qualify/worker_protocol.hpp"
#include "tests/cli/run_sdcprobe.hpp"

namespace sdc::test {
namespace {

namespace fs = std::filesystem;

class StoreCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("store_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every file of a store's table, by path relative to the store, with its bytes; hidden names too.
  static std::map<std::string, std::string> files(const fs::path& store) {
    std::map<std::string, std::string> out;
    if (!fs::exists(store)) return out;
    for (const auto& e : fs::recursive_directory_iterator(store)) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path());
      out[fs::relative(e.path(), store).string()] = std::string(std::istreambuf_iterator<char>(in), {});
    }
    return out;
  }
  static std::vector<nlohmann::json> rows(const fs::path& store, const std::string& table) {
    std::vector<nlohmann::json> out;
    for (const auto& [path, bytes] : files(store)) {
      if (path.rfind(table + "/", 0) != 0) continue;
      std::istringstream in(bytes);
      for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }

  fs::path dir_;
};

TEST_F(StoreCli, QualifyWritesTheRowsItsReportSaysAndAnImportOfItWritesTheSameFiles) {
  const std::string report_path = (dir_ / "q.json").string();
  const fs::path store = dir_ / "store";
  // One device's walking-bits test hands back a flipped bit: a failure, with its sites.
  const Outcome o =
      sdcprobe("--backend cpu --cpu-devices 2 qualify --size 64K --iterations 4 --json " + report_path + " --store " +
               store.string() + " --inject 'device=1,probe=mem.walking_bits,model=bitflip,bit=5,mode=permanent'");
  ASSERT_EQ(o.code, 1) << o.out;
  std::ifstream in(report_path);
  const nlohmann::json report = nlohmann::json::parse(in);
  const auto results = rows(store, "results");
  ASSERT_EQ(results.size(), report["results"].size());
  ASSERT_GT(results.size(), 10u);
  std::map<std::string, DeviceIdentity> devices;
  for (const auto& d : report["devices"]) devices[d["uuid"]] = identity_from_json(d);
  size_t failures = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const ProbeResult r = result_from_json(report["results"][i]);
    const nlohmann::json& row = results[i];
    EXPECT_EQ(row["probe"], r.probe);
    EXPECT_EQ(row["device_uuid"], r.device_uuid);
    EXPECT_EQ(row["outcome"], outcome_name(r.outcome));
    EXPECT_EQ(row["class_key"], equivalence_class(devices.at(r.device_uuid), r));
    EXPECT_EQ(row["digest"], report["results"][i].value("digest", nlohmann::json()));
    EXPECT_EQ(row["checked"], r.report.checked);
    EXPECT_EQ(row["host"], report["host"]);
    EXPECT_EQ(row["injected"], true);
    failures += r.outcome == sdc::Outcome::kFail;
  }
  EXPECT_EQ(failures, 1u);
  const auto sites = rows(store, "sites");
  ASSERT_FALSE(sites.empty());
  EXPECT_EQ(sites[0]["probe"], "mem.walking_bits");
  EXPECT_EQ(sites[0]["bits"], nlohmann::json::array({5}));
  EXPECT_EQ(rows(store, "devices").size(), 2u);

  // The same report imported: the same files, byte for byte; twice: still no more.
  const auto written = files(store);
  const fs::path imported = dir_ / "imported";
  Outcome i = sdcprobe("fleet import " + report_path + " --store " + imported.string());
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_NE(i.out.find("1 reports and 0 histories, " + std::to_string(results.size()) + " results"), std::string::npos)
      << i.out;
  EXPECT_EQ(files(imported), written);
  i = sdcprobe("fleet import " + report_path + " " + dir_.string() + " --store " + store.string());
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_EQ(files(store), written);
}

TEST_F(StoreCli, ASweepWritesEachPassAndItsHistoryImportsTheSameResults) {
  const fs::path state = dir_ / "state", store = dir_ / "store", from_history = dir_ / "from_history";
  fs::create_directories(state);
  const Outcome o = sdcprobe(
      "--backend cpu --cpu-devices 2 sweep --once --idle-check true --level quick --size 64K "
      "--iterations 4 --budget 60s --state-dir " +
      state.string() + " --store " + store.string());
  ASSERT_EQ(o.code, 0) << o.out;
  const auto pass = rows(store, "results");
  ASSERT_GT(pass.size(), 10u);
  const std::string history = (state / "history.db").string();
  const Outcome i = sdcprobe("fleet import " + history + " --store " + from_history.string());
  ASSERT_EQ(i.code, 0) << i.out;
  const auto imported = rows(from_history, "results");
  ASSERT_EQ(imported.size(), pass.size());
  for (size_t k = 0; k < pass.size(); ++k) {
    for (const char* column : {"device_uuid", "probe", "outcome", "class_key", "digest", "checked", "run_seed"}) {
      EXPECT_EQ(imported[k][column], pass[k][column]) << column << " of row " << k;
    }
  }
  // The history is read, never written; a second import leaves the files as they were.
  const auto once = files(from_history);
  ASSERT_EQ(sdcprobe("fleet import " + history + " --store " + from_history.string()).code, 0);
  EXPECT_EQ(files(from_history), once);
}

TEST_F(StoreCli, AStoreThatCannotBeWrittenIsExit2BeforeAnyProbe) {
  const fs::path file = dir_ / "a-file";
  std::ofstream(file) << "x";
  const std::string store = (file / "store").string();
  const std::string report_path = (dir_ / "q.json").string();
  Outcome o = sdcprobe("--backend cpu qualify --size 64K --iterations 4 --json " + report_path + " --store " + store);
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("sdcprobe: error: --store: cannot write " + store), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("seed 0x"), std::string::npos) << o.out;  // no run began
  EXPECT_FALSE(fs::exists(report_path));
  o = sdcprobe("--backend cpu sweep --once --idle-check true --state-dir " + (dir_ / "state").string() + " --store " +
               store);
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find(store), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("pass 1"), std::string::npos) << o.out;
  o = sdcprobe("fleet import " + (dir_ / "absent.json").string() + " --store " + (dir_ / "s").string());
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("absent.json"), std::string::npos) << o.out;
}

TEST_F(StoreCli, ABadReportIsExit2NamingTheFileAndTheGoodOnesBeforeItStay) {
  const std::string good = (dir_ / "a.json").string(), bad = (dir_ / "b.json").string();
  ASSERT_EQ(sdcprobe("--backend cpu run alu.fma32 --iterations 4 --json " + good).code, 0);
  std::ifstream in(good);
  nlohmann::json j = nlohmann::json::parse(in);
  j["results"][0]["device_uuid"] = "CPU-nobody";
  std::ofstream(bad) << j.dump();
  const fs::path store = dir_ / "store";
  const Outcome o = sdcprobe("fleet import " + good + " " + bad + " --store " + store.string());
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find(bad + ": results[0].device_uuid"), std::string::npos) << o.out;
  EXPECT_EQ(rows(store, "results").size(), 1u);  // a.json's: importing both again after a fix adds nothing twice

  // A truncated report, and an SQLite file that is not a history: exit 2 naming each, nothing written.
  const std::string truncated = (dir_ / "t.json").string(), foreign = (dir_ / "other.db").string();
  std::ofstream(truncated) << j.dump().substr(0, 200);
  std::ofstream(foreign) << std::string("SQLite format 3\0", 16) << std::string(4080, '\0');
  const auto before = files(store);
  for (const std::string& input : {truncated, foreign}) {
    const Outcome f = sdcprobe("fleet import " + input + " --store " + store.string());
    EXPECT_EQ(f.code, 2) << f.out;
    EXPECT_NE(f.out.find("sdcprobe: error: "), std::string::npos) << f.out;
    EXPECT_NE(f.out.find(input), std::string::npos) << f.out;
  }
  EXPECT_EQ(files(store), before);
}

}  // namespace
}  // namespace sdc::test
