// The inline probe's C ABI, through the shared library exactly as a training job loads it.
#include <gtest/gtest.h>

#include <sched.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sdcprobe/sdcprobe.h"

namespace {

nlohmann::json poll(sdc_inline* p) {
  char buf[16384];
  EXPECT_EQ(sdc_inline_poll(p, buf, sizeof(buf), nullptr), SDC_OK) << sdc_last_error();
  return nlohmann::json::parse(buf);
}

// Waits until no probe is in flight, so the next due step is never skipped as busy.
void wait_idle(sdc_inline* p) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (poll(p)["in_flight"].get<bool>()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::vector<nlohmann::json> read_events(const std::string& path) {
  std::vector<nlohmann::json> events;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) events.push_back(nlohmann::json::parse(line));
  return events;
}

sdc_inline_config cpu_config() {
  sdc_inline_config c;
  sdc_inline_config_init(&c);
  c.backend = "cpu";
  c.probes = "alu.fma32,alu.int64";
  c.seed = 11;
  return c;
}

TEST(InlineAbi, ConfigInitSetsVersionAndDefaults) {
  sdc_inline_config c;
  std::memset(&c, 0xff, sizeof(c));
  sdc_inline_config_init(&c);
  EXPECT_EQ(c.abi_version, static_cast<uint32_t>(SDC_INLINE_ABI_VERSION));
  EXPECT_EQ(c.backend, nullptr);
  EXPECT_EQ(c.every, 0);
  EXPECT_DOUBLE_EQ(c.budget_fraction, 0.01);
  EXPECT_STREQ(sdc_version(), "0.1.0");
}

TEST(InlineAbi, BadArgumentsReturnCodesAndMessagesNeverExceptions) {
  sdc_inline* p = reinterpret_cast<sdc_inline*>(0x1);
  EXPECT_EQ(sdc_inline_create(nullptr, &p), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sdc_last_error()), "");

  struct Case {
    void (*mutate)(sdc_inline_config&);
    sdc_status status;
    const char* message;
  };
  const Case cases[] = {
      {[](sdc_inline_config& c) { c.abi_version = 99; }, SDC_ERR_INVALID_ARGUMENT, "abi_version 99"},
      {[](sdc_inline_config& c) { c.backend = "tpu"; }, SDC_ERR_INVALID_ARGUMENT, "backend 'tpu'"},
      {[](sdc_inline_config& c) { c.probes = "no.such"; }, SDC_ERR_INVALID_ARGUMENT, "no probe matches 'no.such'"},
      {[](sdc_inline_config& c) { c.inject = "model=zap"; }, SDC_ERR_INVALID_ARGUMENT, "field 'model'"},
      {[](sdc_inline_config& c) { c.budget_fraction = 0; }, SDC_ERR_INVALID_ARGUMENT, "budget_fraction"},
      {[](sdc_inline_config& c) { c.every = -3; }, SDC_ERR_INVALID_ARGUMENT, "every"},
      {[](sdc_inline_config& c) { c.ranks = -1; }, SDC_ERR_INVALID_ARGUMENT, "ranks must be >= 0"},
      {[](sdc_inline_config& c) { c.device = 5; }, SDC_ERR_NO_DEVICE, "device 5 does not exist"},
      {[](sdc_inline_config& c) { c.event_log = "/nonexistent-dir/e.jsonl"; }, SDC_ERR_INVALID_ARGUMENT,
       "/nonexistent-dir/e.jsonl"},
  };
  for (const auto& k : cases) {
    sdc_inline_config c = cpu_config();
    k.mutate(c);
    p = reinterpret_cast<sdc_inline*>(0x1);
    EXPECT_EQ(sdc_inline_create(&c, &p), k.status) << k.message;
    EXPECT_EQ(p, nullptr);
    EXPECT_NE(std::string(sdc_last_error()).find(k.message), std::string::npos) << sdc_last_error();
  }
  EXPECT_EQ(sdc_inline_step(nullptr, 0, nullptr), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_inline_poll(nullptr, nullptr, 0, nullptr), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_inline_log_event(nullptr, "{}"), SDC_ERR_INVALID_ARGUMENT);
  sdc_inline_destroy(nullptr);
}

