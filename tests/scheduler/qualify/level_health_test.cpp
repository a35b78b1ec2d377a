// A level reads the tested GPUs' own health before and after its probes, on the stand-in NVML
// (tests/scheduler/sweep/fake_nvml_health.cpp): a fault fails the level even when every probe
// passed, an unreadable driver is could-not-test, and the CPU backend is not applicable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "scheduler/qualify/runner.hpp"

namespace sdc {
namespace {

DeviceIdentity device(const std::string& backend, int index, const std::string& uuid) {
  DeviceIdentity d;
  d.backend = backend;
  d.index = index;
  d.uuid = uuid;
  d.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  return d;
}

class LevelHealth : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("SDCPROBE_NVML_LIBRARY", SDC_FAKE_NVML, 1);
    setenv("FAKE_NVML", "GPU-a=;GPU-b=;GPU-c=", 1);
  }
  void TearDown() override {
    for (const char* v : {"SDCPROBE_NVML_LIBRARY", "FAKE_NVML", "FAKE_NVML_INIT", "FAKE_NVML_REPLAYS", "FAKE_NVML_XID",
                          "FAKE_NVML_REMAP", "FAKE_NVML_ECC"}) {
      unsetenv(v);
    }
  }
  // A report of a level whose every probe passed on GPU-a and GPU-b, with `health`.
  static RunReport passing(const HealthReport& health) {
    RunReport r;
    r.mode = "qualify";
    r.devices = {device("cuda", 0, "GPU-a"), device("cuda", 1, "GPU-b")};
    for (const auto& d : r.devices) {
      ProbeResult p;
      p.probe = "mem.walking_ones";
      p.device_index = d.index;
      p.device_uuid = d.uuid;
      r.results.push_back(p);
    }
    r.health = health;
    return r;
  }
  static const HealthCondition& condition(const GpuHealth& g, const std::string& field) {
    for (const HealthCondition& c : g.conditions) {
      if (c.field == field) return c;
    }
    throw std::runtime_error("no condition " + field);
  }
};

TEST_F(LevelHealth, TheTestedGpusAreReadAroundTheProbesOnceAndWatched) {
  setenv("FAKE_NVML_REPLAYS", "GPU-b=10,5", 1);
  setenv("FAKE_NVML_XID", "GPU-b=94;GPU-c=79", 1);
  int runs = 0;
  const HealthReport h = level_health({device("cuda", 0, "GPU-a"), device("cuda", 1, "GPU-b")}, [&] { ++runs; });
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(h.watched);
  ASSERT_EQ(h.gpus.size(), 2u);  // GPU-c is not tested: its XID is not this level's
  EXPECT_EQ(h.gpus[0].verdict(), ConditionState::kHealthy);
  EXPECT_EQ(condition(h.gpus[1], "pcie_replays").state, ConditionState::kFault);
  EXPECT_EQ(condition(h.gpus[1], "xid").detail,
            "critical XID 94 (contained ECC error) during the run: look the XID up in NVIDIA's XID catalogue for what "
            "to do");
  EXPECT_EQ(health_exit_code(h), 1);
}

TEST_F(LevelHealth, TheCpuBackendIsNotApplicableAndNeverLoadsNvml) {
  setenv("SDCPROBE_NVML_LIBRARY", "libm.so.6", 1);  // not NVML: loading it would be could-not-test
  int runs = 0;
  const HealthReport h = level_health({device("cpu", 0, "CPU-0")}, [&] { ++runs; });
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(h.applicable);
  EXPECT_EQ(health_exit_code(h), 0);
  RunReport r = passing(h);
  r.devices = {device("cpu", 0, "CPU-0")};
  r.results.resize(1);
  EXPECT_EQ(exit_code_of(r), 0);
  EXPECT_EQ(report_json(r).at("health").at("verdict"), "not_applicable");
}

TEST_F(LevelHealth, ADriverThatFailsStillRunsTheProbesAndCouldNotTest) {
  setenv("FAKE_NVML_INIT", "fail", 1);
  int runs = 0;
  const HealthReport h = level_health({device("cuda", 0, "GPU-a")}, [&] { ++runs; });
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(h.error, "NVML error: nvmlInit_v2: Driver Not Loaded");
  const RunReport r = passing(h);
  EXPECT_EQ(exit_code_of(r), 2);
  EXPECT_NE(verdict_line(r).find("COULD NOT TEST: 0 probe runs skipped, the GPUs' own health could not be read"),
            std::string::npos)
      << verdict_line(r);
  EXPECT_EQ(npd_verdict(r), "UNKNOWN: could not test: GPU health unreadable");
  EXPECT_EQ(report_json(r).at("verdict"), "could_not_test");
  EXPECT_EQ(report_json(r).at("health").at("error"), "NVML error: nvmlInit_v2: Driver Not Loaded");
}

TEST_F(LevelHealth, AHealthFaultFailsALevelWhoseProbesAllPassed) {
  setenv("FAKE_NVML_REMAP", "GPU-b=0,0,1,0", 1);
  const RunReport r = passing(level_health({device("cuda", 0, "GPU-a"), device("cuda", 1, "GPU-b")}, [] {}));
  EXPECT_EQ(exit_code_of(r), 1);
  EXPECT_NE(verdict_line(r).find("FAIL: GPU-b health: row_remap (a row remap is pending (0 correctable, 0 "
                                 "uncorrectable rows remapped): the GPU needs a reset to apply it) ("),
            std::string::npos)
      << verdict_line(r);
  EXPECT_EQ(npd_verdict(r), "SDC: GPU-b health row_remap");
  const nlohmann::json j = report_json(r);
  EXPECT_EQ(j.at("verdict"), "fail");
  EXPECT_EQ(j.at("health").at("verdict"), "fault");
  EXPECT_EQ(j.at("health").at("gpus").at(1).at("conditions").at("row_remap").at("state"), "fault");
  EXPECT_EQ(j.at("health").at("gpus").at(1).at("conditions").at("row_remap").at("readings").at("pending"), 1);
  // The same level with healthy GPUs passes, and says so in its report.
  unsetenv("FAKE_NVML_REMAP");
  const RunReport clean = passing(level_health({device("cuda", 0, "GPU-a"), device("cuda", 1, "GPU-b")}, [] {}));
  EXPECT_EQ(exit_code_of(clean), 0) << verdict_line(clean);
  EXPECT_EQ(report_json(clean).at("health").at("verdict"), "healthy");
}

}  // namespace
}  // namespace sdc
