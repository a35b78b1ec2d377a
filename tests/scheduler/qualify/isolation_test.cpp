// The parent's side of process isolation, with /bin/sh scripts standing in for the worker: the
// protocol on fd 3, parallel workers, the worker environment, and hang versus overrun; the real
// worker slowed ten times; and the device each MPI rank tests.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/backend.hpp"
#include "host/cpu_parallel.hpp"
#include "host/error.hpp"
#include "scheduler/qualify/isolation.hpp"
#include "scheduler/qualify/qualify_session.hpp"

namespace sdc {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

DeviceIdentity cpu(int index) {
  DeviceIdentity d;
  d.backend = "cpu";
  d.index = index;
  d.uuid = "CPU-" + std::to_string(index);
  return d;
}

// The protocol lines of a passing probe on `device`, as printf arguments for a shell script.
std::string pass_lines(const std::string& probe, const DeviceIdentity& device) {
  ProbeResult r;
  r.probe = probe;
  r.device_index = device.index;
  r.device_uuid = device.uuid;
  r.outcome = Outcome::kPass;
  r.report.checked = 8;
  std::string lines = worker_start_line(probe) + worker_result_line(r, false);
  std::string quoted;
  for (char c : lines) quoted += c == '\n' ? std::string("\\n") : std::string(1, c);
  return "printf '%b' '" + quoted + "' >&3";
}

WorkerCommand script(const std::function<std::string(const DeviceIdentity&)>& body) {
  return [body](const DeviceIdentity& d, const std::vector<std::string>&) {
    return std::vector<std::string>{"/bin/sh", "-c", body(d)};
  };
}

IsolationLimits limits(double watchdog_s, double deadline_s = 0) {
  IsolationLimits l;
  l.probe_timeout_s = watchdog_s;
  if (deadline_s > 0) {
    l.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_s));
  }
  return l;
}

TEST(Isolation, LibraryNoiseOnStdoutDoesNotCorruptTheProtocol) {
  const DeviceIdentity d = cpu(0);
  // Noise before, between and after the protocol lines, some of it JSON-like and without a newline.
  const auto command = script([](const DeviceIdentity& dev) {
    return "echo 'cuBLASLt log: {\"start\": nonsense'; printf 'no newline'; " + pass_lines("mem.a", dev) +
           "; echo '{\"result\": 1}'";
  });
  const WorkerRun run = run_worker(command(d, {"mem.a"}), d, {"mem.a"}, limits(60));
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.results[0].outcome, Outcome::kPass) << run.results[0].reason;
  EXPECT_EQ(run.end, WorkerEnd::kCompleted);
}

TEST(Isolation, WorkersForDifferentDevicesRunAtOnce) {
  // Each worker waits until every worker has started: run one after another, the first would wait
  // for the others forever (here: give up after a minute and exit 3, a crash).
  const fs::path dir = fs::temp_directory_path() / ("sdc_parallel_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<DeviceIdentity> devices = {cpu(0), cpu(1), cpu(2), cpu(3)};
  const auto command = script([&](const DeviceIdentity& dev) {
    return "touch " + (dir / dev.uuid).string() + "; i=0; while [ $(ls " + dir.string() +
           " | wc -l) -lt 4 ]; do sleep 0.05; i=$((i+1)); [ $i -gt 1200 ] && exit 3; done; " + pass_lines("mem.a", dev);
  });
  const std::vector<WorkerRun> runs = run_workers(devices, {"mem.a"}, command, limits(600));
  ASSERT_EQ(runs.size(), 4u);
  for (size_t d = 0; d < runs.size(); ++d) {
    ASSERT_EQ(runs[d].results.size(), 1u) << d;
    EXPECT_EQ(runs[d].results[0].outcome, Outcome::kPass) << d << ": " << runs[d].results[0].reason;
    EXPECT_EQ(runs[d].results[0].device_index, static_cast<int>(d));
  }
  fs::remove_all(dir);
}

TEST(Isolation, AGpuWorkerSeesOnlyItsOwnGpu) {
  DeviceIdentity gpu = cpu(2);
  gpu.backend = "cuda";
  gpu.uuid = "GPU-12345678-1234-1234-1234-123456789abc";
  EXPECT_TRUE(worker_environment(cpu(0)).empty());
  // The worker reports its CUDA_VISIBLE_DEVICES back as an input error.
  const auto command = script([](const DeviceIdentity&) {
    return std::string("printf '{\"input_error\":\"%s\"}\\n' \"$CUDA_VISIBLE_DEVICES\" >&3");
  });
  try {
    run_worker(command(gpu, {"mem.a"}), gpu, {"mem.a"}, limits(60));
    FAIL() << "no input error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), gpu.uuid);
  }
}

TEST(Isolation, ResultsCarryTheParentsDeviceIndex) {
  // Under CUDA_VISIBLE_DEVICES a GPU worker numbers its one device 0.
  const DeviceIdentity d = cpu(5);
  const auto command = script([](const DeviceIdentity&) { return pass_lines("mem.a", cpu(0)); });
  const WorkerRun run = run_worker(command(d, {"mem.a"}), d, {"mem.a"}, limits(60));
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.results[0].device_index, 5);
}