TEST(InlineAbi, CleanRunPassesAndRecordsTheLastGoodStep) {
  sdc_inline_config c = cpu_config();
  c.every = 3;
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  for (int64_t step = 0; step <= 9; ++step) {
    if (step % 3 == 0) wait_idle(p);
    ASSERT_EQ(sdc_inline_step(p, step, nullptr), SDC_OK);
  }
  wait_idle(p);
  ASSERT_EQ(sdc_inline_step(p, 10, nullptr), SDC_OK);
  const auto v = poll(p);
  EXPECT_EQ(v["verdict"], "pass");
  EXPECT_EQ(v["last_good_step"], 9);
  EXPECT_EQ(v["probes_run"], 5);  // at create, then steps 0, 3, 6, 9
  EXPECT_EQ(v["failures"], 0);
  sdc_inline_destroy(p);
}

// A fixed cadence falls on multiples of `every`, also when the run resumes at step 21; the probes
// run on the worker thread ("blocking": false) and step()'s own work is a blocking span.
TEST(InlineAbi, CadenceFallsOnStepMultiplesAfterARestore) {
  const std::string log = ::testing::TempDir() + "inline_aligned_" + std::to_string(::getpid()) + ".jsonl";
  std::remove(log.c_str());
  sdc_inline_config c = cpu_config();
  c.every = 5;
  c.event_log = log.c_str();
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  for (int64_t step = 21; step <= 31; ++step) {
    wait_idle(p);
    ASSERT_EQ(sdc_inline_step(p, step, nullptr), SDC_OK);
  }
  sdc_inline_destroy(p);
  std::set<int64_t> background, blocking;
  for (const auto& e : read_events(log)) {
    if (e["event"] != "probe_begin") continue;
    const bool waited = e["blocking"].get<bool>();
    (waited ? blocking : background).insert(e["step"].get<int64_t>());
    if (waited) {
      EXPECT_EQ(e["probe"], "inline.step");
    }
  }
  EXPECT_EQ(background, (std::set<int64_t>{25, 30}));
  // Queued at 25 and 30, collected at the next call.
  EXPECT_EQ(blocking, (std::set<int64_t>{25, 26, 30, 31}));
  std::remove(log.c_str());
}

