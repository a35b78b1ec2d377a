// `sdcprobe health` on the stand-in NVML (tests/host/nvml/fake_nvml_health.cpp): every condition
// of the GPUs' own health through the real binary, each with its exit code, its JSON report field and
// its Prometheus metric; NOT_SUPPORTED answers, a driver that fails and answers that cannot be.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "host/nvml/nvml_health.hpp"
#include "tests/cli/run_sdcprobe.hpp"
#include "tests/scheduler/sweep/prom_check.hpp"

namespace {

namespace fs = std::filesystem;

struct Health {
  int code = -1;
  std::string out;
  nlohmann::json json;
  std::map<std::string, double> metrics;
};

class HealthCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sdcprobe-health-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "root");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `sdcprobe health ARGS` on two stand-in GPUs, GPU-a and GPU-b, with the stand-in's variables `env`.
  Health health(const std::string& env, const std::string& args = "") {
    const fs::path json = dir_ / "health.json", prom = dir_ / "health.prom";
    fs::remove(json);
    fs::remove(prom);
    Health h;
    const sdc::test::Outcome o = sdc::test::run_command(
        "SDCPROBE_NVML_LIBRARY=" + std::string(SDC_FAKE_NVML) + " FAKE_NVML='GPU-a=;GPU-b=' " + env + " " +
        SDC_BINARY_DIR + "/cli/sdcprobe health --json " + json.string() + " --prom " + prom.string() + " " + args);
    h.code = o.code;
    h.out = o.out;
    std::ifstream j(json);
    if (j) h.json = nlohmann::json::parse(j);
    std::ifstream p(prom);
    std::stringstream text;
    text << p.rdbuf();
    if (!text.str().empty()) h.metrics = sdc::test::parse_prometheus_text(text.str());
    prom_text_ = text.str();
    return h;
  }

  // The value of the series of `family` on `uuid` whose labels include each of `labels` ("field=\"x\"").
  static double metric(const Health& h, const std::string& family, const std::string& uuid,
                       const std::vector<std::string>& labels) {
    for (const auto& [series, value] : h.metrics) {
      if (series.rfind(family + "{", 0) != 0 || series.find("UUID=\"" + uuid + "\"") == std::string::npos) continue;
      bool all = true;
      for (const std::string& l : labels) all = all && series.find(l) != std::string::npos;
      if (all) return value;
    }
    ADD_FAILURE() << "no series " << family << " on " << uuid;
    return -1;
  }
  // The node's sdcprobe_health_driver_read.
  static double driver_read(const Health& h) {
    for (const auto& [series, value] : h.metrics) {
      if (series.rfind("sdcprobe_health_driver_read{", 0) == 0) return value;
    }
    return -1;
  }
  static const nlohmann::json& condition(const Health& h, size_t gpu, const std::string& field) {
    return h.json.at("gpus").at(gpu).at("conditions").at(field);
  }

  // GPU-b has a fault in `field` that `detail_has` describes; GPU-a stays healthy; exit 1.
  void expect_fault_on_b(const Health& h, const std::string& field, const std::string& detail_has) {
    EXPECT_EQ(h.code, 1) << h.out;
    EXPECT_EQ(h.json.at("verdict"), "fault") << h.json.dump(2);
    EXPECT_EQ(h.json.at("gpus").at(0).at("verdict"), "healthy");
    EXPECT_EQ(h.json.at("gpus").at(1).at("verdict"), "fault");
    const nlohmann::json& c = condition(h, 1, field);
    EXPECT_EQ(c.at("state"), "fault") << c.dump();
    EXPECT_NE(c.at("detail").get<std::string>().find(detail_has), std::string::npos) << c.dump();
    EXPECT_EQ(condition(h, 0, field).at("state"), "healthy");
    EXPECT_EQ(metric(h, "sdcprobe_gpu_health_fault", "GPU-b", {"field=\"" + field + "\""}), 1);
    EXPECT_EQ(metric(h, "sdcprobe_gpu_health_fault", "GPU-a", {"field=\"" + field + "\""}), 0);
    EXPECT_EQ(metric(h, "sdcprobe_gpu_health_judged", "GPU-b", {"field=\"" + field + "\""}), 1);
    EXPECT_NE(h.out.find("health: FAULT on 1 of 2 GPU(s)"), std::string::npos) << h.out;
    EXPECT_NE(h.out.find("  " + field + ": fault: " + c.at("detail").get<std::string>() + "\n"), std::string::npos)
        << h.out;
  }
  // GPU-b could not be tested in `field`; exit 2.
  void expect_could_not_test_on_b(const Health& h, const std::string& field, const std::string& detail_has) {
    EXPECT_EQ(h.code, 2) << h.out;
    EXPECT_EQ(h.json.at("verdict"), "could_not_test") << h.json.dump(2);
    const nlohmann::json& c = condition(h, 1, field);
    EXPECT_EQ(c.at("state"), "could_not_test") << c.dump();
    EXPECT_NE(c.at("detail").get<std::string>().find(detail_has), std::string::npos) << c.dump();
    EXPECT_EQ(metric(h, "sdcprobe_gpu_health_judged", "GPU-b", {"field=\"" + field + "\""}), 0);
    EXPECT_EQ(metric(h, "sdcprobe_gpu_health_fault", "GPU-b", {"field=\"" + field + "\""}), 0);
  }

  fs::path dir_;
  std::string prom_text_;
};

