// qualify --consensus end to end: four virtual CPU devices over the local communicator, two devices
// with and without a golden, and four MPI ranks under mpirun.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "host/communicator.hpp"
#include "run_sdcprobe.hpp"

namespace sdc {
namespace {

// Small sizes: the digests, not the work, are under test.
// --budget: the quick level's 50 s is for Slurm, not for four ranks on a loaded CI machine.
const std::string kQualify = " qualify --consensus --seed 42 --size 256K --iterations 32 --budget 1h ";

struct ConsensusTest : ::testing::Test {
  std::string json_path = "/tmp/sdc_consensus_" + std::to_string(::getpid()) + ".json";
  void TearDown() override { std::remove(json_path.c_str()); }
  nlohmann::json report() {
    std::ifstream in(json_path);
    return nlohmann::json::parse(in);
  }
  static std::vector<int> suspects(const nlohmann::json& j) {
    std::vector<int> v;
    for (const auto& s : j.at("consensus").at("suspects")) v.push_back(s.at("device_index").get<int>());
    return v;
  }
};

TEST_F(ConsensusTest, APermanentFaultOnDeviceTwoOfFourNamesDeviceTwoAndNoOther) {
  const auto r = test::sdcprobe("--backend cpu --cpu-devices 4" + kQualify + "--json " + json_path +
                                " --inject 'device=2,probe=alu.fma64,model=bitflip,bit=40,mode=permanent'");
  EXPECT_EQ(r.code, 1) << r.out;
  const auto j = report();
  ASSERT_EQ(suspects(j), std::vector<int>{2}) << r.out;
  const auto& s = j["consensus"]["suspects"][0];
  EXPECT_EQ(s["uuid"], j["devices"][2]["uuid"]);
  EXPECT_EQ(s["pci_bus_id"], j["devices"][2]["pci_bus_id"]);
  EXPECT_EQ(s["host"], j["host"]);
  EXPECT_EQ(s["accusers"], 3);
  EXPECT_NE(r.out.find("xdev.consensus suspect"), std::string::npos) << r.out;
}

TEST_F(ConsensusTest, DigestCorruptionAloneIsFoundByConsensus) {
  // The device's own checks pass: only its reported digest differs from its peers'.
  const auto r = test::sdcprobe("--backend cpu --cpu-devices 4" + kQualify + "--json " + json_path +
                                " --inject 'device=1,probe=gemm.exact.fp32,model=digest'");
  EXPECT_EQ(r.code, 1) << r.out;
  const auto j = report();
  for (const auto& res : j["results"]) EXPECT_EQ(res["outcome"], "pass") << res["probe"];
  EXPECT_EQ(suspects(j), std::vector<int>{1}) << r.out;
}

TEST_F(ConsensusTest, TheNpdVerdictNamesADeviceOnlyConsensusFound) {
  // stdout alone: the verdict (the seed and table go to stderr).
  const auto r =
      test::run_command("{ " SDC_BINARY_DIR "/cli/sdcprobe --backend cpu --cpu-devices 4" + kQualify +
                        "--format npd --inject 'device=1,probe=gemm.exact.fp32,model=digest' 2>/dev/null; }");
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string first = r.out.substr(0, r.out.find('\n'));
  EXPECT_EQ(first.rfind("SDC: CPU-", 0), 0u) << first;
  EXPECT_NE(first.find(" gemm.exact.fp32 consensus"), std::string::npos) << first;
}

TEST_F(ConsensusTest, ACorruptAllreduceContributionNamesItsLinks) {
  const auto r = test::sdcprobe("--backend cpu --cpu-devices 4" + kQualify + "--json " + json_path +
                                " --inject 'device=1,probe=coll.allreduce_exact,model=bitflip,bit=29'");
  EXPECT_EQ(r.code, 1) << r.out;
  const auto c = report()["collective"];
  EXPECT_TRUE(c["any_failed"].get<bool>());
  ASSERT_EQ(c["bad_links"].size(), 3u) << c.dump();
  for (const auto& link : c["bad_links"]) EXPECT_EQ(link["from_rank"], 1) << c.dump();
  EXPECT_NE(r.out.find("coll.allreduce_exact failed, failing links (sender>receiver rank): 1>0,1>2,1>3"),
            std::string::npos)
      << r.out;
}

TEST_F(ConsensusTest, CleanDevicesPassAndNameNoDevice) {
  const auto r = test::sdcprobe("--backend cpu --cpu-devices 4" + kQualify + "--json " + json_path);
  EXPECT_EQ(r.code, 0) << r.out;
  const auto j = report();
  EXPECT_EQ(j["consensus"]["probe"], "xdev.consensus");
  EXPECT_TRUE(j["consensus"]["suspects"].empty());
  EXPECT_FALSE(j["consensus"]["inconclusive"].get<bool>());
  EXPECT_FALSE(j["consensus"]["votes"].empty());
  EXPECT_FALSE(j["collective"]["any_failed"].get<bool>());
  EXPECT_EQ(j["collective"]["checked"], 8192);  // 4096 elements in FP32, then in BF16
  EXPECT_EQ(j["collective"]["transport"], "threads");
}

TEST_F(ConsensusTest, CommMpiWithoutConsensusIsAnInputError) {
  const auto r = test::sdcprobe("--backend cpu --cpu-devices 2 qualify --comm mpi");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--comm mpi: only with --consensus or --golden"), std::string::npos) << r.out;
}

TEST_F(ConsensusTest, TwoDevicesSplitAreDecidedByTheCpuGolden) {
  const auto r = test::sdcprobe("--backend cpu --cpu-devices 2" + kQualify + "--json " + json_path +
                                " --inject 'device=1,probe=alu.int64,model=digest'");
  EXPECT_EQ(r.code, 1) << r.out;
  const auto j = report();
  EXPECT_EQ(suspects(j), std::vector<int>{1}) << r.out;
  EXPECT_FALSE(j["consensus"]["inconclusive"].get<bool>());
  for (const auto& v : j["consensus"]["votes"]) {
    if (v["probe"] == "alu.int64") {
      EXPECT_EQ(v["kind"], "golden");
    }
  }
}

TEST_F(ConsensusTest, TwoDevicesSplitWithoutAGoldenAreInconclusive) {
  const auto r = test::sdcprobe("--backend cpu --cpu-devices 2" + kQualify + "--json " + json_path +
                                " --inject 'device=1,probe=gemm.exact.fp32,model=digest'");
  EXPECT_EQ(r.code, 1) << r.out;
  const auto j = report();
  EXPECT_TRUE(j["consensus"]["suspects"].empty()) << r.out;
  EXPECT_TRUE(j["consensus"]["inconclusive"].get<bool>());
  EXPECT_NE(r.out.find("xdev.consensus inconclusive on gemm.exact.fp32 among"), std::string::npos) << r.out;
}

TEST_F(ConsensusTest, MpiWithoutMpiIsAnErrorSayingWhatToInstall) {
  if (mpi_compiled()) GTEST_SKIP() << "built with MPI";
  const auto r = test::sdcprobe("--backend cpu" + kQualify + "--comm mpi");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("libopenmpi-dev"), std::string::npos) << r.out;
}

struct GoldenTest : ConsensusTest {
  std::string golden_path = "/tmp/sdc_golden_" + std::to_string(::getpid()) + ".json";
  void TearDown() override {
    std::remove(golden_path.c_str());
    ConsensusTest::TearDown();
  }
  test::Outcome record(int devices) {
    return test::sdcprobe("--backend cpu --cpu-devices " + std::to_string(devices) + " golden record --out " +
                          golden_path + " --seed 7 --size 256K --iterations 32");
  }
  nlohmann::json golden() {
    std::ifstream in(golden_path);
    return nlohmann::json::parse(in);
  }
  void write_golden(const std::string& text) { std::ofstream(golden_path) << text; }
  test::Outcome qualify(int devices) {
    return test::sdcprobe("--backend cpu --cpu-devices " + std::to_string(devices) + " qualify --golden " +
                          golden_path + " --json " + json_path);
  }
};

TEST_F(GoldenTest, RecordThenCompareRoundTrips) {
  const auto rec = record(2);
  ASSERT_EQ(rec.code, 0) << rec.out;
  const auto g = golden();
  EXPECT_EQ(g["format"], "sdcprobe-golden");
  EXPECT_EQ(g["version"], 2);
  EXPECT_EQ(g["seed"], 7u);
  EXPECT_FALSE(g["entries"].empty());
  const auto r = qualify(2);
  EXPECT_EQ(r.code, 0) << r.out;
  const auto j = report();
  EXPECT_EQ(j["seed"], 7u);  // the file's seed, level and sizes
  EXPECT_TRUE(j["consensus"]["suspects"].empty());
  EXPECT_FALSE(j["consensus"].contains("golden_missing"));
  size_t compared = 0;
  for (const auto& v : j["consensus"]["votes"]) compared += v.contains("winner");
  EXPECT_EQ(compared, j["consensus"]["votes"].size());
}

TEST_F(GoldenTest, AMismatchingDigestFails) {
  ASSERT_EQ(record(1).code, 0);
  auto g = golden();
  std::string probe;
  for (auto& e : g["entries"]) {
    if (e["probe"] == "gemm.exact.fp32") {
      e["digest"] = "0123456789abcdef0123456789abcdef";
      probe = e["probe"];
    }
  }
  ASSERT_FALSE(probe.empty());
  write_golden(g.dump());
  const auto r = qualify(1);
  EXPECT_EQ(r.code, 1) << r.out;
  const auto j = report();
  ASSERT_EQ(j["consensus"]["suspects"].size(), 1u) << r.out;
  EXPECT_EQ(j["consensus"]["suspects"][0]["probes"], nlohmann::json::array({"gemm.exact.fp32"}));
}

TEST_F(GoldenTest, AClassTheFileLacksIsCouldNotTest) {
  // One device has every core, two have one each: different classes. --golden asked for a
  // comparison the file cannot give: not a pass.
  ASSERT_EQ(record(1).code, 0);
  const auto r = qualify(2);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("digests missing from the golden file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the golden file has no digest for alu.fma32 on cpu|"), std::string::npos) << r.out;
  EXPECT_FALSE(report()["consensus"]["golden_missing"].empty());
}