TEST(InlineAbi, PollReportsTheSizeItNeeds) {
  sdc_inline_config c = cpu_config();
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  char small[8];
  size_t needed = 0;
  EXPECT_EQ(sdc_inline_poll(p, small, sizeof(small), &needed), SDC_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(needed, sizeof(small));
  std::vector<char> big(needed);
  EXPECT_EQ(sdc_inline_poll(p, big.data(), big.size(), &needed), SDC_OK);
  EXPECT_EQ(std::string(big.data()).size() + 1, needed);
  sdc_inline_destroy(p);
}

TEST(InlineAbi, FaultWritesSdcDetectedWithTheLastGoodStep) {
  const std::string log = ::testing::TempDir() + "inline_fault_" + std::to_string(::getpid()) + ".jsonl";
  std::remove(log.c_str());
  sdc_inline_config c = cpu_config();
  c.every = 4;
  c.event_log = log.c_str();
  c.inject = "probe=alu.*,model=bitflip,bit=3,mode=permanent,after=4";  // steps 0 and 4 clean
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  for (int64_t step = 0; step <= 8; ++step) {
    if (step % 4 == 0) wait_idle(p);
    ASSERT_EQ(sdc_inline_log_event(p, ("{\"event\":\"step_end\",\"step\":" + std::to_string(step) + "}").c_str()),
              SDC_OK);
    ASSERT_EQ(sdc_inline_step(p, step, nullptr), SDC_OK);
  }
  wait_idle(p);
  ASSERT_EQ(sdc_inline_step(p, 9, nullptr), SDC_OK);
  EXPECT_EQ(poll(p)["verdict"], "fail");
  EXPECT_EQ(sdc_inline_log_event(p, "not json"), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_inline_log_event(p, "{\"t\":1,\"event\":\"x\"}"), SDC_ERR_INVALID_ARGUMENT);
  sdc_inline_destroy(p);

  int detected = 0;
  int64_t last_t = 0;
  for (const auto& e : read_events(log)) {
    EXPECT_GE(e["t"].get<int64_t>(), last_t);
    last_t = e["t"];
    if (e["event"] != "sdc_detected") continue;
    ++detected;
    EXPECT_EQ(e["last_good_step"], 4);
    EXPECT_EQ(e["step"], 8);
  }
  EXPECT_EQ(detected, 1);
  std::remove(log.c_str());
}

TEST(InlineAbi, StreamOfAnotherDeviceIsRefusedAtCreateAndStep) {
  // On the CPU backend a stream is an opaque id: (void*)(index + 1) names device `index`.
  void* const own_stream = reinterpret_cast<void*>(uintptr_t{1});
  void* const other_stream = reinterpret_cast<void*>(uintptr_t{2});
  sdc_inline_config c = cpu_config();
  c.stream = other_stream;
  sdc_inline* p = nullptr;
  EXPECT_EQ(sdc_inline_create(&c, &p), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(sdc_last_error()).find("stream belongs to device 1, not to device 0"), std::string::npos)
      << sdc_last_error();

  c.stream = own_stream;
  c.every = 1;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  ASSERT_EQ(sdc_inline_step(p, 0, own_stream), SDC_OK) << sdc_last_error();
  wait_idle(p);
  EXPECT_EQ(sdc_inline_step(p, 1, other_stream), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sdc_last_error()).find("stream belongs to device 1"), std::string::npos) << sdc_last_error();
  sdc_inline_destroy(p);
}

TEST(InlineAbi, VersionOneConfigWithoutStreamIsAccepted) {
  sdc_inline_config c = cpu_config();
  c.abi_version = 1;
  c.stream = reinterpret_cast<void*>(uintptr_t{2});  // past a version 1 struct: never read
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  sdc_inline_destroy(p);
}

TEST(InlineAbi, HangAndCrashInjectionAreRefused) {
  for (const char* spec : {"model=hang", "probe=alu.*,model=crash", "model=bitflip;model=hang"}) {
    sdc_inline_config c = cpu_config();
    c.inject = spec;
    sdc_inline* p = nullptr;
    EXPECT_EQ(sdc_inline_create(&c, &p), SDC_ERR_INVALID_ARGUMENT) << spec;
    EXPECT_EQ(p, nullptr);
    EXPECT_NE(std::string(sdc_last_error()).find("hang and crash are refused"), std::string::npos) << sdc_last_error();
  }
}

TEST(InlineAbi, StepsNearTheEndOfInt64NeverWrapTheCadence) {
  sdc_inline_config c = cpu_config();
  c.every = 1000;
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t last = max - max % 1000;                 // the last multiple of the cadence
  ASSERT_EQ(sdc_inline_step(p, last, nullptr), SDC_OK);  // due: the next multiple is past the end
  wait_idle(p);
  ASSERT_EQ(sdc_inline_step(p, last + 1, nullptr), SDC_OK);  // not due (a wrapped next step would be)
  ASSERT_EQ(sdc_inline_finish(p), SDC_OK);
  auto v = poll(p);
  EXPECT_EQ(v["probes_run"], 2);  // at create, then at the last multiple
  EXPECT_EQ(v["last_good_step"], last);
  ASSERT_EQ(sdc_inline_step(p, max, nullptr), SDC_OK);  // the next due step saturated at the last one
  ASSERT_EQ(sdc_inline_finish(p), SDC_OK);
  v = poll(p);
  EXPECT_EQ(v["probes_run"], 3);
  EXPECT_EQ(v["last_good_step"], max);
  EXPECT_EQ(sdc_inline_step(p, -1, nullptr), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sdc_last_error()).find("step -1"), std::string::npos) << sdc_last_error();
  sdc_inline_destroy(p);
}