TEST_F(HealthCli, HealthyGpusExitZeroAndSayWhatOneReadCannotJudge) {
  const Health h = health("");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(h.json.at("verdict"), "healthy");
  EXPECT_FALSE(h.json.at("watched"));
  ASSERT_EQ(h.json.at("gpus").size(), 2u);
  EXPECT_EQ(h.json.at("gpus").at(1).at("uuid"), "GPU-b");
  EXPECT_EQ(h.json.at("gpus").at(1).at("pci_bus_id"), "00000000:11:00.0");
  for (const char* field :
       {"recovery_action", "row_remap", "ecc_uncorrectable", "retired_pages", "pcie_link_width", "pcie_link_gen"}) {
    EXPECT_EQ(condition(h, 1, field).at("state"), "healthy") << field;
    EXPECT_EQ(metric(h, "sdcprobe_gpu_health_judged", "GPU-b", {"field=\"" + std::string(field) + "\""}), 1) << field;
  }
  // Climbing replays and XIDs need a window: not tested, never "healthy".
  EXPECT_EQ(condition(h, 1, "xid").at("state"), "not_tested");
  EXPECT_EQ(condition(h, 1, "pcie_replays").at("state"), "not_tested");
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_judged", "GPU-b", {"field=\"xid\""}), 0);
  EXPECT_EQ(driver_read(h), 1) << prom_text_;
  EXPECT_NE(h.out.find("health: HEALTHY of 2 GPU(s)"), std::string::npos) << h.out;

  const Health w = health("", "--watch 0.05");
  EXPECT_EQ(w.code, 0) << w.out;
  EXPECT_TRUE(w.json.at("watched"));
  EXPECT_EQ(condition(w, 1, "xid").at("state"), "healthy");
  EXPECT_EQ(condition(w, 1, "pcie_replays").at("state"), "healthy");
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    const sdc::test::Outcome r = sdc::test::run_command("promtool check metrics < " + (dir_ / "health.prom").string());
    // 3: lint findings only, dcgm-exporter's camelCase label names (UUID, Hostname, modelName).
    EXPECT_TRUE(r.code == 0 || r.code == 3) << r.out;
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line)) {
      EXPECT_NE(line.find("label names should be written in 'snake_case' not 'camelCase'"), std::string::npos) << line;
    }
  }
}

TEST_F(HealthCli, AnyRecoveryActionButNoneIsAFaultNamingIt) {
  const std::vector<std::pair<int, std::string>> actions = {{1, "reset: "},
                                                            {2, "reboot: "},
                                                            {3, "drain_p2p: "},
                                                            {4, "drain_and_reset: "},
                                                            {5, "recover_imex_domain: "},
                                                            {6, "bus_reset: "},
                                                            {7, "system_reboot: "},
                                                            {9, "action 9 (unknown"}};
  for (const auto& [action, name] : actions) {
    const Health h = health("FAKE_NVML_RECOVERY='GPU-b=" + std::to_string(action) + "'");
    expect_fault_on_b(h, "recovery_action", name);
    EXPECT_EQ(condition(h, 1, "recovery_action").at("readings").at("action"), action);
    EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"recovery_action\"", "reading=\"action\""}),
              action);
  }
}