TEST(Isolation, AnUnreadableResultIsTheDevicesErrorNotACrashOfTheParent) {
  const DeviceIdentity d = cpu(0);
  ProbeResult good;
  good.probe = "mem.a";
  good.device_uuid = d.uuid;
  good.outcome = Outcome::kPass;
  nlohmann::json result = to_json(good);
  // Found by coverage-guided fuzzing: floats where integers belong were cast out of range.
  std::vector<nlohmann::json> bad;
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"seed", 3.4e21},
           {"device_index", 1e300},
           {"checked", -1},
           {"outcome", "passed"},
           {"duration_s", "1"},
           {"records", nlohmann::json::array({nlohmann::json{{"index", 1}}})},
           {"digest", "xyz"}}) {
    nlohmann::json r = result;
    r[key] = value;
    bad.push_back({{"result", r}});
  }
  std::vector<std::string> lines;
  for (const auto& b : bad) lines.push_back(b.dump());
  lines.push_back(R"({"result":)");   // cut short
  lines.push_back("[1,2]");           // not an object
  lines.push_back(R"({"start":7})");  // the probe id is not a string
  for (const std::string& line : lines) {
    const auto command = script([&](const DeviceIdentity&) {
      return "printf '%s\\n' '{\"start\":\"mem.a\"}' '" + line + "' >&3; exec sleep 600";
    });
    const WorkerRun run = run_worker(command(d, {"mem.a", "mem.b"}), d, {"mem.a", "mem.b"}, limits(600));
    EXPECT_EQ(run.end, WorkerEnd::kUnreadable) << line;
    ASSERT_EQ(run.results.size(), 1u) << line;
    EXPECT_EQ(run.results[0].probe, "mem.a") << line;
    EXPECT_EQ(run.results[0].outcome, Outcome::kDeviceError) << line;
    EXPECT_NE(run.results[0].reason.find("worker sent an unreadable result"), std::string::npos)
        << line << ": " << run.results[0].reason;
  }
  // The same result with its fields intact is read.
  const auto command = script([&](const DeviceIdentity&) {
    return "printf '%s\\n' '{\"start\":\"mem.a\"}' '" + nlohmann::json{{"result", result}}.dump() + "' >&3";
  });
  const WorkerRun run = run_worker(command(d, {"mem.a"}), d, {"mem.a"}, limits(600));
  EXPECT_EQ(run.end, WorkerEnd::kCompleted);
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.results[0].outcome, Outcome::kPass);
}

TEST(Isolation, TheReasonOfAnUnreadableLineNamesTheProtocolError) {
  const DeviceIdentity d = cpu(0);
  const auto command = script([](const DeviceIdentity&) {
    return std::string("printf '%s\\n' '{\"start\":\"mem.a\"}' '{\"start\":7}' >&3; exec sleep 600");
  });
  const WorkerRun run = run_worker(command(d, {"mem.a"}), d, {"mem.a"}, limits(600));
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.results[0].outcome, Outcome::kDeviceError);
  EXPECT_NE(run.results[0].reason.find("(worker protocol error: \"start\" is not a string)"), std::string::npos)
      << run.results[0].reason;
}

TEST(Isolation, ADeviceListTheChildSendsUnreadableIsAWorkerProtocolError) {
  // A stand-in for `sdcprobe devices --protocol-fd 3` that answers a device without its fields.
  const fs::path dir = fs::temp_directory_path() / ("sdc-devices-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path child = dir / "devices";
  {
    std::ofstream out(child);
    out << "#!/bin/sh\nprintf '%s\\n' '{\"devices\":[{\"index\":0}]}' >&3\n";
  }
  fs::permissions(child, fs::perms::owner_all);
  try {
    list_devices_in_child(child.string(), BackendOptions{"cpu", 1, -1});
    ADD_FAILURE() << "no exception";
  } catch (const WorkerProtocolError& e) {
    EXPECT_EQ(describe_error(e).rfind("worker protocol error: device 0 of the `devices` answer: ", 0), 0u)
        << describe_error(e);
  }
  fs::remove_all(dir);
}

TEST(Isolation, ASilentWorkerIsHungAtTheWatchdog) {
  const DeviceIdentity d = cpu(0);
  const auto command = script(
      [](const DeviceIdentity&) { return std::string("printf '%s\\n' '{\"start\":\"mem.a\"}' >&3; exec sleep 600"); });
  const WorkerRun run = run_worker(command(d, {"mem.a"}), d, {"mem.a"}, limits(1));
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.end, WorkerEnd::kHung);
  EXPECT_EQ(run.results[0].outcome, Outcome::kDeviceError);
  EXPECT_NE(run.results[0].reason.find("hung: no progress"), std::string::npos) << run.results[0].reason;
}

