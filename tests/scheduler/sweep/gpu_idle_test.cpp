// The sweep's GPU idle check: the rule on fake process lists, NVML's loader on a stand-in library
// with NVML's ABI (tests/host/nvml/fake_nvml.cpp), and `sdcprobe idle`'s exit codes.
#include "scheduler/sweep/gpu_idle.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "host/error.hpp"
#include "tests/cli/run_sdcprobe.hpp"

namespace sdc {
namespace {

GpuProcessSource fixed(GpuProcessList list) {
  return [list] { return list; };
}

// What a driver lists: these GPUs (none in MIG mode) and processes.
GpuProcessList listing(std::vector<std::string> gpus, std::vector<GpuProcess> processes) {
  GpuProcessList list;
  list.driver_present = true;
  list.gpus = std::move(gpus);
  list.processes = std::move(processes);
  return list;
}

TEST(GpuIdle, NoDriverIsIdle) {
  const IdleVerdict v = gpu_idle(fixed({}), {}, true);
  EXPECT_TRUE(v.idle);
  EXPECT_NE(v.reason.find("no NVIDIA driver"), std::string::npos) << v.reason;
}

TEST(GpuIdle, GpusWithoutProcessesAreIdle) {
  const IdleVerdict v = gpu_idle(fixed(listing({"GPU-a", "GPU-b"}, {})), {}, true);
  EXPECT_TRUE(v.idle);
  EXPECT_EQ(v.reason, "no process on 2 GPU(s)");
}

TEST(GpuIdle, AProcessOnAGpuIsBusyAndNamed) {
  const IdleVerdict v =
      gpu_idle(fixed(listing({"GPU-a", "GPU-b"}, {{"GPU-b", 41}, {"GPU-a", 7}, {"GPU-b", 42}})), {}, true);
  EXPECT_FALSE(v.idle);
  EXPECT_EQ(v.reason, "in use: GPU-a (pid 7) GPU-b (pid 41, pid 42)");
}

TEST(GpuIdle, TheSweepsOwnProcessesDoNotCount) {
  EXPECT_TRUE(gpu_idle(fixed(listing({"GPU-a"}, {{"GPU-a", 100}, {"GPU-a", 101}})), {100, 101}, true).idle);
  const IdleVerdict v = gpu_idle(fixed(listing({"GPU-a"}, {{"GPU-a", 100}, {"GPU-a", 102}})), {100, 101}, true);
  EXPECT_FALSE(v.idle);
  EXPECT_EQ(v.reason, "in use: GPU-a (pid 102)");
}

TEST(GpuIdle, OutsideTheHostsPidNamespaceNoProcessListedIsBlindNotIdle) {
  const IdleVerdict v = gpu_idle(fixed(listing({"GPU-a", "GPU-b"}, {})), {}, false);
  EXPECT_FALSE(v.idle);
  EXPECT_TRUE(v.blind);
  EXPECT_NE(v.reason.find("hostPID: true"), std::string::npos) << v.reason;
  // A process it does list is still busy, and no driver is still no GPU to be in use.
  const IdleVerdict busy = gpu_idle(fixed(listing({"GPU-a"}, {{"GPU-a", 7}})), {}, false);
  EXPECT_FALSE(busy.idle);
  EXPECT_FALSE(busy.blind);
  EXPECT_TRUE(gpu_idle(fixed({}), {}, false).idle);
}

TEST(GpuIdle, GpusThisProcessMayNotOpenAreNamedNotJudged) {
  GpuProcessList list{true, {"GPU-a"}, {}, {}};
  list.denied = {1, 3};
  IdleVerdict v = gpu_idle(fixed(list), {}, true);
  EXPECT_TRUE(v.idle);
  EXPECT_EQ(v.reason, "no process on 1 GPU(s); not this process's: NVML 1, 3 (no permission)");
  list.processes = {{"GPU-a", 7}};
  v = gpu_idle(fixed(list), {}, true);
  EXPECT_FALSE(v.idle);
  EXPECT_EQ(v.reason, "in use: GPU-a (pid 7); not this process's: NVML 1, 3 (no permission)");
}

TEST(GpuIdle, ThisMachinesPidNamespaceIsReadFromProc) {
  char link[64] = {};
  ASSERT_GT(::readlink("/proc/self/ns/pid", link, sizeof(link) - 1), 0);
  EXPECT_EQ(in_host_pid_namespace(), std::string(link) == "pid:[4026531836]") << link;
}

TEST(GpuIdle, ADriverThatDoesNotAnswerIsNotIdle) {
  EXPECT_THROW(gpu_idle([]() -> GpuProcessList { throw std::runtime_error("nvmlInit_v2: Unknown Error"); }, {}, true),
               std::runtime_error);
}

TEST(GpuIdle, AncestorsStartWithThisProcessAndItsParent) {
  const std::vector<unsigned> chain = process_and_ancestors();
  ASSERT_GE(chain.size(), 2u);
  EXPECT_EQ(chain[0], static_cast<unsigned>(getpid()));
  EXPECT_EQ(chain[1], static_cast<unsigned>(getppid()));
}

class NvmlLoader : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("FAKE_NVML");
    unsetenv("FAKE_NVML_GRAPHICS");
    unsetenv("FAKE_NVML_INIT");
    unsetenv("FAKE_NVML_MIG");
    unsetenv("FAKE_NVML_DENIED");
  }
  const std::string fake_ = SDC_FAKE_NVML;
};