TEST_F(HealthCli, RowRemappingFaultsFollowDcgmsLimits) {
  Health h = health("FAKE_NVML_REMAP='GPU-b=0,0,1,0'");
  expect_fault_on_b(h, "row_remap", "a row remap is pending");
  EXPECT_NE(condition(h, 1, "row_remap").at("detail").get<std::string>().find("needs a reset"), std::string::npos);
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"row_remap\"", "reading=\"pending\""}), 1);
  h = health("FAKE_NVML_REMAP='GPU-b=0,2,0,1'");
  expect_fault_on_b(h, "row_remap", "a row remap failed");
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"row_remap\"", "reading=\"failure\""}), 1);
  h = health("FAKE_NVML_REMAP='GPU-b=3,512,0,0'");
  expect_fault_on_b(h, "row_remap", "512 or more uncorrectable-error remaps");
  EXPECT_EQ(
      metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"row_remap\"", "reading=\"uncorrectable_rows\""}),
      512);
  // One below the limit, and correctable remaps however many, are a GPU repairing itself.
  h = health("FAKE_NVML_REMAP='GPU-b=4000,511,0,0'");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(condition(h, 1, "row_remap").at("state"), "healthy");
  EXPECT_EQ(condition(h, 1, "row_remap").at("detail"), "4000 correctable, 511 uncorrectable rows remapped");
}

TEST_F(HealthCli, UncorrectableEccErrorsAreAFault) {
  const Health h = health("FAKE_NVML_ECC='GPU-b=2'");
  expect_fault_on_b(h, "ecc_uncorrectable", "2 uncorrectable ECC errors since the driver loaded");
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"ecc_uncorrectable\"", "reading=\"volatile\""}),
            2);
}

TEST_F(HealthCli, RetiredPagesPendingOrSixtyThreeAreAFault) {
  Health h = health("FAKE_NVML_RETIRED='GPU-b=1,0,1'");
  expect_fault_on_b(h, "retired_pages", "1 pages retired, more pending: reset the GPU");
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"retired_pages\"", "reading=\"pending\""}), 1);
  h = health("FAKE_NVML_RETIRED='GPU-b=40,23,0'");  // more than the first buffer of 0: counted whole
  expect_fault_on_b(h, "retired_pages", "63 pages retired (63 or more)");
  h = health("FAKE_NVML_RETIRED='GPU-b=40,22,0'");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(condition(h, 1, "retired_pages").at("detail"), "62 pages retired");
}

// A healthy link retransmits too: DCGM allows a bit error rate of 1e-12 at the link's speed and
// width over at least a minute, 31 replays at Gen5 x16; only more is a fault.
TEST_F(HealthCli, PcieReplaysAboveTheLinksAllowanceAreAFault) {
  Health h = health("FAKE_NVML_REPLAYS='GPU-b=10,32'", "--watch 0.05");
  expect_fault_on_b(h, "pcie_replays", "PCIe replays climbed from 10 to 42 during the run, more than the 31 allowed");
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"pcie_replays\"", "reading=\"during_window\""}),
            32);
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"pcie_replays\"", "reading=\"allowed\""}), 31);
  h = health("FAKE_NVML_REPLAYS='GPU-b=10,31'", "--watch 0.05");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(condition(h, 1, "pcie_replays").at("state"), "healthy");
  EXPECT_EQ(condition(h, 1, "pcie_replays").at("detail"),
            "31 replays during the run, within the 31 allowed at Gen5 x16");
  // The allowance follows the link's maximum speed and width: one replay is allowed at Gen1 x1.
  h = health("FAKE_NVML_REPLAYS='GPU-b=10,2' FAKE_NVML_LINK='GPU-b=1,1,1,1'", "--watch 0.05");
  expect_fault_on_b(h, "pcie_replays", "more than the 1 allowed at Gen1 x1");
  // A counter that stands still, however high, is no fault; one read cannot tell.
  h = health("FAKE_NVML_REPLAYS='GPU-b=1000,0'", "--watch 0.05");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(condition(h, 1, "pcie_replays").at("state"), "healthy");
  h = health("FAKE_NVML_REPLAYS='GPU-b=10,5000'");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(condition(h, 1, "pcie_replays").at("state"), "not_tested");
  // Without the link's speed and width there is no allowance to judge a climb against.
  h = health("FAKE_NVML_REPLAYS='GPU-b=10,5' FAKE_NVML_LINK='GPU-b=unsupported'", "--watch 0.05");
  EXPECT_EQ(condition(h, 1, "pcie_replays").at("state"), "not_supported") << h.out;
  h = health("FAKE_NVML_REPLAYS='GPU-b=10,0' FAKE_NVML_LINK='GPU-b=unsupported'", "--watch 0.05");
  EXPECT_EQ(condition(h, 1, "pcie_replays").at("state"), "healthy") << h.out;
}