TEST(InlineAbi, FinishRecordsTheProbeInFlight) {
  sdc_inline_config c = cpu_config();
  c.every = 1;
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  ASSERT_EQ(sdc_inline_step(p, 0, nullptr), SDC_OK);  // queued, maybe still running
  ASSERT_EQ(sdc_inline_finish(p), SDC_OK) << sdc_last_error();
  const auto v = poll(p);
  EXPECT_EQ(v["in_flight"], false);
  EXPECT_EQ(v["probes_run"], 2);
  EXPECT_EQ(v["last_good_step"], 0);
  EXPECT_EQ(sdc_inline_finish(nullptr), SDC_ERR_INVALID_ARGUMENT);
  sdc_inline_destroy(p);
}

TEST(InlineAbi, LogEventRefusesWhatTheGoodputReaderWouldReject) {
  const std::string log = ::testing::TempDir() + "inline_schema_" + std::to_string(::getpid()) + ".jsonl";
  std::remove(log.c_str());
  sdc_inline_config c = cpu_config();
  c.event_log = log.c_str();
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  const struct {
    const char* event;
    const char* message;
  } bad[] = {
      {R"({"event":"bogus"})", "unknown event \"bogus\""},
      {R"({"event":"step_end"})", "step_end needs \"step\""},
      {R"({"event":"step_end","step":"7"})", "\"step\" must be an integer"},
      {R"({"event":"step_end","step":18446744073709551615})", "\"step\" must be an integer"},
      {R"({"event":"step_end","step":1} x)", "not valid JSON"},
      {R"([1,2])", "JSON object"},
      {"{\"event\":\"job_end\",\"note\":\"\xff\"}", "not valid JSON"},
  };
  for (const auto& b : bad) {
    EXPECT_EQ(sdc_inline_log_event(p, b.event), SDC_ERR_INVALID_ARGUMENT) << b.event;
    EXPECT_NE(std::string(sdc_last_error()).find(b.message), std::string::npos) << sdc_last_error();
  }
  EXPECT_EQ(sdc_inline_log_event(p, R"({"event":"step_end","step":7,"extra":{"a":[1,{"b":null}]}})"), SDC_OK)
      << sdc_last_error();
  sdc_inline_destroy(p);
  const auto events = read_events(log);
  ASSERT_EQ(events.size(), 1u);  // only the good one
  EXPECT_EQ(events[0]["event"], "step_end");
  std::remove(log.c_str());
}

TEST(InlineAbi, LogEventRefusesDeepNestingWithoutExhaustingTheStack) {
  sdc_inline_config c = cpu_config();
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  const size_t depth = 100000;
  const std::string deep = R"({"event":"job_end","x":)" + std::string(depth, '[') + std::string(depth, ']') + "}";
  EXPECT_EQ(sdc_inline_log_event(p, deep.c_str()), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sdc_last_error()).find("deeper than 32"), std::string::npos) << sdc_last_error();
  const std::string unclosed = std::string(depth, '{');
  EXPECT_EQ(sdc_inline_log_event(p, unclosed.c_str()), SDC_ERR_INVALID_ARGUMENT);
  const std::string shallow = R"({"event":"job_end","x":)" + std::string(30, '[') + std::string(30, ']') + "}";
  EXPECT_EQ(sdc_inline_log_event(p, shallow.c_str()), SDC_OK) << sdc_last_error();
  sdc_inline_destroy(p);
}