TEST(Isolation, ASilentWorkerCutByTheDeadlineIsHung) {
  // The watchdog is far longer than the budget: the budget ends it, and silence makes it a hang.
  const DeviceIdentity d = cpu(0);
  const auto command = script(
      [](const DeviceIdentity&) { return std::string("printf '%s\\n' '{\"start\":\"mem.a\"}' >&3; exec sleep 600"); });
  const WorkerRun run = run_worker(command(d, {"mem.a"}), d, {"mem.a"}, limits(600, 4));
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.results[0].outcome, Outcome::kDeviceError) << run.results[0].reason;
  EXPECT_NE(run.results[0].reason.find("budget ended"), std::string::npos) << run.results[0].reason;
}

TEST(Isolation, AWorkerThatKeepsBeatingIsNeverHungButCouldNotTest) {
  // Beats every 0.1 s, never finishes; the watchdog (3 s of silence) is shorter than the budget.
  const DeviceIdentity d = cpu(0);
  const auto command = script([](const DeviceIdentity&) {
    return std::string(
        "printf '%s\\n' '{\"start\":\"mem.a\"}' >&3; while :; do printf '%s\\n' '{\"beat\":true}' >&3; sleep 0.1; "
        "done");
  });
  const WorkerRun run = run_worker(command(d, {"mem.a"}), d, {"mem.a"}, limits(3, 6));
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.end, WorkerEnd::kOutOfBudget);
  EXPECT_EQ(run.results[0].outcome, Outcome::kSkipped);
  EXPECT_NE(run.results[0].reason.find("could not test: still progressing"), std::string::npos)
      << run.results[0].reason;
}

// While it lives, `count` processes spin on one core (the first this process may use), as other
// work on a loaded node would.
class BusyCore {
 public:
  explicit BusyCore(int count) : core_(available_cores().front()) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(core_, &one);
        ::sched_setaffinity(0, sizeof(one), &one);
        for (;;) {
        }
      }
      if (pid > 0) spinners_.push_back(pid);
    }
  }
  ~BusyCore() {
    for (pid_t p : spinners_) ::kill(p, SIGKILL);
    for (pid_t p : spinners_) ::waitpid(p, nullptr, 0);
  }
  int core() const { return core_; }

 private:
  int core_;
  std::vector<pid_t> spinners_;
};

// A worker kept waiting for a CPU is not silent: on a loaded node, a healthy worker that got a tenth
// of a core for seconds is never called hung, while a worker that stops answering under the same
// load still is, at the watchdog.
TEST(Isolation, AWorkerWaitingForACpuIsNotHungAndASilentOneUnderTheSameLoadIs) {
  const DeviceIdentity d = cpu(0);
  const BusyCore busy(2);
  const auto starved = [&](const std::string& body) {
    // At nice 10 beside two spinners at nice 0 on its one core, it gets about a twentieth of it.
    return std::vector<std::string>{
        "/usr/bin/taskset", "-c", std::to_string(busy.core()), "/usr/bin/nice", "-n", "10", "/bin/sh", "-c", body};
  };
  // About 0.2 s of the shell's arithmetic on an idle core, with no line between start and result.
  const std::string work = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; ";
  const auto t0 = Clock::now();
  const WorkerRun working = run_worker(
      starved("printf '%s\\n' '{\"start\":\"mem.a\"}' >&3; " + work + pass_lines("mem.a", d)), d, {"mem.a"}, limits(1));
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GT(took, 1.0) << "the load did not slow the worker past the watchdog: nothing was tested";
  EXPECT_EQ(working.end, WorkerEnd::kCompleted);
  ASSERT_FALSE(working.results.empty());
  EXPECT_NE(working.results[0].outcome, Outcome::kDeviceError) << working.results[0].reason;

  const WorkerRun silent =
      run_worker(starved("printf '%s\\n' '{\"start\":\"mem.a\"}' >&3; exec sleep 600"), d, {"mem.a"}, limits(1));
  EXPECT_EQ(silent.end, WorkerEnd::kHung);
  ASSERT_EQ(silent.results.size(), 1u);
  EXPECT_EQ(silent.results[0].reason.rfind("hung: no progress", 0), 0u) << silent.results[0].reason;
}

}  // namespace
}  // namespace sdc