TEST(PcieReplayAllowance, IsABitErrorRateOfOneInATrillionOverAtLeastAMinute) {
  EXPECT_EQ(sdc::pcie_replay_allowance(5, 16, 60), 31u);  // 32 GT/s x 16 lanes x 1e-12 x 60 s = 30.7
  EXPECT_EQ(sdc::pcie_replay_allowance(5, 16, 0.05), 31u);
  EXPECT_EQ(sdc::pcie_replay_allowance(5, 16, 300), 154u);
  EXPECT_EQ(sdc::pcie_replay_allowance(4, 16, 60), 16u);
  EXPECT_EQ(sdc::pcie_replay_allowance(6, 16, 60), 62u);
  EXPECT_EQ(sdc::pcie_replay_allowance(1, 1, 60), 1u);
  EXPECT_EQ(sdc::pcie_replay_allowance(9, 16, 60), 62u);  // a generation past Gen6 has Gen6's
}

TEST_F(HealthCli, AnXidDuringTheWindowIsAFaultNamingIt) {
  Health h = health("FAKE_NVML_XID='GPU-b=79,79,48'", "--watch 0.05");
  expect_fault_on_b(h, "xid", "critical XID 48 (double-bit ECC error), XID 79 (fallen off the bus) x2");
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"xid\"", "reading=\"xid_79\""}), 2);
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"xid\"", "reading=\"xid_48\""}), 1);
  h = health("FAKE_NVML_XID='GPU-b=79'");  // no window: not watched
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(condition(h, 1, "xid").at("state"), "not_tested");
}

// XIDs 13, 31, 43, 45, 68 and 109 are what a job's own error raises (NVIDIA's Kubernetes device
// plugin skips exactly these): `health --watch` beside jobs reports them, and fails no GPU on them.
TEST_F(HealthCli, ApplicationXidsAreReportedNeverAFault) {
  Health h = health("FAKE_NVML_XID='GPU-b=13,31,43,45,68,109,13'", "--watch 0.05");
  EXPECT_EQ(h.code, 0) << h.out;
  const nlohmann::json& c = condition(h, 1, "xid");
  EXPECT_EQ(c.at("state"), "healthy") << c.dump();
  EXPECT_EQ(c.at("detail"),
            "no critical XID of the GPU's during the run; a job's own: XID 13 (graphics engine exception) x2, XID 31 "
            "(GPU memory page fault), XID 43 (GPU stopped processing), XID 45 (preemptive cleanup), XID 68 (video "
            "processor exception), XID 109 (context switch timeout)");
  for (const char* x : {"xid_31", "xid_43", "xid_45", "xid_68", "xid_109"}) {
    EXPECT_EQ(
        metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"xid\"", "reading=\"" + std::string(x) + "\""}), 1)
        << x;
  }
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"xid\"", "reading=\"xid_13\""}), 2);
  // Beside a critical one, the fault names the GPU's XID and still reports the job's.
  h = health("FAKE_NVML_XID='GPU-b=43,94'", "--watch 0.05");
  expect_fault_on_b(h, "xid",
                    "critical XID 94 (contained ECC error) during the run: look the XID up in NVIDIA's XID catalogue "
                    "for what to do; a job's own: XID 43 (GPU stopped processing)");
}

// The wait answers for the whole event set: its error, even "GPU is lost", leaves every GPU's XIDs
// untested, never a fault that would drain every GPU; a lost GPU is named by its own reads.
TEST_F(HealthCli, AnXidWaitErrorCouldNotTestOnEveryGpuNeverAFault) {
  for (const char* wait : {"lost", "error"}) {
    const Health h = health(std::string("FAKE_NVML_WAIT=") + wait, "--watch 0.05");
    expect_could_not_test_on_b(h, "xid", "could not test: nvmlEventSetWait_v2: fake NVML error");
    EXPECT_EQ(condition(h, 0, "xid").at("state"), "could_not_test") << wait;
    EXPECT_EQ(h.json.at("gpus").at(0).at("verdict"), "could_not_test") << wait;
    EXPECT_EQ(condition(h, 1, "row_remap").at("state"), "healthy") << wait;
  }
}

TEST_F(HealthCli, ALinkBelowItsMaximumIsAFaultWithBothValues) {
  Health h = health("FAKE_NVML_LINK='GPU-b=5,5,8,16'");
  expect_fault_on_b(h, "pcie_link_width", "x8 of x16 under load (P0): a degraded PCIe link");
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"pcie_link_width\"", "reading=\"current\""}), 8);
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"pcie_link_width\"", "reading=\"max\""}), 16);
  h = health("FAKE_NVML_LINK='GPU-b=3,5,16,16'");
  expect_fault_on_b(h, "pcie_link_gen", "Gen3 of Gen5 under load (P0)");
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"pcie_link_gen\"", "reading=\"current\""}), 3);
  h = health("FAKE_NVML_LINK='GPU-b=1,5,16,16' FAKE_NVML_PSTATE='GPU-b=8'");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(condition(h, 1, "pcie_link_gen").at("state"), "not_tested");
  EXPECT_NE(condition(h, 1, "pcie_link_gen").at("detail").get<std::string>().find("Gen1 of Gen5 at P8"),
            std::string::npos);
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_judged", "GPU-b", {"field=\"pcie_link_gen\""}), 0);
}

