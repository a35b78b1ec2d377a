// Runs the built `sdcprobe` binary: exit codes, verdict lines and JSON reports as an operator's
// scripts see them.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "host/backend.hpp"
#include "tests/cli/run_sdcprobe.hpp"

namespace {

namespace fs = std::filesystem;

using sdc::test::Outcome;
using sdc::test::sdcprobe;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sdcprobe-cli-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
  }
  fs::path dir_;
};

TEST_F(CliTest, QuickQualifyOnFourVirtualDevicesPasses) {
  const fs::path report = dir_ / "report.json";
  const Outcome r =
      sdcprobe("qualify --level quick --budget 1h --backend cpu --cpu-devices 4 --json " + report.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS:"), std::string::npos);
  EXPECT_NE(r.out.find("seed 0x"), std::string::npos);
  const auto j = read_json(report);
  EXPECT_EQ(j["tool"], "sdcprobe");
  EXPECT_FALSE(j["version"].get<std::string>().empty());
  EXPECT_FALSE(j["host"].get<std::string>().empty());
  EXPECT_TRUE(j["seed"].is_number_unsigned());
  EXPECT_EQ(j["verdict"], "pass");
  EXPECT_EQ(j["exit_code"], 0);
  ASSERT_EQ(j["devices"].size(), 4u);
  for (const auto& d : j["devices"]) {
    EXPECT_EQ(d["uuid"].get<std::string>().rfind("CPU-", 0), 0u);
    EXPECT_FALSE(d["pci_bus_id"].get<std::string>().empty());
    EXPECT_FALSE(d["name"].get<std::string>().empty());
  }
  // Every device ran the same quick catalogue, which holds at least the memory and ALU probes.
  std::map<int, std::set<std::string>> probes_by_device;
  for (const auto& res : j["results"]) {
    EXPECT_EQ(res["outcome"], "pass") << res.dump();
    EXPECT_TRUE(probes_by_device[res["device_index"]].insert(res["probe"]).second) << res.dump();
  }
  ASSERT_EQ(probes_by_device.size(), 4u);
  for (const auto& [device, probes] : probes_by_device) {
    EXPECT_EQ(probes, probes_by_device[0]);
    EXPECT_GE(probes.size(), 10u);
  }
  // Written atomically: nothing but the report is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(CliTest, InjectedFaultFailsAndNamesTheVirtualDevice) {
  const fs::path report = dir_ / "report.json";
  const Outcome r = sdcprobe(
      "qualify --level quick --budget 1h --backend cpu --cpu-devices 4 "
      "--inject 'device=2,probe=alu.fma32,model=bitflip,bit=7,mode=permanent' --json " +
      report.string());
  EXPECT_EQ(r.code, 1) << r.out;
  const auto j = read_json(report);
  EXPECT_EQ(j["verdict"], "fail");
  const std::string uuid2 = j["devices"][2]["uuid"];
  EXPECT_NE(r.out.find("FAIL: cpu2 [" + uuid2), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cpu0 ["), std::string::npos);
  int failures = 0;
  for (const auto& res : j["results"]) {
    if (res["outcome"] == "pass") continue;
    ++failures;
    EXPECT_EQ(res["device_index"], 2);
    EXPECT_EQ(res["device_uuid"], uuid2);
    EXPECT_EQ(res["probe"], "alu.fma32");
    EXPECT_EQ(res["records"][0]["bits"], nlohmann::json::array({7}));
  }
  EXPECT_EQ(failures, 1);
  EXPECT_EQ(j["injections"].size(), 1u);
}

TEST_F(CliTest, SeedReplaysARunExactly) {
  const std::string args =
      "run 'alu.*' --backend cpu --iterations 16 --inject 'model=bitflip,mode=intermittent,p=0.5' --seed 0x1234 "
      "--json ";
  ASSERT_EQ(sdcprobe(args + (dir_ / "a.json").string()).code, 1);
  ASSERT_EQ(sdcprobe(args + (dir_ / "b.json").string()).code, 1);
  auto a = read_json(dir_ / "a.json"), b = read_json(dir_ / "b.json");
  EXPECT_EQ(a["seed"], 0x1234);
  ASSERT_EQ(a["results"].size(), b["results"].size());
  for (size_t i = 0; i < a["results"].size(); ++i) {
    EXPECT_EQ(a["results"][i]["outcome"], b["results"][i]["outcome"]);
    EXPECT_EQ(a["results"][i]["records"], b["results"][i]["records"]);
  }
}

TEST_F(CliTest, BadInputIsAClearErrorWithExitTwo) {
  const std::pair<std::string, std::string> cases[] = {
      {"run alu.fma32 --backend cpu --inject 'model=bitflip,bit=99'", "'bit'"},
      {"run alu.fma32 --backend cpu --inject 'model=zap'", "'model'"},
      {"run no.such.probe --backend cpu", "no probe matches 'no.such.probe'"},
      {"run alu.fma32 --backend cpu --device 7", "--device '7'"},
      {"qualify --level forever", "--level"},
      {"qualify --cpu-devices 0", "--cpu-devices"},
      {"frobnicate", "frobnicate"},
      {"run mem.march_c --backend cpu --size lots", "--size"},
      {"run gemm.burn.fp32 --backend cpu --burn 0", "--burn"},
      {"run gemm.burn.fp32 --backend cpu --burn soon", "--burn"},
      {"run mem.march_c --backend cpu --json /nonexistent-dir/r.json --size 1M", "/nonexistent-dir/r.json"},
  };
  for (const auto& [args, message] : cases) {
    const Outcome r = sdcprobe(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
  }
}

TEST_F(CliTest, BurnRunsForTheSecondsGivenAndSaysTheCpuHasNoConditions) {
  const fs::path report = dir_ / "burn.json";
  const Outcome r = sdcprobe("run gemm.burn.fp32 --backend cpu --burn 1.5 --json " + report.string());
  EXPECT_EQ(r.code, 0) << r.out;
  const auto j = read_json(report);
  ASSERT_EQ(j["results"].size(), 1u);
  const auto& p = j["results"][0]["params"];
  EXPECT_EQ(p["burn_s"].get<double>(), 1.5);
  EXPECT_GE(p["elapsed_s"].get<double>(), 1.5);
  EXPECT_GT(p["gemms"].get<uint64_t>(), 0u);
  EXPECT_GT(p["checked_tflops"].get<double>(), 0.0);
  EXPECT_EQ(p["conditions"].get<std::string>().rfind("unavailable: ", 0), 0u);
  EXPECT_FALSE(p.contains("samples"));
}

TEST_F(CliTest, CudaBackendWithoutADeviceCannotTest) {
  if (!sdc::make_cuda_devices().empty()) GTEST_SKIP() << "a CUDA device is present";
  const Outcome r = sdcprobe("qualify --backend cuda");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--backend cuda"), std::string::npos);
}

TEST_F(CliTest, DevicesAndListDescribeTheMachineAndCatalogue) {
  const Outcome d = sdcprobe("devices --backend cpu --cpu-devices 2 --json");
  ASSERT_EQ(d.code, 0) << d.out;
  const auto j = nlohmann::json::parse(d.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["index"], 1);
  const Outcome l = sdcprobe("list");
  EXPECT_EQ(l.code, 0);
  for (const char* id : {"mem.own_address", "mem.walking_bits", "mem.moving_inversions", "mem.march_c", "mem.modulo20",
                         "mem.random_blocks", "alu.fma32", "alu.fma64", "alu.int64", "alu.divsqrt"}) {
    EXPECT_NE(l.out.find(id), std::string::npos) << id;
  }
  EXPECT_NE(l.out.find("cannot see"), std::string::npos);
}

}  // namespace