TEST_F(GoldenTest, AMalformedFileIsAnErrorNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "(file): not a JSON object"},
      {R"({"format":"other","version":2})", "format: must be"},
      {R"({"format":"sdcprobe-golden","version":3,"seed":1,"level":"quick","entries":[]})", "version: must be 2"},
      {R"({"format":"sdcprobe-golden","version":1,"seed":1,"level":"quick","entries":[]})",
       "version: 1 holds digests of an earlier"},
      {R"({"format":"sdcprobe-golden","version":2,"level":"quick","entries":[]})", "seed: missing"},
      {R"({"format":"sdcprobe-golden","version":2,"seed":1,"level":"fast","entries":[]})", "level: unknown level"},
      {R"({"format":"sdcprobe-golden","version":2,"seed":1,"level":"quick"})", "entries: missing"},
      {R"({"format":"sdcprobe-golden","version":2,"seed":1,"level":"quick","entries":[{"class":"c","probe":"p"}]})",
       "entries[0].digest: missing"},
      {R"({"format":"sdcprobe-golden","version":2,"seed":1,"level":"quick","entries":[{"class":"c","probe":"p","digest":"xyz"}]})",
       "entries[0].digest: a digest is 32 lowercase hex digits"},
  };
  for (const auto& [text, message] : cases) {
    write_golden(text);
    const auto r = qualify(1);
    EXPECT_EQ(r.code, 2) << text << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << text << "\n" << r.out;
  }
  std::remove(golden_path.c_str());
  const auto r = qualify(1);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot read the file"), std::string::npos) << r.out;
}

