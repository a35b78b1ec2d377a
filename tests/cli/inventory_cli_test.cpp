// The real binary on a node whose PCI bus holds GPUs (a fake sysfs tree, SDCPROBE_SYSFS_ROOT) that
// CUDA does not show, as this machine shows them (no GPU, or no CUDA backend): a fault naming every
// bus id, never a CPU pass. Also: npd's UNKNOWN line on every exit 2, a preloaded library that
// prints on stdout changing nothing, and what a quick qualify of the CPU covers within its budget,
// on more devices than cores and beside CPU-bound processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/backend.hpp"
#include "tests/cli/run_sdcprobe.hpp"

namespace {

namespace fs = std::filesystem;
using sdc::test::Outcome;
using sdc::test::run_command;

const std::string kBinary = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";
const char* kBusIds[] = {"00000000:1B:00.0", "00000000:43:00.0", "00000000:52:00.0", "00000000:61:00.0"};

class InventoryCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!sdc::make_cuda_devices().empty()) GTEST_SKIP() << "this machine has a GPU: the fake tree cannot stand for it";
    dir_ = fs::temp_directory_path() / ("sdcprobe-inventory-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "root/sys/bus/pci/devices");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void four_gpus() {
    for (const char* address : {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0"}) {
      const fs::path d = dir_ / "root/sys/bus/pci/devices" / address;
      fs::create_directories(d);
      std::ofstream(d / "vendor") << "0x10de\n";
      std::ofstream(d / "class") << "0x030200\n";
      std::ofstream(d / "device") << "0x2335\n";
    }
  }
  // sdcprobe ARGS on the fake tree; `stdout_only`: stderr discarded.
  Outcome sdcprobe(const std::string& args, bool stdout_only = false) {
    const std::string cmd = "SDCPROBE_SYSFS_ROOT=" + (dir_ / "root").string() + " " + kBinary + " " + args;
    return run_command(stdout_only ? "( " + cmd + " 2>/dev/null )" : cmd);
  }
  nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
  }
  fs::path dir_;
};

TEST_F(InventoryCli, GpusOnTheBusWithCudaFailingAreAFaultNamingEveryBusId) {
  four_gpus();
  const fs::path report = dir_ / "report.json";
  const Outcome r = sdcprobe("qualify --size 64K --iterations 2 --json " + report.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no device tested"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cpu0"), std::string::npos) << "the CPU was tested instead:\n" << r.out;
  for (const char* bus : kBusIds) {
    EXPECT_NE(r.out.find(std::string("GPU ") + bus + " is on the PCI bus but CUDA does not show it"), std::string::npos)
        << bus << "\n"
        << r.out;
  }
  const auto j = read_json(report);
  EXPECT_EQ(j["verdict"], "fail");
  ASSERT_EQ(j["devices"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(j["devices"][i]["pci_bus_id"], kBusIds[i]);
    EXPECT_EQ(j["devices"][i]["backend"], "cuda");
    EXPECT_NE(j["devices"][i]["open_error"].get<std::string>().find(sdc::cuda_unavailable_reason()), std::string::npos);
  }
  for (const auto& res : j["results"]) EXPECT_NE(res["outcome"], "pass") << res.dump();

  // npd: the first missing GPU by bus id, the others counted.
  const Outcome npd = sdcprobe("qualify --size 64K --iterations 2 --format npd", true);
  EXPECT_EQ(npd.code, 1) << npd.out;
  EXPECT_EQ(npd.out, "SDC: GPU 00000000:1B:00.0 not seen by CUDA +3 more\n");
  // `devices` lists them, with why, and says so in its exit code.
  const Outcome devices = sdcprobe("devices");
  EXPECT_EQ(devices.code, 1) << devices.out;
  EXPECT_NE(devices.out.find("cannot be opened: GPU 00000000:61:00.0"), std::string::npos) << devices.out;
}