TEST(InlineAbi, LogEventAcceptsThirtyTwoLevelsAndRefusesThirtyThree) {
  sdc_inline_config c = cpu_config();
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  // The event object is level 1; "x" holds levels 2 to `levels`, innermost empty.
  auto arrays = [](int levels) {
    return R"({"event":"job_end","x":)" + std::string(levels - 1, '[') + std::string(levels - 1, ']') + "}";
  };
  auto objects = [](int levels) {
    std::string x = "{}";
    for (int level = 3; level <= levels; ++level) x = R"({"k":)" + x + "}";
    return R"({"event":"job_end","x":)" + x + "}";
  };
  for (const auto& event : {arrays(32), objects(32)}) {
    EXPECT_EQ(sdc_inline_log_event(p, event.c_str()), SDC_OK) << sdc_last_error() << " " << event;
  }
  for (const auto& event : {arrays(33), objects(33)}) {
    EXPECT_EQ(sdc_inline_log_event(p, event.c_str()), SDC_ERR_INVALID_ARGUMENT) << event;
    EXPECT_NE(std::string(sdc_last_error()).find("deeper than 32"), std::string::npos) << sdc_last_error();
  }
  sdc_inline_destroy(p);
}

// Calls on one handle from several threads are serialised by the library; the TSan preset
// (.ci/tsan.sh) runs these.
TEST(InlineAbiThreads, TwoThreadsStepPollAndLogAtOnce) {
  sdc_inline_config c = cpu_config();
  c.every = 2;
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  auto drive = [p](int64_t first) {
    for (int64_t step = first; step < first + 200; ++step) {
      EXPECT_EQ(sdc_inline_step(p, step, nullptr), SDC_OK) << sdc_last_error();
      EXPECT_EQ(sdc_inline_log_event(p, R"({"event":"job_eligible"})"), SDC_OK) << sdc_last_error();
      char buf[16384];
      EXPECT_EQ(sdc_inline_poll(p, buf, sizeof(buf), nullptr), SDC_OK) << sdc_last_error();
    }
  };
  std::thread a(drive, 0), b(drive, 1000);
  a.join();
  b.join();
  ASSERT_EQ(sdc_inline_finish(p), SDC_OK);
  const auto v = poll(p);
  EXPECT_EQ(v["verdict"], "pass");
  EXPECT_GE(v["probes_run"].get<int64_t>(), 2);
  sdc_inline_destroy(p);
}

// The Python wrapper's pattern: one lock around every call, close() from another thread while a
// training thread is stepping; the stepping thread then sees the handle gone.
TEST(InlineAbiThreads, CloseFromAnotherThreadWhileOneSteps) {
  sdc_inline_config c = cpu_config();
  c.every = 1;
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  std::mutex lock;
  std::atomic<int64_t> steps{0};
  std::thread trainer([&] {
    for (int64_t step = 0;; ++step) {
      std::lock_guard<std::mutex> hold(lock);
      if (p == nullptr) return;
      EXPECT_EQ(sdc_inline_step(p, step, nullptr), SDC_OK) << sdc_last_error();
      steps.store(step + 1);
    }
  });
  while (steps.load() < 50) std::this_thread::yield();
  nlohmann::json final_verdict;
  {
    std::lock_guard<std::mutex> hold(lock);
    ASSERT_EQ(sdc_inline_finish(p), SDC_OK);
    final_verdict = poll(p);
    sdc_inline_destroy(p);
    p = nullptr;
  }
  trainer.join();
  EXPECT_EQ(final_verdict["verdict"], "pass");
  EXPECT_EQ(final_verdict["in_flight"], false);
}