// As DCGM, generation and width are judged at P0 only, the P-state read before and after the link:
// an idle GPU may narrow its link as it lowers its generation, and one leaving P0 mid-read did too.
TEST_F(HealthCli, TheLinkIsJudgedOnlyAtP0BeforeAndAfterItsRead) {
  Health h = health("FAKE_NVML_LINK='GPU-b=5,5,8,16' FAKE_NVML_PSTATE='GPU-b=8'");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(condition(h, 1, "pcie_link_width").at("state"), "not_tested");
  EXPECT_EQ(condition(h, 1, "pcie_link_width").at("detail"),
            "x8 of x16 at P8: an idle GPU may narrow its link; judged at P0 only");
  EXPECT_EQ(metric(h, "sdcprobe_gpu_health_reading", "GPU-b", {"field=\"pcie_link_width\"", "reading=\"current\""}), 8);
  h = health("FAKE_NVML_LINK='GPU-b=3,5,8,16' FAKE_NVML_PSTATE='GPU-b=0,8'");  // P0, then P8 after the link
  EXPECT_EQ(h.code, 0) << h.out;
  for (const char* field : {"pcie_link_gen", "pcie_link_width"}) {
    EXPECT_EQ(condition(h, 1, field).at("state"), "not_tested") << field;
    EXPECT_NE(condition(h, 1, field).at("detail").get<std::string>().find("P0, then P8 while it was read"),
              std::string::npos)
        << condition(h, 1, field).dump();
  }
  h = health("FAKE_NVML_LINK='GPU-b=3,5,8,16' FAKE_NVML_PSTATE='GPU-b=8,0'");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(condition(h, 1, "pcie_link_gen").at("state"), "not_tested");
  h = health("FAKE_NVML_LINK='GPU-b=3,5,8,16' FAKE_NVML_PSTATE='GPU-b=unsupported'");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_NE(condition(h, 1, "pcie_link_width").at("detail").get<std::string>().find("an unknown performance state"),
            std::string::npos);
}

TEST_F(HealthCli, ALostGpuIsAFault) {
  const Health h = health("FAKE_NVML_RECOVERY='GPU-b=lost'");
  expect_fault_on_b(h, "recovery_action", "NVML reports the GPU lost (fallen off the bus)");
}

// NVML_ERROR_RESET_REQUIRED, from any query, is the GPU asking for a reset: a fault saying so.
TEST_F(HealthCli, ResetRequiredIsAFaultAskingForAReset) {
  for (const char* field : {"FAKE_NVML_RECOVERY", "FAKE_NVML_ECC", "FAKE_NVML_REMAP"}) {
    const Health h = health(std::string(field) + "='GPU-b=reset'");
    const std::string condition_field = std::string(field) == "FAKE_NVML_RECOVERY" ? "recovery_action"
                                        : std::string(field) == "FAKE_NVML_ECC"    ? "ecc_uncorrectable"
                                                                                   : "row_remap";
    expect_fault_on_b(h, condition_field, "NVML answers that the GPU needs a reset: reset it (nvidia-smi -r)");
  }
  const Health h = health("FAKE_NVML_XID='GPU-b=reset'", "--watch 0.05");
  expect_fault_on_b(h, "xid", "needs a reset");
}

// Drivers before R565 (R535 and R550 run most H100 fleets) have no recovery-action field: the
// field's own code (NVML's answer for a field id it does not know) is not supported, as in DCGM.
TEST_F(HealthCli, ADriverWithoutTheRecoveryActionFieldIsNotSupportedNeverCouldNotTest) {
  for (const char* code : {"invalid", "unsupported"}) {
    const Health h = health(std::string("FAKE_NVML_RECOVERY='GPU-b=") + code + "'");
    EXPECT_EQ(h.code, 0) << code << h.out;
    EXPECT_EQ(h.json.at("gpus").at(1).at("verdict"), "healthy") << code;
    const nlohmann::json& c = condition(h, 1, "recovery_action");
    EXPECT_EQ(c.at("state"), "not_supported") << code;
    EXPECT_EQ(c.at("detail"), "not supported by this GPU or driver (the field came with R565)") << code;
  }
  // An error of the field's own that is neither is still an answer nobody has.
  expect_could_not_test_on_b(health("FAKE_NVML_RECOVERY='GPU-b=error'"), "recovery_action",
                             "could not test: nvmlDeviceGetFieldValues (recovery action): fake NVML error");
}