TEST_F(NvmlLoader, AMissingLibraryMeansNoDriver) {
  const GpuProcessList list = nvml_gpu_processes("libnvidia-ml-absent.so.1");
  EXPECT_FALSE(list.driver_present);
  EXPECT_TRUE(list.processes.empty());
}

TEST_F(NvmlLoader, ReadsComputeAndGraphicsProcessesOfEveryGpu) {
  setenv("FAKE_NVML", "GPU-a=11,12;GPU-b=;GPU-c=30", 1);
  setenv("FAKE_NVML_GRAPHICS", "GPU-a=12,13", 1);
  const GpuProcessList list = nvml_gpu_processes(fake_);
  EXPECT_TRUE(list.driver_present);
  EXPECT_EQ(list.gpus, (std::vector<std::string>{"GPU-a", "GPU-b", "GPU-c"}));
  EXPECT_TRUE(list.mig_gpus.empty());    // FAKE_NVML_MIG unset: no GPU supports MIG
  ASSERT_EQ(list.processes.size(), 4u);  // pid 12 on GPU-a is both compute and graphics: once
  EXPECT_EQ(list.processes[0].gpu_uuid, "GPU-a");
  EXPECT_EQ(list.processes[0].pid, 11u);
  EXPECT_EQ(list.processes[2].pid, 13u);
  EXPECT_EQ(list.processes[3].gpu_uuid, "GPU-c");
  EXPECT_EQ(list.processes[3].pid, 30u);
}

TEST_F(NvmlLoader, ReadsWhichGpusAreInMigMode) {
  setenv("FAKE_NVML", "GPU-a=;GPU-b=;GPU-c=", 1);
  setenv("FAKE_NVML_MIG", "GPU-b", 1);
  EXPECT_EQ(nvml_gpu_processes(fake_).mig_gpus, std::vector<std::string>{"GPU-b"});
  setenv("FAKE_NVML_MIG", "", 1);  // MIG supported, disabled everywhere
  EXPECT_TRUE(nvml_gpu_processes(fake_).mig_gpus.empty());
}

// nvmlDeviceGetCount_v2 counts the GPUs a cgroup (Slurm's ConstrainDevices, a container) denies this
// process, whose handles answer NVML_ERROR_NO_PERMISSION: they are not its, listed apart.
TEST_F(NvmlLoader, AGpuThisProcessMayNotOpenIsListedApartNeverAnError) {
  setenv("FAKE_NVML", "GPU-a=11;GPU-b=20;GPU-c=30", 1);
  setenv("FAKE_NVML_DENIED", "1", 1);
  const GpuProcessList list = nvml_gpu_processes(fake_);
  EXPECT_EQ(list.gpus, (std::vector<std::string>{"GPU-a", "GPU-c"}));
  EXPECT_EQ(list.denied, std::vector<unsigned>{1});
  ASSERT_EQ(list.processes.size(), 2u);
  EXPECT_EQ(list.processes[1].gpu_uuid, "GPU-c");
}

TEST_F(NvmlLoader, AListLongerThanTheFirstBufferIsReadWhole) {
  std::string pids;
  for (unsigned pid = 1000; pid < 1040; ++pid) pids += (pids.empty() ? "" : ",") + std::to_string(pid);
  setenv("FAKE_NVML", ("GPU-a=" + pids).c_str(), 1);
  const GpuProcessList list = nvml_gpu_processes(fake_);
  ASSERT_EQ(list.processes.size(), 40u);
  EXPECT_EQ(list.processes.back().pid, 1039u);
}

TEST_F(NvmlLoader, AnUnsupportedGraphicsListIsEmptyButComputeStillCounts) {
  setenv("FAKE_NVML", "GPU-a=5", 1);
  setenv("FAKE_NVML_GRAPHICS", "unsupported", 1);
  const GpuProcessList list = nvml_gpu_processes(fake_);
  ASSERT_EQ(list.processes.size(), 1u);
  EXPECT_EQ(list.processes[0].pid, 5u);
}

