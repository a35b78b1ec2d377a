// A level tests a GPU only when NVML shows no other process on it and could show one, and never a
// GPU in MIG mode: the rule on fixed process lists and on the stand-in NVML
// (tests/host/nvml/fake_nvml.cpp), and that CPU runs never consult NVML.
#include "scheduler/qualify/busy_gpus.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/cli/run_sdcprobe.hpp"

namespace sdc {
namespace {

DeviceIdentity gpu(int index, const std::string& uuid) {
  DeviceIdentity d;
  d.backend = "cuda";
  d.index = index;
  d.uuid = uuid;
  return d;
}

DeviceIdentity cpu() {
  DeviceIdentity d;
  d.backend = "cpu";
  d.uuid = "CPU-0";
  return d;
}

const GpuSight kSeesAll{{100, 101}, true, false};

TEST(BusyGpus, AnotherProcessOnATestedGpuIsBusyNotTestedAndNamed) {
  const GpuProcessList list{true, {"GPU-a", "GPU-b"}, {{"GPU-b", 41}, {"GPU-b", 42}, {"GPU-a", 100}}, {}};
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a"), gpu(1, "GPU-b")}, list, kSeesAll),
            "busy: 2 other processes on cuda1 [GPU-b] (pid 41, pid 42): not tested, as a level takes most of a "
            "GPU's free memory");
  const GpuProcessList both{true, {"GPU-a", "GPU-b"}, {{"GPU-a", 7}, {"GPU-b", 8}}, {}};
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a"), gpu(1, "GPU-b")}, both, kSeesAll),
            "busy: 1 other process on cuda0 [GPU-a] (pid 7); 1 other process on cuda1 [GPU-b] (pid 8): not tested, "
            "as a level takes most of a GPU's free memory");
}

TEST(BusyGpus, FreeGpusAndThisRunsOwnProcessesProceed) {
  const GpuProcessList list{true, {"GPU-a", "GPU-b"}, {{"GPU-a", 100}, {"GPU-a", 101}}, {}};
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a"), gpu(1, "GPU-b")}, list, kSeesAll), "");
}

TEST(BusyGpus, OnlyTheTestedGpusCount) {
  // --device 0, or one MPI rank's GPU: a job on another GPU does not stop this one.
  const GpuProcessList list{true, {"GPU-a", "GPU-b"}, {{"GPU-b", 41}}, {}};
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a")}, list, kSeesAll), "");
  // A GPU that did not open is a device_error already, not a reason to test nothing.
  DeviceIdentity failed = gpu(1, "GPU-b");
  failed.open_error = "CUDA does not show it";
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a"), failed}, list, kSeesAll), "");
}

TEST(BusyGpus, CpuDevicesNeverNeedNvml) {
  const GpuProcessList busy{true, {"GPU-a"}, {{"GPU-a", 41}}, {}};
  EXPECT_EQ(busy_gpu_refusal({cpu()}, busy, {{}, false, false}), "");
  EXPECT_EQ(busy_gpu_refusal({cpu()}, {}, {{}, false, false}), "");
}

TEST(BusyGpus, OutsideTheHostsPidNamespaceItCannotSeeUnlessTheGpusAreAllocated) {
  const GpuProcessList free{true, {"GPU-a"}, {}, {}};
  const std::string why = busy_gpu_refusal({gpu(0, "GPU-a")}, free, {{}, false, false});
  EXPECT_EQ(why.rfind("cannot see other containers' GPU processes", 0), 0u) << why;
  EXPECT_NE(why.find("hostPID: true"), std::string::npos) << why;
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a")}, free, {{}, false, true}), "");
  // Allocated or not, a process NVML does list is never shared with.
  const GpuProcessList busy{true, {"GPU-a"}, {{"GPU-a", 41}}, {}};
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a")}, busy, {{}, false, true}).rfind("busy: 1 other process", 0), 0u);
}

TEST(BusyGpus, GpusWithoutNvmlCannotBeSeen) {
  const std::string why = busy_gpu_refusal({gpu(0, "GPU-a")}, {}, kSeesAll);
  EXPECT_EQ(why.rfind("cannot see the GPUs' processes: no NVML", 0), 0u) << why;
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a")}, {}, {{}, true, true}), "");
}