TEST_F(GoldenTest, ASeedOtherThanTheFilesIsAnError) {
  ASSERT_EQ(record(1).code, 0);
  const auto r = test::sdcprobe("--backend cpu qualify --golden " + golden_path + " --seed 8");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--seed differs from the golden file's seed"), std::string::npos) << r.out;
}

// CI runs as root, which mpirun refuses without --allow-run-as-root.
std::string mpirun(const std::string& args) {
  return "mpirun -np 4 --oversubscribe --allow-run-as-root " + std::string(SDC_BINARY_DIR) + "/cli/sdcprobe " + args;
}

std::vector<int> suspect_ranks(const nlohmann::json& j) {
  std::vector<int> v;
  for (const auto& s : j.at("consensus").at("suspects")) v.push_back(s.at("rank").get<int>());
  return v;
}

TEST_F(ConsensusTest, UnderMpiAFaultOnRankThreeNamesRankThree) {
  if (!mpi_compiled()) GTEST_SKIP() << "built without MPI";
  const auto r = test::run_command(mpirun("--backend cpu" + kQualify + "--comm mpi --json " + json_path +
                                          " --inject 'rank=3,probe=alu.fma32,model=bitflip,bit=20,mode=permanent'"));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_EQ(suspect_ranks(report()), std::vector<int>{3}) << r.out;
}

TEST_F(ConsensusTest, UnderMpiDigestCorruptionOnRankThreeNamesRankThree) {
  if (!mpi_compiled()) GTEST_SKIP() << "built without MPI";
  const auto r = test::run_command(mpirun("--backend cpu" + kQualify + "--comm mpi --json " + json_path +
                                          " --inject 'rank=3,probe=gemm.exact.fp32,model=digest'"));
  EXPECT_NE(r.code, 0) << r.out;
  const auto j = report();
  EXPECT_EQ(suspect_ranks(j), std::vector<int>{3}) << r.out;
  EXPECT_EQ(j["consensus"]["suspects"][0]["accusers"], 3);
}

TEST_F(ConsensusTest, UnderMpiACorruptAllreduceContributionOnRankThreeNamesItsLinks) {
  if (!mpi_compiled()) GTEST_SKIP() << "built without MPI";
  const auto r = test::run_command(mpirun("--backend cpu" + kQualify + "--comm mpi --json " + json_path +
                                          " --inject 'rank=3,probe=coll.allreduce_exact,model=bitflip,bit=29'"));
  EXPECT_NE(r.code, 0) << r.out;
  const auto c = report()["collective"];
  ASSERT_EQ(c["bad_links"].size(), 3u) << c.dump();
  for (const auto& link : c["bad_links"]) EXPECT_EQ(link["from_rank"], 3) << c.dump();
  EXPECT_TRUE(report()["consensus"]["suspects"].empty()) << r.out;  // the devices themselves agree
}

TEST_F(ConsensusTest, UnderMpiCleanRanksPass) {
  if (!mpi_compiled()) GTEST_SKIP() << "built without MPI";
  const auto r = test::run_command(mpirun("--backend cpu" + kQualify + "--comm mpi --json " + json_path));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(report()["consensus"]["suspects"].empty()) << r.out;
  EXPECT_EQ(report()["collective"]["transport"], "mpi");
  EXPECT_EQ(report()["collective"]["types"], nlohmann::json({"fp32", "bf16"}));
}

}  // namespace
}  // namespace sdc