TEST_F(NvmlLoader, AFailedInitialisationThrowsWithNvmlsMessage) {
  setenv("FAKE_NVML", "GPU-a=", 1);
  setenv("FAKE_NVML_INIT", "fail", 1);
  try {
    nvml_gpu_processes(fake_);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "nvmlInit_v2: Driver Not Loaded");
  }
}

TEST_F(NvmlLoader, ItsFailuresAreNvmlErrors) {
  setenv("FAKE_NVML", "GPU-a=", 1);
  setenv("FAKE_NVML_INIT", "fail", 1);
  EXPECT_THROW(nvml_gpu_processes(fake_), NvmlError);
  EXPECT_THROW(nvml_gpu_processes("libm.so.6"), NvmlError);
}

TEST_F(NvmlLoader, ALibraryThatIsNotNvmlThrows) {
  EXPECT_THROW(nvml_gpu_processes("libm.so.6"), std::runtime_error);  // loads, but has no nvmlInit_v2
}

TEST(IdleCommand, ExitCodesFollowTheGpusProcesses) {
  const std::string env = "SDCPROBE_NVML_LIBRARY=" + std::string(SDC_FAKE_NVML) + " ";
  const std::string sdcprobe = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe idle";
  test::Outcome o = test::run_command(env + "FAKE_NVML='GPU-a=;GPU-b=' " + sdcprobe);
  if (in_host_pid_namespace()) {
    EXPECT_EQ(o.code, 0) << o.out;
    EXPECT_EQ(o.out, "idle: no process on 2 GPU(s)\n");
  } else {  // this test runs in a container: it cannot see either
    EXPECT_EQ(o.code, 2) << o.out;
  }
  o = test::run_command(env + "FAKE_NVML='GPU-a=;GPU-b=4242' " + sdcprobe);
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_EQ(o.out, "busy: in use: GPU-b (pid 4242)\n");
  // A GPU a cgroup denies this process is not its: the node is judged on the others.
  o = test::run_command(env + "FAKE_NVML='GPU-a=4242;GPU-b=' FAKE_NVML_DENIED=0 " + sdcprobe);
  if (in_host_pid_namespace()) {
    EXPECT_EQ(o.code, 0) << o.out;
    EXPECT_EQ(o.out, "idle: no process on 1 GPU(s); not this process's: NVML 0 (no permission)\n");
  } else {
    EXPECT_EQ(o.code, 2) << o.out;
    EXPECT_EQ(o.out.rfind("cannot see: no process listed on 1 GPU(s)", 0), 0u) << o.out;
  }
  o = test::run_command(env + "FAKE_NVML='GPU-a=' FAKE_NVML_INIT=fail " + sdcprobe);
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("nvmlInit_v2: Driver Not Loaded"), std::string::npos) << o.out;
  o = test::run_command("SDCPROBE_NVML_LIBRARY=libnvidia-ml-absent.so.1 " + sdcprobe);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("no NVIDIA driver (libnvidia-ml-absent.so.1)"), std::string::npos) << o.out;
}

// A pid namespace of its own (unshare, as a container without hostPID has): free-looking GPUs are
// "cannot see", exit 2, which the sweep counts as busy.
TEST(IdleCommand, InAPidNamespaceOfItsOwnItCannotSee) {
  if (test::run_command("unshare -Urpf --mount-proc true").code != 0) GTEST_SKIP() << "no unprivileged unshare";
  const std::string env = "SDCPROBE_NVML_LIBRARY=" + std::string(SDC_FAKE_NVML) + " FAKE_NVML='GPU-a=;GPU-b=' ";
  const test::Outcome o =
      test::run_command(env + "unshare -Urpf --mount-proc " + SDC_BINARY_DIR + "/cli/sdcprobe idle");
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_EQ(o.out.rfind("cannot see: no process listed on 2 GPU(s)", 0), 0u) << o.out;
}

TEST(IdleCommand, ANvmlFailureCouldNotTestAndNamesNvml) {
  const std::string env = "SDCPROBE_NVML_LIBRARY=" + std::string(SDC_FAKE_NVML) + " ";
  const test::Outcome o =
      test::run_command(env + "FAKE_NVML='GPU-a=' FAKE_NVML_INIT=fail " + SDC_BINARY_DIR + "/cli/sdcprobe idle");
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("sdcprobe: could not test: NVML error: nvmlInit_v2: Driver Not Loaded"), std::string::npos)
      << o.out;
}

}  // namespace
}  // namespace sdc