TEST(BusyGpus, AGpuInMigModeIsRefusedEvenWhenAllocated) {
  GpuProcessList list{true, {"GPU-a", "GPU-b"}, {}, {}};
  list.mig_gpus = {"GPU-b"};
  const GpuSight allocated{{}, true, true};
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a"), gpu(1, "GPU-b")}, list, allocated),
            "MIG mode is enabled on GPU GPU-b (cuda1): sdcprobe tests whole GPUs; disable MIG (nvidia-smi -i GPU-b "
            "-mig 0) to test it");
  // MIG on a GPU this run does not test stops nothing.
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a")}, list, allocated), "");
  EXPECT_EQ(mig_refusal({gpu(0, "GPU-a")}, list), "");
}

TEST(BusyGpus, ACudaDeviceNvmlDoesNotListIsAMigInstance) {
  // CUDA lists a MIG GPU's instances, whose UUIDs are none of NVML's GPUs.
  GpuProcessList list{true, {"GPU-a"}, {}, {}};
  list.mig_gpus = {"GPU-a"};
  EXPECT_EQ(mig_refusal({gpu(0, "GPU-1234")}, list),
            "MIG mode is enabled on GPU GPU-a (CUDA lists its instance cuda0 [GPU-1234]): sdcprobe tests whole "
            "GPUs; disable MIG (nvidia-smi -i GPU-a -mig 0) to test it");
  list.mig_gpus.clear();
  EXPECT_EQ(mig_refusal({gpu(0, "GPU-1234")}, list), "");
}

class BusyGpusOnNvml : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("FAKE_NVML");
    unsetenv("FAKE_NVML_MIG");
    unsetenv("FAKE_NVML_DENIED");
  }
  const std::string fake_ = SDC_FAKE_NVML;
};

TEST_F(BusyGpusOnNvml, TheRuleOnWhatTheLoaderReads) {
  setenv("FAKE_NVML", "GPU-a=;GPU-b=4242", 1);
  const std::vector<DeviceIdentity> tested = {gpu(0, "GPU-a"), gpu(1, "GPU-b")};
  EXPECT_EQ(busy_gpu_refusal(tested, nvml_gpu_processes(fake_), kSeesAll)
                .rfind("busy: 1 other process on cuda1 [GPU-b] (pid 4242): not tested", 0),
            0u);
  EXPECT_EQ(busy_gpu_refusal({tested[0]}, nvml_gpu_processes(fake_), kSeesAll), "");
  setenv("FAKE_NVML", "GPU-a=;GPU-b=", 1);
  setenv("FAKE_NVML_MIG", "GPU-a", 1);
  EXPECT_EQ(busy_gpu_refusal(tested, nvml_gpu_processes(fake_), kSeesAll).rfind("MIG mode is enabled on GPU GPU-a", 0),
            0u);
  setenv("FAKE_NVML_MIG", "", 1);
  EXPECT_EQ(busy_gpu_refusal(tested, nvml_gpu_processes(fake_), kSeesAll), "");
}

// A GPU a cgroup (Slurm's ConstrainDevices, a container) denies this process is not its: the level
// judges the GPUs it tests, whether the operator says they are allocated or NVML shows them free.
TEST_F(BusyGpusOnNvml, AGpuThisProcessMayNotOpenDoesNotStopTheLevel) {
  setenv("FAKE_NVML", "GPU-a=;GPU-b=4242", 1);
  setenv("FAKE_NVML_DENIED", "1", 1);
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a")}, nvml_gpu_processes(fake_), {{}, true, true}), "");
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a")}, nvml_gpu_processes(fake_), kSeesAll), "");
  setenv("FAKE_NVML", "GPU-a=4242;GPU-b=", 1);
  EXPECT_EQ(busy_gpu_refusal({gpu(0, "GPU-a")}, nvml_gpu_processes(fake_), {{}, true, true})
                .rfind("busy: 1 other process on cuda0 [GPU-a] (pid 4242)", 0),
            0u);
}

// The binary: a CPU run is never stopped by the GPUs' processes, nor by an NVML that fails.
TEST(BusyGpusCommand, ACpuRunNeverConsultsNvml) {
  const std::string env = "SDCPROBE_NVML_LIBRARY=" + std::string(SDC_FAKE_NVML) + " FAKE_NVML='GPU-a=4242' ";
  test::Outcome o = test::run_command(env + "FAKE_NVML_INIT=fail " + SDC_BINARY_DIR +
                                      "/cli/sdcprobe run alu.fma32 --backend cpu --iterations 16 2>&1");
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(o.out.find("NVML"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace sdc