TEST_F(InventoryCli, ExpectGpusIsHonoured) {
  four_gpus();
  // Fewer expected than the bus holds (CUDA_VISIBLE_DEVICES, a container): CUDA shows 0 of 2, a
  // fault still; every GPU CUDA does not show is named, since any of them may be the one meant.
  Outcome r = sdcprobe("qualify --expect-gpus 2 --size 64K --iterations 2 --format npd", true);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out, "SDC: GPU 00000000:1B:00.0 not seen by CUDA +3 more\n");
  // More expected than the bus holds: those are gone from the bus.
  r = sdcprobe("--expect-gpus 6 devices");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("6 GPUs expected but only 4 on the PCI bus"), std::string::npos) << r.out;
  // None expected: the CPU, as on a CPU node.
  r = sdcprobe("--expect-gpus 0 devices --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)[0]["backend"], "cpu");
  // Asked for, the CPU is tested whatever the bus holds.
  const fs::path report = dir_ / "cpu.json";
  r = sdcprobe("qualify --backend cpu --size 64K --iterations 2 --budget 1h --json " + report.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS: every probe passed on every device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tested cpu0,"), std::string::npos) << r.out;
  EXPECT_EQ(read_json(report)["devices"][0]["backend"], "cpu");
  // A bad count is bad input.
  r = sdcprobe("qualify --expect-gpus many");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--expect-gpus"), std::string::npos) << r.out;
}

TEST_F(InventoryCli, NpdSaysUnknownOnEveryExitTwo) {
  const std::pair<std::string, std::string> cases[] = {
      {"qualify --backend cuda --format npd", "--backend cuda"},
      {"qualify --format npd --level forever", "--level"},
      {"qualify --format=npd --seed nope", "--seed"},
      {"qualify --format npd --cpu-devices 0", "--cpu-devices"},
      {"qualify --format npd --backend cpu --size 4", "--size"},
      {"qualify --format npd --backend cpu --inject 'model=zap'", "model"},
      {"qualify --format npd --backend cpu --json /nonexistent-dir/r.json --size 64K --iterations 2",
       "/nonexistent-dir/r.json"},
      {"frobnicate --format npd", "frobnicate"},
  };
  for (const auto& [args, why] : cases) {
    const Outcome r = sdcprobe(args, true);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("UNKNOWN: could not test: ", 0), 0u) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(why), std::string::npos) << args << "\n" << r.out;
    // One line, within node-problem-detector's limit.
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << args << "\n" << r.out;
    EXPECT_LE(r.out.size(), 81u) << args << "\n" << r.out;
  }
}