namespace sdc {
namespace {

// The processes whose parent is this one.
std::vector<pid_t> children() {
  std::vector<pid_t> kids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    // "pid (comm) state ppid ...": the command may hold spaces and parentheses, so from the last ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == ::getpid())
      kids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return kids;
}

// While it lives, every child of this process runs at a tenth of its speed: stopped (SIGSTOP) for
// 90 ms of every 100 ms, as under a CPU quota. This process, whose watchdog reads the clock, runs on.
class SlowedChildren {
 public:
  SlowedChildren()
      : thread_([this] {
          while (!done_) {
            const std::vector<pid_t> kids = children();
            for (pid_t p : kids) ::kill(p, SIGSTOP);
            std::this_thread::sleep_for(std::chrono::milliseconds(90));
            for (pid_t p : kids) ::kill(p, SIGCONT);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }) {}
  ~SlowedChildren() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// The real worker, ten times slower, under a 2 s watchdog: every kind of work it does (allocating
// and faulting a buffer, pattern passes up and down, chains and their host goldens, the SFU and its
// host check, GEMMs) beats often enough that it is never called hung, and a hang under the same
// slow-down is still caught.
TEST(Isolation, AHealthyDeviceTenTimesSlowerIsNeverHungAndAHangStillIs) {
  const std::vector<std::string> probes = {"mem.own_address",    "mem.march_c",    "alu.fma32",        "alu.divsqrt",
                                           "sfu.transcendental", "gemm.simt.fp32", "gemm.random.fp32", "alu.int64"};
  std::vector<std::string> argv = {std::string(SDC_BINARY_DIR) + "/cli/sdcprobe",
                                   "--backend",
                                   "cpu",
                                   "worker",
                                   "--seed",
                                   "1",
                                   "--device",
                                   "0",
                                   "--inject",
                                   "model=hang,probe=alu.int64",
                                   "--"};
  argv.insert(argv.end(), probes.begin(), probes.end());
  WorkerRun run;
  {
    const SlowedChildren slowed;
    run = run_worker(argv, cpu(0), probes, limits(2));
  }
  std::string said;
  for (const auto& r : run.results) said += r.probe + ": " + r.reason + "\n";
  ASSERT_EQ(run.results.size(), probes.size()) << said;
  for (size_t i = 0; i + 1 < probes.size(); ++i) {
    EXPECT_EQ(run.results[i].probe, probes[i]);
    EXPECT_EQ(run.results[i].outcome, Outcome::kPass) << probes[i] << ": " << run.results[i].reason;
  }
  EXPECT_EQ(run.end, WorkerEnd::kHung);
  EXPECT_EQ(run.results.back().outcome, Outcome::kDeviceError);
  EXPECT_EQ(run.results.back().reason.rfind("hung: no progress", 0), 0u) << run.results.back().reason;
}

// qualify --burn reaches the isolated worker: its gemm.burn.* runs for the seconds given.
TEST(Isolation, TheBurnTimeReachesTheWorker) {
  WorkerSetup setup;
  setup.executable = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";
  setup.backend.backend = "cpu";
  RunOptions options;
  options.seed = 1;
  options.burn_s = 1.25;
  const DeviceIdentity d = make_cpu_devices(1)[0]->identity();
  const WorkerRun run =
      run_worker(make_worker_command(setup, options)(d, {"gemm.burn.fp32"}), d, {"gemm.burn.fp32"}, limits(60));
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.results[0].outcome, Outcome::kPass) << run.results[0].reason;
  EXPECT_EQ(run.results[0].params["burn_s"].get<double>(), 1.25);
  EXPECT_GE(run.results[0].params["elapsed_s"].get<double>(), 1.25);
}

TEST(RankPlacement, EightRanksOnOneNodeTestEightDistinctDevices) {
  const std::vector<std::string> hosts(8, "node7");
  std::vector<size_t> chosen;
  for (int rank = 0; rank < 8; ++rank) {
    const NodePlacement p = node_placement(hosts, rank);
    EXPECT_EQ(p.local_rank, rank);
    EXPECT_EQ(p.local_size, 8);
    chosen.push_back(device_for_rank(p, 8));
  }
  std::sort(chosen.begin(), chosen.end());
  EXPECT_EQ(std::unique(chosen.begin(), chosen.end()), chosen.end());  // distinct
  EXPECT_EQ(chosen.back(), 7u);
}

TEST(RankPlacement, RanksAreNumberedWithinTheirOwnNode) {
  const std::vector<std::string> hosts = {"a", "b", "a", "b", "a", "b"};
  EXPECT_EQ(node_placement(hosts, 4).local_rank, 2);
  EXPECT_EQ(node_placement(hosts, 4).local_size, 3);
  EXPECT_EQ(device_for_rank(node_placement(hosts, 3), 8), 1u);
}

TEST(RankPlacement, MoreRanksThanDevicesIsAClearError) {
  const std::vector<std::string> hosts(8, "node7");
  try {
    device_for_rank(node_placement(hosts, 5), 4);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("8 MPI ranks on this node but 4 devices"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sdc