TEST_F(HealthCli, NotSupportedIsSaidPerConditionAndJudgesTheOthers) {
  const Health h = health(
      "FAKE_NVML_RETIRED='GPU-b=unsupported' FAKE_NVML_ECC='GPU-b=unsupported' FAKE_NVML_XID='GPU-b=unsupported' "
      "FAKE_NVML_REMAP='GPU-b=0,0,1,0'",
      "--watch 0.05");
  EXPECT_EQ(h.code, 1) << h.out;  // the remap still counts
  EXPECT_EQ(condition(h, 1, "retired_pages").at("state"), "not_supported");
  EXPECT_EQ(condition(h, 1, "ecc_uncorrectable").at("state"), "not_supported");
  EXPECT_EQ(condition(h, 1, "xid").at("state"), "not_supported");
  EXPECT_EQ(condition(h, 1, "row_remap").at("state"), "fault");
  for (const char* field : {"retired_pages", "ecc_uncorrectable", "xid"}) {
    EXPECT_EQ(metric(h, "sdcprobe_gpu_health_judged", "GPU-b", {"field=\"" + std::string(field) + "\""}), 0) << field;
    EXPECT_EQ(metric(h, "sdcprobe_gpu_health_fault", "GPU-b", {"field=\"" + std::string(field) + "\""}), 0) << field;
  }
  // Unsupported everywhere else is healthy for what was judged, and says what was not.
  const Health all = health("FAKE_NVML_RECOVERY='GPU-b=unsupported' FAKE_NVML_LINK='GPU-b=unsupported'");
  EXPECT_EQ(all.code, 0) << all.out;
  EXPECT_EQ(condition(all, 1, "recovery_action").at("state"), "not_supported");
  EXPECT_EQ(condition(all, 1, "pcie_link_width").at("state"), "not_supported");
  EXPECT_EQ(condition(all, 1, "pcie_link_gen").at("state"), "not_supported");
  EXPECT_NE(all.out.find("  recovery_action: not_supported: not supported by this GPU or driver (the field came"),
            std::string::npos)
      << all.out;
}

// A GPU whose every condition is not supported or not tested was not tested at all.
TEST_F(HealthCli, AGpuWithNothingJudgedCouldNotTestNeverHealthy) {
  const std::string none =
      "FAKE_NVML_RECOVERY='GPU-b=unsupported' FAKE_NVML_REMAP='GPU-b=unsupported' FAKE_NVML_ECC='GPU-b=unsupported' "
      "FAKE_NVML_RETIRED='GPU-b=unsupported' FAKE_NVML_REPLAYS='GPU-b=unsupported' FAKE_NVML_LINK='GPU-b=unsupported'";
  const Health h = health(none);
  EXPECT_EQ(h.code, 2) << h.out;
  EXPECT_EQ(h.json.at("verdict"), "could_not_test");
  EXPECT_EQ(h.json.at("gpus").at(0).at("verdict"), "healthy");
  EXPECT_EQ(h.json.at("gpus").at(1).at("verdict"), "could_not_test");
  EXPECT_EQ(condition(h, 1, "xid").at("state"), "not_tested");
  EXPECT_NE(h.out.find("health: COULD NOT TEST of 2 GPU(s)"), std::string::npos) << h.out;
  const sdc::test::Outcome o =
      sdc::test::run_command("( SDCPROBE_NVML_LIBRARY=" + std::string(SDC_FAKE_NVML) + " FAKE_NVML='GPU-a=;GPU-b=' " +
                             none + " " + SDC_BINARY_DIR + "/cli/sdcprobe health --format npd 2>/dev/null )");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.out, "UNKNOWN: could not test: GPU-b: no condition supported and tested\n");
}

TEST_F(HealthCli, ADriverThatCannotBeReadCouldNotTest) {
  const Health h = health("FAKE_NVML_INIT=fail");
  EXPECT_EQ(h.code, 2) << h.out;
  EXPECT_EQ(h.json.at("verdict"), "could_not_test");
  EXPECT_EQ(h.json.at("error"), "NVML error: nvmlInit_v2: Driver Not Loaded");
  EXPECT_TRUE(h.json.at("gpus").empty());
  ASSERT_EQ(h.metrics.size(), 1u) << prom_text_;
  EXPECT_EQ(driver_read(h), 0) << prom_text_;
  EXPECT_NE(h.out.find("health: COULD NOT TEST"), std::string::npos) << h.out;
  // A library that is not NVML, and a query that fails.
  const sdc::test::Outcome o =
      sdc::test::run_command("SDCPROBE_NVML_LIBRARY=libm.so.6 " + std::string(SDC_BINARY_DIR) + "/cli/sdcprobe health");
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("NVML has no nvmlInit_v2"), std::string::npos) << o.out;
  expect_could_not_test_on_b(health("FAKE_NVML_ECC='GPU-b=error'"), "ecc_uncorrectable",
                             "could not test: nvmlDeviceGetTotalEccErrors: fake NVML error");
}