TEST_F(InventoryCli, LibraryNoiseOnStdoutChangesNothing) {
  const std::string preload = std::string("LD_PRELOAD=") + SDC_NOISE_LIBRARY + " ";
  // The library speaks, in this process and in every child.
  const Outcome noise = run_command(preload + "/bin/true");
  ASSERT_NE(noise.out.find("[noise] preloaded library loaded"), std::string::npos) << noise.out;
  const fs::path report = dir_ / "report.json";
  const Outcome r = run_command(preload + kBinary +
                                " qualify --backend cpu --cpu-devices 2 --size 64K --iterations 2 --budget 1h --json " +
                                report.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS:"), std::string::npos) << r.out;
  EXPECT_EQ(read_json(report)["devices"].size(), 2u);
}

// Quick at its defaults (the 50 s budget, memory sized from it; the suite's host memory setting
// unset): a verdict within the budget, exit 0, with the share of memory tested and of the budget
// used, per device, in the report and the table.
TEST(QuickCoverage, QuickQualifyOfTheCpuReportsWhatItCoveredWithinItsBudget) {
  const fs::path report =
      fs::temp_directory_path() / ("sdcprobe-quick-coverage-" + std::to_string(::getpid()) + ".json");
  const Outcome r =
      run_command("env -u SDCPROBE_HOST_MEMORY " + kBinary + " qualify --backend cpu --json " + report.string());
  std::ifstream in(report);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  fs::remove(report);
  // Exit 2 would mean a probe still running when the budget ended.
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(j["budget_s"], 50);
  ASSERT_EQ(j["devices"].size(), 1u);
  const auto& d = j["devices"][0];
  EXPECT_GT(d["memory_tested_fraction"].get<double>(), 0);
  EXPECT_LT(d["memory_tested_fraction"].get<double>(), 1);
  EXPECT_GT(d["budget_used_fraction"].get<double>(), 0);
  EXPECT_LE(d["budget_used_fraction"].get<double>(), 1);
  EXPECT_NE(r.out.find("cpu0: memory tested "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("% of the 50 s budget"), std::string::npos) << r.out;
  size_t memory_probes = 0;
  for (const auto& result : j["results"]) {
    if (result["probe"].get<std::string>().rfind("mem.", 0) != 0) continue;
    ++memory_probes;
    EXPECT_LE(result["params"]["bytes"].get<uint64_t>(), result["params"]["spare_bytes"].get<uint64_t>());
  }
  EXPECT_EQ(memory_probes, 6u);
}

// --host-memory bounds what the CPU's memory probes take, all devices together, in every worker.
TEST(QuickCoverage, TheHostMemorySettingReachesEveryWorker) {
  const fs::path report = fs::temp_directory_path() / ("sdcprobe-host-memory-" + std::to_string(::getpid()) + ".json");
  const Outcome r =
      run_command(kBinary + " --host-memory 8M --cpu-devices 2 qualify --backend cpu --json " + report.string());
  std::ifstream in(report);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  fs::remove(report);
  ASSERT_EQ(r.code, 0) << r.out;
  size_t memory_probes = 0;
  for (const auto& result : j["results"]) {
    if (result["probe"].get<std::string>().rfind("mem.", 0) != 0) continue;
    ++memory_probes;
    EXPECT_EQ(result["params"]["spare_bytes"], 4ULL << 20) << result.dump();
    EXPECT_LE(result["params"]["bytes"].get<uint64_t>(), 4ULL << 20) << result.dump();
  }
  EXPECT_EQ(memory_probes, 12u);
  const Outcome bad = run_command(kBinary + " --host-memory 077 qualify --backend cpu");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--host-memory"), std::string::npos) << bad.out;
}

// Quick at its defaults (the suite's host memory setting unset) on `devices` CPU devices, beside
// `busy` CPU-bound processes that it starts and kills: exit 0, so within the level's own budget (a
// probe still running when it ends is exit 2), every probe passing, and every memory probe checked
// the bytes it reports having covered.
void quick_keeps_its_budget(int devices, int busy) {
  std::vector<pid_t> spinners;
  for (int i = 0; i < busy; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (volatile uint64_t x = 0;; x = x + 1) {
      }
    }
    spinners.push_back(pid);
  }
  const fs::path report = fs::temp_directory_path() / ("sdcprobe-quick-load-" + std::to_string(::getpid()) + "-" +
                                                       std::to_string(devices) + ".json");
  const Outcome r = run_command("env -u SDCPROBE_HOST_MEMORY " + kBinary + " qualify --level quick --backend cpu " +
                                "--cpu-devices " + std::to_string(devices) + " --json " + report.string());
  for (pid_t pid : spinners) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  std::ifstream in(report);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  fs::remove(report);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(j["budget_s"], 50);
  size_t memory_probes = 0;
  for (const auto& result : j["results"]) {
    EXPECT_EQ(result["outcome"], "pass") << result.dump();
    if (result["probe"].get<std::string>().rfind("mem.", 0) != 0) continue;
    ++memory_probes;
    const uint64_t covered = result["params"]["bytes"].get<uint64_t>();
    EXPECT_GT(covered, 0u) << result.dump();
    EXPECT_GE(result["checked"].get<uint64_t>() * 8, covered) << result.dump();
  }
  EXPECT_EQ(memory_probes, 6u * devices);
}

// More devices than cores: four workers share two, each sizing its memory probes from the rates its
// passes get beside the others.
TEST(QuickCoverage, QuickOnFourDevicesOfTwoCoresKeepsItsBudget) { quick_keeps_its_budget(4, 0); }

// Two CPU-bound processes take their share of the cores for the whole run.
TEST(QuickCoverage, QuickBesideTwoCpuBoundProcessesKeepsItsBudget) { quick_keeps_its_budget(2, 2); }

}  // namespace
