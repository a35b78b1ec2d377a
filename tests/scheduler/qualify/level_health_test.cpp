// A level reads the tested GPUs' own health before and after its probes, on the stand-in NVML
// (tests/host/nvml/fake_nvml_health.cpp): a fault fails the level even when every probe
// passed, an unreadable driver is could-not-test, and the CPU backend is not applicable. A sweep
// pass does the same and writes the health metrics.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "host/backend.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/health_report.hpp"
#include "scheduler/qualify/qualify_session.hpp"
#include "scheduler/sweep/prometheus.hpp"
#include "scheduler/sweep/sweep.hpp"
#include "tests/scheduler/sweep/prom_check.hpp"

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
                          "FAKE_NVML_REMAP", "FAKE_NVML_ECC", "FAKE_NVML_WAIT"}) {
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
  setenv("FAKE_NVML_REPLAYS", "GPU-b=10,40", 1);  // above the 31 a Gen5 x16 link is allowed
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

// The XID wait answers for the event set, not for one GPU: its "GPU is lost" must not fail the level
// with a fault on every GPU it tested.
TEST_F(LevelHealth, AnXidWaitErrorCouldNotTestNeverFailsEveryGpu) {
  setenv("FAKE_NVML_WAIT", "lost", 1);
  const RunReport r = passing(level_health({device("cuda", 0, "GPU-a"), device("cuda", 1, "GPU-b")}, [] {}));
  ASSERT_EQ(r.health->gpus.size(), 2u);
  for (const GpuHealth& g : r.health->gpus) {
    EXPECT_EQ(condition(g, "xid").state, ConditionState::kCouldNotTest) << g.uuid;
    EXPECT_EQ(condition(g, "xid").detail, "could not test: nvmlEventSetWait_v2: fake NVML error") << g.uuid;
  }
  EXPECT_EQ(exit_code_of(r), 2) << verdict_line(r);
  EXPECT_EQ(npd_verdict(r), "UNKNOWN: could not test: GPU health unreadable");
}

// A window that throws (a level's probes) still frees the event set its XIDs were watched on.
TEST_F(LevelHealth, AWindowThatThrowsFreesTheEventSet) {
  // Held open here, so the stand-in's count outlives each read's load of it.
  const std::unique_ptr<void, int (*)(void*)> fake(dlopen(SDC_FAKE_NVML, RTLD_NOW | RTLD_LOCAL), dlclose);
  ASSERT_NE(fake, nullptr) << dlerror();
  const auto open_sets = reinterpret_cast<int (*)()>(dlsym(fake.get(), "fake_nvml_event_sets_open"));
  ASSERT_NE(open_sets, nullptr);
  const int before = open_sets();
  EXPECT_THROW(read_gpu_health(SDC_FAKE_NVML, {"GPU-a"}, [] { throw std::runtime_error("probes failed"); }),
               std::runtime_error);
  EXPECT_EQ(open_sets(), before);
  read_gpu_health(SDC_FAKE_NVML, {"GPU-a"}, [] {});
  EXPECT_EQ(open_sets(), before);
}

// A sweep pass over a "GPU" whose worker tests the CPU (no GPU here): its health is read from the
// stand-in NVML around the workers, fails the pass, and is in its metrics and spooled report.
class SweepHealth : public LevelHealth {
 protected:
  void SetUp() override {
    LevelHealth::SetUp();
    dir_ = std::filesystem::temp_directory_path() / ("sdcprobe-sweep-health-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_ / "prom");
    std::filesystem::create_directories(dir_ / "spool");
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    LevelHealth::TearDown();
  }
  int sweep_once() {
    SweepOptions options;
    options.once = true;
    options.state_dir = (dir_ / "state").string();
    options.prom_dir = (dir_ / "prom").string();
    options.spool_dir = (dir_ / "spool").string();
    options.level = Level::kQuick;
    const DeviceIdentity cpu = open_devices({"cpu", 1}).front()->identity();
    // The stand-in NVML's GPU carries the CPU's UUID, as the results the worker sends do.
    DeviceIdentity gpu = cpu;
    gpu.backend = "cuda";
    setenv("FAKE_NVML", (cpu.uuid + "=").c_str(), 1);
    if (!remap_.empty()) setenv("FAKE_NVML_REMAP", (cpu.uuid + "=" + remap_).c_str(), 1);
    uuid_ = cpu.uuid;
    WorkerSetup setup;
    setup.executable = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";
    setup.backend.backend = "cpu";
    const WorkerCommandFactory worker = [cpu, setup](const RunOptions& run) -> WorkerCommand {
      const WorkerCommand on_cpu = make_worker_command(setup, run);
      return [cpu, on_cpu](const DeviceIdentity&, const std::vector<std::string>& ids) { return on_cpu(cpu, ids); };
    };
    return run_sweep(options, {gpu}, builtin_registry().select({"alu.fma32"}), worker);
  }
  std::map<std::string, double> metrics() const {
    std::ifstream in(dir_ / "prom" / kPromFile);
    return test::parse_prometheus_text(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  double remap_fault() const {
    for (const auto& [series, value] : metrics()) {
      if (series.rfind("sdcprobe_gpu_health_fault{", 0) == 0 &&
          series.find("UUID=\"" + uuid_ + "\"") != std::string::npos &&
          series.find("field=\"row_remap\"") != std::string::npos) {
        return value;
      }
    }
    return -1;
  }
  nlohmann::json spooled() const {
    for (const auto& f : std::filesystem::directory_iterator(dir_ / "spool")) {
      std::ifstream in(f.path());
      return nlohmann::json::parse(in);
    }
    return {};
  }
  std::filesystem::path dir_;
  std::string remap_;  // the GPU's FAKE_NVML_REMAP values
  std::string uuid_;
};

TEST_F(SweepHealth, AHealthFaultFailsThePassAndIsItsMetric) {
  remap_ = "0,0,1,0";
  EXPECT_EQ(sweep_once(), 1);
  EXPECT_EQ(remap_fault(), 1);
  EXPECT_EQ(spooled().at("health").at("verdict"), "fault");
}

TEST_F(SweepHealth, HealthyGpusPassAndSayZero) {
  EXPECT_EQ(sweep_once(), 0);
  EXPECT_EQ(remap_fault(), 0);
  EXPECT_EQ(spooled().at("health").at("verdict"), "healthy");
}

}  // namespace
}  // namespace sdc