TEST_F(HealthCli, AnswersThatCannotBeAreCouldNotTestNeverHealthy) {
  expect_could_not_test_on_b(health("FAKE_NVML_REMAP='GPU-b=0,0,7,0'"), "row_remap", "pending 7 and failure 0");
  expect_could_not_test_on_b(health("FAKE_NVML_RETIRED='GPU-b=0,0,2'"), "retired_pages", "pending status 2");
  expect_could_not_test_on_b(health("FAKE_NVML_LINK='GPU-b=6,5,16,16'"), "pcie_link_gen",
                             "link generation 6 of a maximum 5");
  expect_could_not_test_on_b(health("FAKE_NVML_LINK='GPU-b=5,5,3,16'"), "pcie_link_width",
                             "link width x3 of a maximum x16");
  expect_could_not_test_on_b(health("FAKE_NVML_RECOVERY='GPU-b=0,9'"), "recovery_action", "value type 9");
  expect_could_not_test_on_b(health("FAKE_NVML_REPLAYS='GPU-b=10,-5'", "--watch 0.05"), "pcie_replays",
                             "a replay counter that went back from 10 to 5");
  // A fault on one GPU is still a fault beside what could not be tested.
  const Health h = health("FAKE_NVML_ECC='GPU-a=error' FAKE_NVML_REMAP='GPU-b=0,0,1,0'");
  EXPECT_EQ(h.code, 1) << h.out;
  EXPECT_EQ(h.json.at("gpus").at(0).at("verdict"), "could_not_test");
}

TEST_F(HealthCli, NoDriverIsNotApplicableOnlyWithoutGpusOnTheBus) {
  const std::string run =
      "SDCPROBE_NVML_LIBRARY=libnvidia-ml-absent.so.1 SDCPROBE_SYSFS_ROOT=" + (dir_ / "root").string() + " " +
      SDC_BINARY_DIR + "/cli/sdcprobe health --json -";
  sdc::test::Outcome o = sdc::test::run_command("( " + run + " 2>/dev/null )");
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(nlohmann::json::parse(o.out).at("verdict"), "not_applicable") << o.out;
  const fs::path gpu = dir_ / "root/sys/bus/pci/devices/0000:3b:00.0";
  fs::create_directories(gpu);
  std::ofstream(gpu / "vendor") << "0x10de\n";
  std::ofstream(gpu / "class") << "0x030200\n";
  o = sdc::test::run_command(run);
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("(1 NVIDIA GPUs on the PCI bus)"), std::string::npos) << o.out;
}

TEST_F(HealthCli, DeviceSelectsGpusAndAGpuNvmlDoesNotListCouldNotTest) {
  Health h = health("FAKE_NVML_REMAP='GPU-a=0,0,1,0'", "--device GPU-b");
  EXPECT_EQ(h.code, 0) << h.out;
  ASSERT_EQ(h.json.at("gpus").size(), 1u);
  EXPECT_EQ(h.json.at("gpus").at(0).at("uuid"), "GPU-b");
  h = health("", "--device 0,00000000:11:00.0");
  EXPECT_EQ(h.json.at("gpus").size(), 2u);
  h = health("", "--device GPU-zz");
  EXPECT_EQ(h.code, 2) << h.out;
  EXPECT_EQ(h.json.at("gpus").at(0).at("conditions").at("gpu").at("detail"),
            "could not test: NVML lists no GPU GPU-zz");
  const sdc::test::Outcome o = sdc::test::sdcprobe("health --json - --format npd");
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("only one may use stdout"), std::string::npos) << o.out;
}