// A sysfs tree in which every core of this process shares one last-level cache of `size` (sysfs's
// form: "1024K"), named by SDCPROBE_SYSFS_ROOT while the object lives.
class FakeCacheRoot {
 public:
  explicit FakeCacheRoot(const std::string& size)
      : root_(std::filesystem::temp_directory_path() / ("sdcprobe-inline-cache-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(root_);
    cpu_set_t set;
    EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    for (int core = 0; core < CPU_SETSIZE; ++core) {
      if (!CPU_ISSET(core, &set)) continue;
      const auto dir = root_ / "sys/devices/system/cpu" / ("cpu" + std::to_string(core)) / "cache/index3";
      std::filesystem::create_directories(dir);
      std::ofstream(dir / "level") << "3\n";
      std::ofstream(dir / "size") << size << "\n";
      std::ofstream(dir / "shared_cpu_list") << "0-1023\n";
    }
    ::setenv("SDCPROBE_SYSFS_ROOT", root_.c_str(), 1);
  }
  ~FakeCacheRoot() {
    ::unsetenv("SDCPROBE_SYSFS_ROOT");
    std::filesystem::remove_all(root_);
  }

 private:
  std::filesystem::path root_;
};

// The mem.random_blocks result of a verdict's results.
nlohmann::json memory_result(const nlohmann::json& verdict) {
  for (const auto& r : verdict["results"]) {
    if (r["probe"] == "mem.random_blocks") return r;
  }
  ADD_FAILURE() << "no mem.random_blocks result: " << verdict.dump();
  return nlohmann::json::object();
}

constexpr uint64_t kFakeCache = 1 << 20;

sdc_inline_config rotating_config() {
  sdc_inline_config c = cpu_config();
  c.probes = "mem.random_blocks";
  c.every = 1;
  return c;
}

// With a 1 MiB cache the region is 3 slices of 1 MiB; every probe checks the next slice against the
// pattern its previous visit wrote (the probe at create wrote them all), three cycles without a
// false alarm, and the verdict and the cadence note say what the region covers.
TEST(InlineAbi, MemoryRotationChecksEachSliceOnceACycleWithoutFalseAlarms) {
  FakeCacheRoot cache("1024K");
  sdc_inline_config c = rotating_config();
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  auto v = poll(p);
  const auto& rotation = v["memory_rotation"];
  EXPECT_EQ(rotation["probe"], "mem.random_blocks");
  EXPECT_EQ(rotation["cache_bytes"], kFakeCache);
  EXPECT_EQ(rotation["cache"], "device");
  EXPECT_EQ(rotation["slice_bytes"], kFakeCache);
  EXPECT_EQ(rotation["slices"], 3);
  EXPECT_EQ(rotation["region_bytes"], 3 * kFakeCache);
  EXPECT_DOUBLE_EQ(rotation["region_cache_multiple"].get<double>(), 3.0);
  EXPECT_EQ(rotation["cycle_steps"], 3);  // 3 slices x every 1
  EXPECT_EQ(rotation["slices_checked"], 0);
  const std::string note = v["cadence"];
  EXPECT_NE(note.find("a 3.0 MiB region (3.00x the 1.0 MiB cache) in 3 slices of 1.0 MiB"), std::string::npos) << note;
  EXPECT_NE(note.find("each slice is checked every 3 steps"), std::string::npos) << note;

  constexpr int64_t kSteps = 3 * 3 + 1;
  for (int64_t step = 0; step <= kSteps; ++step) {
    wait_idle(p);
    ASSERT_EQ(sdc_inline_step(p, step, nullptr), SDC_OK);  // collects the probe of step - 1
    if (step == 0) continue;
    const auto r = memory_result(poll(p));
    EXPECT_EQ(r["outcome"], "pass") << r.dump();
    EXPECT_EQ(r["params"]["rotation"]["slice"], (step - 1) % 3);
    EXPECT_EQ(r["params"]["rotation"]["visit"], (step - 1) / 3 + 1);
    EXPECT_EQ(r["params"]["rotation"]["checked"], kFakeCache / 8);
    EXPECT_EQ(r["params"]["rotation"]["mismatches"], 0);
  }
  ASSERT_EQ(sdc_inline_finish(p), SDC_OK);
  v = poll(p);
  EXPECT_EQ(v["verdict"], "pass");
  EXPECT_EQ(v["failures"], 0);
  EXPECT_EQ(v["memory_rotation"]["slices_checked"], kSteps + 1);
  sdc_inline_destroy(p);
}

// A bit flipped in the region is caught by that slice's next check and reported as the memory
// probe, at that step; the check rewrote the slice, so its next visit is clean again.
TEST(InlineAbi, FaultInTheMemoryRotationIsCaughtOnTheSlicesNextVisit) {
  FakeCacheRoot cache("1024K");
  const std::string log = ::testing::TempDir() + "inline_rotation_" + std::to_string(::getpid()) + ".jsonl";
  std::remove(log.c_str());
  sdc_inline_config c = rotating_config();
  c.event_log = log.c_str();
  // mem.random_blocks at the quick level checks its in-cache buffer twice (a pattern, then its
  // inverse) before the rotation's check: injection point 3k + 2 is the rotation's check at step k.
  // after=14: step 4, slice 1 on its third visit.
  c.inject = "probe=mem.random_blocks,model=bitflip,mode=transient,after=14,bit=5,index=77";
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  for (int64_t step = 0; step <= 8; ++step) {
    wait_idle(p);
    ASSERT_EQ(sdc_inline_step(p, step, nullptr), SDC_OK);
    if (step == 0) continue;
    const auto r = memory_result(poll(p));
    const auto& rotation = r["params"]["rotation"];
    EXPECT_EQ(rotation["slice"], (step - 1) % 3);
    if (step - 1 == 4) {
      EXPECT_EQ(r["outcome"], "fail");
      EXPECT_EQ(r["mismatches"], 1);  // the rotation's alone: the in-cache checks were clean
      EXPECT_EQ(rotation["mismatches"], 1);
      EXPECT_EQ(rotation["visit"], 2);
      ASSERT_EQ(rotation["records"].size(), 1u);
      EXPECT_EQ(rotation["records"][0]["byte_offset"], kFakeCache + 77 * 8);  // in slice 1
      EXPECT_EQ(rotation["records"][0]["bits"], nlohmann::json::array({5}));
    } else {
      EXPECT_EQ(r["outcome"], "pass") << "step " << step - 1;
      EXPECT_EQ(rotation["checked"], kFakeCache / 8);
    }
  }
  const auto v = poll(p);
  EXPECT_EQ(v["verdict"], "fail");
  EXPECT_EQ(v["failures"], 1);
  sdc_inline_destroy(p);
  int detected = 0;
  for (const auto& e : read_events(log)) {
    if (e["event"] != "sdc_detected") continue;
    ++detected;
    EXPECT_EQ(e["step"], 4);
    EXPECT_EQ(e["last_good_step"], 3);
  }
  EXPECT_EQ(detected, 1);
  std::remove(log.c_str());
}

// A region the device cannot spare fails create, saying what it needs; no memory probe, no region.
TEST(InlineAbi, MemoryRotationTheDeviceCannotSpareFailsCreate) {
  {
    FakeCacheRoot cache("1073741824K");  // 1 TiB: a region of more than 2 TiB
    sdc_inline_config c = rotating_config();
    sdc_inline* p = reinterpret_cast<sdc_inline*>(0x1);
    EXPECT_EQ(sdc_inline_create(&c, &p), SDC_ERR_INTERNAL);
    EXPECT_EQ(p, nullptr);
    const std::string error = sdc_last_error();
    EXPECT_NE(error.find("the inline memory rotation needs"), std::string::npos) << error;
    EXPECT_NE(error.find("more than twice the 1048576.0 MiB cache) on cpu0"), std::string::npos) << error;
    EXPECT_NE(error.find("more than a quarter of its"), std::string::npos) << error;
    EXPECT_NE(error.find("leave mem.* out of the inline probes"), std::string::npos) << error;
  }
  sdc_inline_config c = cpu_config();
  sdc_inline* p = nullptr;
  ASSERT_EQ(sdc_inline_create(&c, &p), SDC_OK) << sdc_last_error();
  EXPECT_TRUE(poll(p)["memory_rotation"].is_null());
  sdc_inline_destroy(p);
}

TEST(InlineAbi, CudaWithoutADeviceIsNoDevice) {
  sdc_inline_config c = cpu_config();
  c.backend = "cuda";
  sdc_inline* p = nullptr;
  const sdc_status s = sdc_inline_create(&c, &p);
  if (s == SDC_OK) {
    sdc_inline_destroy(p);
    GTEST_SKIP() << "a CUDA device is present";
  }
  EXPECT_EQ(s, SDC_ERR_NO_DEVICE) << sdc_last_error();
}

}  // namespace