// nvmlDeviceGetCount_v2 counts every GPU, but a cgroup (Slurm's ConstrainDevices, a container)
// denies the process the others' handles: those are not this job's, named so and never judged.
TEST_F(HealthCli, AGpuThisProcessMayNotOpenIsNotItsAndTheOthersAreJudged) {
  Health h = health("FAKE_NVML_DENIED=1", "--watch 0.05");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(h.json.at("verdict"), "healthy");
  ASSERT_EQ(h.json.at("gpus").size(), 2u);
  EXPECT_EQ(h.json.at("gpus").at(0).at("verdict"), "healthy");
  EXPECT_EQ(h.json.at("gpus").at(1).at("index"), 1);
  EXPECT_EQ(h.json.at("gpus").at(1).at("verdict"), "not_permitted");
  EXPECT_EQ(condition(h, 1, "gpu").at("state"), "not_permitted");
  EXPECT_EQ(condition(h, 1, "gpu").at("detail"),
            "not this process's: NVML denies it the GPU (no permission: a cgroup, as Slurm's ConstrainDevices or a "
            "container's, gives it to another job)");
  EXPECT_NE(h.out.find("NVML GPU 1: NOT PERMITTED\n"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("health: HEALTHY of 1 GPU(s), 1 more not this process's\n"), std::string::npos) << h.out;
  const sdc::test::Outcome npd = sdc::test::run_command(
      "( SDCPROBE_NVML_LIBRARY=" + std::string(SDC_FAKE_NVML) + " FAKE_NVML='GPU-a=;GPU-b=' FAKE_NVML_DENIED=0 " +
      SDC_BINARY_DIR + "/cli/sdcprobe health --format npd 2>/dev/null )");
  EXPECT_EQ(npd.code, 0);
  EXPECT_EQ(npd.out, "OK: 1 GPUs healthy\n");
  // A fault on the GPU it may open still counts.
  h = health("FAKE_NVML_DENIED=0 FAKE_NVML_REMAP='GPU-b=0,0,1,0'");
  EXPECT_EQ(h.code, 1) << h.out;
  // With no GPU it may open, nothing was tested; nor was a denied GPU --device names.
  h = health("FAKE_NVML_DENIED=0,1");
  EXPECT_EQ(h.code, 2) << h.out;
  EXPECT_EQ(h.json.at("verdict"), "could_not_test");
  EXPECT_NE(h.out.find("health: COULD NOT TEST of 0 GPU(s), 2 more not this process's\n"), std::string::npos) << h.out;
  const sdc::test::Outcome none = sdc::test::run_command(
      "( SDCPROBE_NVML_LIBRARY=" + std::string(SDC_FAKE_NVML) + " FAKE_NVML='GPU-a=;GPU-b=' FAKE_NVML_DENIED=0,1 " +
      SDC_BINARY_DIR + "/cli/sdcprobe health --format npd 2>/dev/null )");
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(none.out, "UNKNOWN: could not test: no GPU this process may open (2 denied by NVML)\n");
  h = health("FAKE_NVML_DENIED=1", "--device 0,1");
  EXPECT_EQ(h.code, 2) << h.out;
  EXPECT_EQ(condition(h, 1, "gpu").at("state"), "could_not_test");
  EXPECT_NE(condition(h, 1, "gpu").at("detail").get<std::string>().find("nvmlDeviceGetHandleByIndex_v2"),
            std::string::npos);
}

// node-problem-detector and NHC take stdout's one line: the verdict alone, at most 80 characters.
TEST_F(HealthCli, NpdFormatPrintsTheVerdictAloneOnStdout) {
  const auto npd = [](const std::string& env) {
    return sdc::test::run_command("( SDCPROBE_NVML_LIBRARY=" + std::string(SDC_FAKE_NVML) +
                                  " FAKE_NVML='GPU-a=;GPU-b=' " + env + " " + SDC_BINARY_DIR +
                                  "/cli/sdcprobe health --format npd 2>/dev/null )");
  };
  sdc::test::Outcome o = npd("");
  EXPECT_EQ(o.code, 0);
  EXPECT_EQ(o.out, "OK: 2 GPUs healthy\n");
  o = npd("FAKE_NVML_REMAP='GPU-b=0,0,1,0'");
  EXPECT_EQ(o.code, 1);
  EXPECT_EQ(o.out, "SDC: GPU-b health row_remap\n");
  o = npd("FAKE_NVML_INIT=fail");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.out, "UNKNOWN: could not test: NVML error: nvmlInit_v2: Driver Not Loaded\n");
  o = npd("FAKE_NVML=''");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.out, "UNKNOWN: could not test: NVML lists no GPU\n");
  o = npd("FAKE_NVML_REMAP='GPU-b=0,0,7,0'");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.out.rfind("UNKNOWN: could not test: GPU-b row_remap: could not test: NVML answered pending", 0), 0u)
      << o.out;
  EXPECT_LE(o.out.size(), 81u) << o.out;
}

}  // namespace
