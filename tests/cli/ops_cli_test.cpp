// Runs the built `sdcprobe` as an operator's daemon, timer and gates would: sweep, history, status,
// release, metrics, signals, and isolation of hung and crashed devices.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/run_sdcprobe.hpp"
#include "tests/scheduler/sweep/prom_check.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kBinary = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";

using sdc::test::Outcome;
using sdc::test::sdcprobe;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One value from the history database, read with SQLite directly (not through sdcprobe).
std::string query(const fs::path& db, const std::string& sql) {
  sqlite3* raw = nullptr;
  if (sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(raw);
    return "";
  }
  sqlite3_busy_timeout(raw, 2000);
  sqlite3_stmt* s = nullptr;
  std::string value;
  if (sqlite3_prepare_v2(raw, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(s, 0);
    value = t ? reinterpret_cast<const char*>(t) : "";
  }
  sqlite3_finalize(s);
  sqlite3_close(raw);
  return value;
}

class OpsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sdcprobe-opscli-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "prom");
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    fs::remove_all(dir_);
  }

  std::string state() const { return "--state-dir " + (dir_ / "state").string(); }
  fs::path db() const { return dir_ / "state" / "history.db"; }
  fs::path prom() const { return dir_ / "prom" / "sdcprobe.prom"; }
  std::string sweep_args() const {
    return "sweep --once --level quick --backend cpu --cpu-devices 2 " + state() + " --prom-dir " +
           (dir_ / "prom").string();
  }

  // Starts a sweep in the background (output to a file); `extra` follows the common arguments.
  void start_sweep(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        kBinary,   "--backend", "cpu",         "--cpu-devices",           "2",          "sweep",
        "--level", "quick",     "--state-dir", (dir_ / "state").string(), "--prom-dir", (dir_ / "prom").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string log = (dir_ / "sweep.log").string();
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  // One pass with device 1 hung in `probe`.
  void start_hung_sweep(const std::string& probe) {
    hung_probe_ = probe;
    start_sweep({"--once", "--probe-timeout", "120", "--inject", "device=1,model=hang,probe=" + probe});
  }
  // Sends `sig` and returns the seconds until the sweep exited; `status` receives its wait status.
  double stop_sweep(int sig, int& status) {
    const auto sent = Clock::now();
    EXPECT_EQ(::kill(pid_, sig), 0);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return std::chrono::duration<double>(Clock::now() - sent).count();
  }
  // Waits until device 1's worker says it is hung (the injector announces it on stderr, which the
  // worker shares with the sweep): a condition, not a guess at how long start-up takes.
  void wait_until_hung() {
    const std::string hung = "sdcprobe: injected hang: " + hung_probe_ + " on device 1";
    const auto until = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < until) {
      if (read_file(dir_ / "sweep.log").find(hung) != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "the sweep never reached device 1:\n" << read_file(dir_ / "sweep.log");
  }

  fs::path dir_;
  pid_t pid_ = -1;
  std::string hung_probe_;
};

// Every file under the prom dir that node_exporter would read (*.prom) parses completely, by our
// reader and by promtool when installed. promtool's linter objects to camelCase label names, which
// are dcgm-exporter's (UUID, Hostname, modelName) on purpose; any other complaint fails.
void expect_prom_parses(const fs::path& file) {
  const std::string text = read_file(file);
  ASSERT_NO_THROW(sdc::test::parse_prometheus_text(text)) << text;
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return;
  const Outcome r = sdc::test::run_command("promtool check metrics < " + file.string());
  EXPECT_TRUE(r.code == 0 || r.code == 3) << r.out;  // 3: lint findings only
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    EXPECT_NE(line.find("label names should be written in 'snake_case' not 'camelCase'"), std::string::npos) << line;
  }
}

TEST_F(OpsCliTest, PromtoolIsAvailableOrSkipped) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "promtool not installed";
  // promtool must reject a broken file, or the checks above would prove nothing.
  std::ofstream(dir_ / "bad.prom") << "# TYPE x gauge\nx{a=\"1\"} one\n";
  const int status =
      std::system(("promtool check metrics < " + (dir_ / "bad.prom").string() + " >/dev/null 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
}

TEST_F(OpsCliTest, SweepOnceFillsTheHistoryAndWritesMetrics) {
  const Outcome r = sdcprobe(sweep_args());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(query(db(), "SELECT status FROM runs"), "complete");
  EXPECT_EQ(query(db(), "SELECT COUNT(*) FROM devices"), "2");
  const int results = std::stoi(query(db(), "SELECT COUNT(*) FROM results"));
  EXPECT_GE(results, 20);  // both devices, the whole quick catalogue (its estimates were unknown)
  EXPECT_EQ(query(db(), "SELECT COUNT(*) FROM results WHERE outcome != 'pass'"), "0");
  EXPECT_EQ(query(db(), "PRAGMA integrity_check"), "ok");

  const Outcome h = sdcprobe("history --json " + state());
  ASSERT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(static_cast<int>(nlohmann::json::parse(h.out).size()), results);
  const Outcome s = sdcprobe("status " + state());
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_EQ(std::count(s.out.begin(), s.out.end(), '\n'), 2) << s.out;
  EXPECT_EQ(std::regex_search(s.out, std::regex("healthy: no fault")), true) << s.out;

  expect_prom_parses(prom());
  const auto samples = sdc::test::parse_prometheus_text(read_file(prom()));
  int healthy = 0;
  for (const auto& [series, value] : samples) {
    if (series.rfind("sdcprobe_device_healthy{", 0) == 0) healthy += static_cast<int>(value);
    if (series.rfind("sdcprobe_probe_failures_total{", 0) == 0) {
      EXPECT_EQ(value, 0) << series;
    }
  }
  EXPECT_EQ(healthy, 2);
  // Only the metrics file: no temporary left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "prom"), fs::directory_iterator()), 1);
}

// Files in `dir`, by name, with their contents.
std::vector<std::pair<std::string, std::string>> snapshot(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    files.emplace_back(entry.path().filename().string(), read_file(entry.path()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

// history and status never write the database. As root, file permissions prove nothing, so: (1) on a
// database in rollback-journal mode they change no byte and create no -wal, -shm or -journal file
// (they used to switch it to WAL); (2) run as another user (nobody) on a read-only copy in a
// read-only directory, where SQLite may not create the -shm index, they still read it.
TEST_F(OpsCliTest, HistoryAndStatusOpenTheDatabaseReadOnly) {
  ASSERT_EQ(sdcprobe(sweep_args()).code, 0);
  const std::string results = query(db(), "SELECT COUNT(*) FROM results");
  ASSERT_EQ(query(db(), "PRAGMA journal_mode"), "wal");

  // (2) first, on a copy of the WAL-mode database (no -wal file: the sweep closed it).
  const fs::path ro = dir_ / "ro";
  fs::create_directories(ro);
  fs::copy_file(db(), ro / "history.db");
  fs::permissions(ro / "history.db", fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                          fs::perms::others_read | fs::perms::others_exec);
  std::string as_user;
  if (::geteuid() == 0) {
    ASSERT_EQ(std::system("command -v setpriv >/dev/null"), 0) << "setpriv (util-linux) is needed to drop root";
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  const std::string ro_state = " --state-dir " + ro.string();
  const Outcome s = sdc::test::run_command(as_user + kBinary + " status" + ro_state);
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_EQ(std::count(s.out.begin(), s.out.end(), '\n'), 2) << s.out;
  EXPECT_TRUE(std::regex_search(s.out, std::regex("healthy: no fault"))) << s.out;
  const Outcome h = sdc::test::run_command(as_user + kBinary + " history --json" + ro_state);
  ASSERT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(std::to_string(nlohmann::json::parse(h.out).size()), results);
  EXPECT_EQ(snapshot(ro).size(), 1u);
  fs::permissions(ro, fs::perms::owner_all, fs::perm_options::add);

  // (1) rollback-journal mode, then the readers as root.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db().c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  const auto before = snapshot(dir_ / "state");
  EXPECT_EQ(sdcprobe("status " + state()).code, 0);
  EXPECT_EQ(sdcprobe("history " + state()).code, 0);
  EXPECT_EQ(sdcprobe("history --json " + state()).code, 0);
  const auto after = snapshot(dir_ / "state");
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].first, before[i].first);
    EXPECT_TRUE(after[i].second == before[i].second) << after[i].first << " changed";
  }
  EXPECT_EQ(query(db(), "PRAGMA journal_mode"), "delete");
}

TEST_F(OpsCliTest, PersistentFaultQuarantinesExactlyThatDeviceAndStatusSaysWhy) {
  const Outcome r =
      sdcprobe(sweep_args() + " --clean-sweeps 1 --inject 'device=1,probe=alu.fma32,model=bitflip,bit=7'");
  EXPECT_EQ(r.code, 1) << r.out;
  const auto devices = nlohmann::json::parse(sdcprobe("devices --json --backend cpu --cpu-devices 2").out);
  const std::string good = devices[0]["uuid"], bad = devices[1]["uuid"];

  const Outcome s = sdcprobe("status " + state());
  EXPECT_EQ(s.code, 1) << s.out;
  EXPECT_TRUE(std::regex_search(s.out, std::regex(good + " cpu:0 healthy: "))) << s.out;
  EXPECT_TRUE(std::regex_search(
      s.out, std::regex(bad + " cpu:1 quarantined: persistent fault: alu\\.fma32 failed twice .*bits 7.*0/1 clean")))
      << s.out;
  // The re-run with a new seed is in the history too.
  EXPECT_EQ(query(db(), "SELECT COUNT(*) FROM results WHERE probe = 'alu.fma32' AND device_uuid = '" + bad +
                            "' AND outcome = 'fail'"),
            "2");

  expect_prom_parses(prom());
  const auto samples = sdc::test::parse_prometheus_text(read_file(prom()));
  for (const auto& [series, value] : samples) {
    if (series.rfind("sdcprobe_device_quarantined{", 0) == 0) {
      EXPECT_EQ(value, series.find(bad) != std::string::npos ? 1 : 0) << series;
    }
    if (series.rfind("sdcprobe_probe_failures_total{", 0) == 0) {
      const bool expected = series.find(bad) != std::string::npos && series.find("\"alu.fma32\"") != std::string::npos;
      EXPECT_EQ(value, expected ? 1 : 0) << series;
    }
  }

  // Not before a clean sweep, then only on an operator's word.
  EXPECT_EQ(sdcprobe("release " + bad + " " + state()).code, 2);
  ASSERT_EQ(sdcprobe(sweep_args() + " --clean-sweeps 1").code, 0);
  EXPECT_EQ(sdcprobe("status " + state()).code, 1);
  const Outcome rel = sdcprobe("release " + bad + " --by tester " + state());
  EXPECT_EQ(rel.code, 0) << rel.out;
  EXPECT_EQ(sdcprobe("status " + state()).code, 0);
  EXPECT_EQ(query(db(), "SELECT released_by FROM quarantine"), "tester");
}

TEST_F(OpsCliTest, SigkillMidPassLeavesAConsistentDatabaseAndNoPartialMetrics) {
  start_hung_sweep("mem.march_c");
  wait_until_hung();
  ASSERT_EQ(::kill(pid_, SIGKILL), 0);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  EXPECT_EQ(query(db(), "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query(db(), "SELECT status FROM runs"), "running");
  for (const auto& entry : fs::directory_iterator(dir_ / "prom")) {
    if (entry.path().extension() == ".prom") expect_prom_parses(entry.path());
  }
  // The next sweep takes over: the dead pass is recorded as interrupted.
  ASSERT_EQ(sdcprobe(sweep_args()).code, 0);
  EXPECT_EQ(query(db(), "SELECT status FROM runs WHERE id = 1"), "interrupted");
  EXPECT_EQ(query(db(), "PRAGMA integrity_check"), "ok");
}

TEST_F(OpsCliTest, SigtermStopsASweepWithinASecondAndRecordsTheInterruptedPass) {
  start_hung_sweep("mem.walking_bits");
  wait_until_hung();
  int status = 0;
  const double took = stop_sweep(SIGTERM, status);
  // The issue's deadline is 1 s; 0.5 s of margin for a loaded CI machine.
  EXPECT_LE(took, 1.5);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << read_file(dir_ / "sweep.log");
  EXPECT_EQ(query(db(), "SELECT status FROM runs"), "interrupted");
  EXPECT_EQ(query(db(), "SELECT reason FROM results WHERE probe = 'mem.walking_bits' AND outcome = 'skipped'"),
            "interrupted");
  expect_prom_parses(prom());
}

TEST_F(OpsCliTest, SigintStopsADaemonSleepingBetweenPasses) {
  start_sweep({"--every", "1h"});
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until && read_file(dir_ / "sweep.log").find("pass 1 complete") == std::string::npos) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(read_file(dir_ / "sweep.log").find("pass 1 complete"), std::string::npos) << read_file(dir_ / "sweep.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // asleep until the next pass, an hour away
  int status = 0;
  EXPECT_LE(stop_sweep(SIGINT, status), 1.5);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(query(db(), "SELECT group_concat(status) FROM runs"), "complete");
}

TEST_F(OpsCliTest, AHungDeviceIsReportedEvenWhenTheBudgetEndsBeforeTheWatchdog) {
  // Device 0 hangs in its first probe; the watchdog is longer than the budget, so the budget ends it.
  // It was silent, so it is a hang; device 1, in its own worker at the same time, is still tested.
  const Outcome r = sdcprobe(sweep_args() + " --budget 5s --probe-timeout 100 --inject 'device=0,model=hang'");
  EXPECT_EQ(r.code, 1) << r.out;
  const auto devices = nlohmann::json::parse(sdcprobe("devices --json --backend cpu --cpu-devices 2").out);
  const std::string hung = devices[0]["uuid"], other = devices[1]["uuid"];
  const std::string outcome =
      query(db(), "SELECT outcome || ': ' || reason FROM results WHERE device_uuid = '" + hung + "' ORDER BY id");
  EXPECT_EQ(outcome.rfind("device_error: hung", 0), 0u) << outcome << "\n" << r.out;
  EXPECT_NE(query(db(), "SELECT COUNT(*) FROM results WHERE device_uuid = '" + other + "'"), "0") << r.out;
  EXPECT_EQ(query(db(), "SELECT status FROM runs"), "complete");
}

TEST_F(OpsCliTest, IdleCheckFailureSkipsThePass) {
  const Outcome r = sdcprobe(sweep_args() + " --idle-check 'exit 3'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("node busy (idle check exited 3)"), std::string::npos) << r.out;
  EXPECT_EQ(query(db(), "SELECT status FROM runs"), "busy");
  EXPECT_EQ(query(db(), "SELECT COUNT(*) FROM results"), "0");
}

TEST_F(OpsCliTest, QualifySurvivesAHungAndACrashedDevice) {
  for (const std::string model : {"hang", "crash"}) {
    const fs::path report = dir_ / (model + ".json");
    const auto start = Clock::now();
    const Outcome r = sdcprobe("qualify --backend cpu --cpu-devices 3 --probe-timeout 5 --json " + report.string() +
                               " --inject 'device=1,probe=alu.fma64,model=" + model + "'");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(60));  // the watchdog ended the hang
    std::ifstream in(report);
    const auto j = nlohmann::json::parse(in);
    bool after = false;
    for (const auto& res : j["results"]) {
      const int device = res["device_index"];
      if (device != 1) {
        EXPECT_EQ(res["outcome"], "pass") << res.dump();  // the others were still tested
      } else if (res["probe"] == "alu.fma64") {
        EXPECT_EQ(res["outcome"], "device_error");
        EXPECT_NE(res["reason"].get<std::string>().find(model == "hang" ? "hung" : "signal 11"), std::string::npos)
            << res.dump();
        after = true;
      } else {
        EXPECT_EQ(res["outcome"], after ? "skipped" : "pass") << res.dump();
      }
    }
    EXPECT_TRUE(after) << r.out;
    EXPECT_NE(r.out.find("FAIL: cpu1 ["), std::string::npos) << r.out;
  }
}

// No timing assumption: a healthy worker beats after every bounded piece of its work, whatever the
// machine's speed (Isolation.AHealthyDeviceTenTimesSlowerIsNeverHungAndAHangStillIs), and a hung one
// is silent.
TEST_F(OpsCliTest, QualifyWatchesHungDevicesInParallelAndPassesTheRest) {
  const fs::path report = dir_ / "hung.json";
  const Outcome r =
      sdcprobe("qualify --backend cpu --cpu-devices 4 --probe-timeout 3 --budget 1h --json " + report.string() +
               " --inject 'device=1,model=hang;device=2,model=hang;device=3,model=hang'");
  EXPECT_EQ(r.code, 1) << r.out;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  std::vector<std::string> first(4);
  for (const auto& res : j["results"]) {
    const int d = res["device_index"];
    if (first[d].empty()) first[d] = res.value("outcome", "") + ": " + res.value("reason", "");
    if (d == 0) {
      EXPECT_EQ(res["outcome"], "pass") << res.dump();
    }
  }
  for (int d = 1; d < 4; ++d) EXPECT_EQ(first[d].rfind("device_error: hung: no progress", 0), 0u) << first[d];
}

TEST_F(OpsCliTest, AProbeStillProgressingAtTheBudgetCouldNotBeTested) {
  // A million passes cannot finish within seconds, but each pass beats: not a hang, exit 2.
  const fs::path report = dir_ / "slow.json";
  const Outcome r = sdcprobe("qualify --backend cpu --budget 8s --iterations 1000000 --json " + report.string());
  EXPECT_EQ(r.code, 2) << r.out;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  const auto& first = j["results"][0];
  EXPECT_EQ(first["outcome"], "skipped") << first.dump();
  EXPECT_NE(first["reason"].get<std::string>().find("could not test: still progressing when the 8 s budget"),
            std::string::npos)
      << first.dump();
  for (const auto& res : j["results"]) EXPECT_NE(res["outcome"], "device_error") << res.dump();
}

TEST_F(OpsCliTest, TheWorkerProtocolIsOnFd3AndStdoutStaysFree) {
  const fs::path protocol = dir_ / "protocol";
  const Outcome r = sdcprobe("--backend cpu worker --seed 1 --device 0 -- alu.fma32 3>" + protocol.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "");  // stdout and stderr: nothing
  const std::string lines = read_file(protocol);
  EXPECT_NE(lines.find("{\"retry\":false,\"start\":\"alu.fma32\"}\n"), std::string::npos) << lines;
  EXPECT_NE(lines.find("\"outcome\":\"pass\""), std::string::npos) << lines;
}

TEST_F(OpsCliTest, BadSizesAreRejectedBeforeAnyWorkerStarts) {
  const fs::path golden = dir_ / "golden.json";
  std::ofstream(golden) << R"({"format": "sdcprobe-golden", "version": 2, "seed": 1, "level": "quick",
                               "size_bytes": 18446744073709551615, "entries": []})";
  const std::pair<std::string, std::string> cases[] = {
      {"qualify --backend cpu --size -1", "--size"},
      {"qualify --backend cpu --size 18446744073709551616", "--size"},
      {"qualify --backend cpu --size 18446744073709551615", "--size: must be at most 281474976710656 bytes"},
      {"qualify --backend cpu --size 140737488355328", "--size (140737488355328 bytes) is more than cpu0"},
      {"sweep --once --backend cpu --size 18446744073709551615 " + state(), "--size"},
      {"qualify --backend cpu --golden " + golden.string(), "size_bytes: expected an integer in [8, "},
  };
  for (const auto& [args, message] : cases) {
    const Outcome r = sdcprobe(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("sdcprobe: error:"), std::string::npos) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("device_error"), std::string::npos) << args << "\n" << r.out;
  }
}

// node-problem-detector trims all of the plugin's stdout and takes it as the condition message: stdout
// holds the verdict alone (no seed, no table), the same on every run; the rest goes to stderr.
TEST_F(OpsCliTest, NpdFormatPrintsTheVerdictAloneOnStdout) {
  const auto stdout_of = [](const std::string& args) {
    return sdc::test::run_command("{ " + kBinary + " " + args + " 2>/dev/null; }");
  };
  const Outcome pass = stdout_of("qualify --format npd --backend cpu --cpu-devices 2");
  EXPECT_EQ(pass.code, 0);
  EXPECT_EQ(pass.out.rfind("OK: ", 0), 0u) << pass.out;
  EXPECT_EQ(pass.out.find('\n'), pass.out.size() - 1) << pass.out;
  EXPECT_LE(pass.out.size(), 81u);
  EXPECT_EQ(stdout_of("qualify --format npd --backend cpu --cpu-devices 2").out, pass.out);

  const std::string fault =
      "qualify --format npd --backend cpu --cpu-devices 2 "
      "--inject 'device=1,probe=alu.fma32,model=bitflip,bit=7'";
  const Outcome fail = stdout_of(fault);
  EXPECT_EQ(fail.code, 1);
  const auto devices = nlohmann::json::parse(sdcprobe("devices --json --backend cpu --cpu-devices 2").out);
  EXPECT_EQ(fail.out, "SDC: " + devices[1]["uuid"].get<std::string>() + " alu.fma32\n");
  const Outcome both = sdcprobe(fault);
  EXPECT_NE(both.out.find("seed 0x"), std::string::npos) << both.out;
  EXPECT_NE(both.out.find("MISMATCHES"), std::string::npos) << both.out;
  EXPECT_EQ(sdcprobe("qualify --format xml").code, 2);
}

TEST_F(OpsCliTest, BadOperatorInputIsAClearErrorWithExitTwo) {
  const std::pair<std::string, std::string> cases[] = {
      {"sweep --once --every soon " + state(), "--every"},
      {"sweep --once --budget 0s " + state(), "--budget"},
      {"sweep --once --window 1x " + state(), "--window"},
      {"sweep --once --inject 'model=hang,colour=red' " + state(), "'colour'"},
      {"sweep --once --prom-dir /nonexistent-dir " + state(), "--prom-dir"},
      {"status " + state(), "no history"},
      {"history --since yesterday " + state(), "--since"},
      // Found by coverage-guided fuzzing: strptime moved impossible dates on (2026-02-31: March 3).
      {"history --since 2026-02-31 " + state(), "--since: '2026-02-31' is not a valid UTC date"},
      {"history --since 2026-13-01 " + state(), "--since: '2026-13-01' is not a valid UTC date"},
      {"history --since 2026-02-29T10:00:00Z " + state(), "--since: '2026-02-29T10:00:00Z' is not a valid UTC date"},
      {"history --since 2026-01-01T24:00:00Z " + state(), "--since: '2026-01-01T24:00:00Z' is not a valid UTC date"},
      // Valid dates get as far as the history.
      {"history --since 2028-02-29 " + state(), "no history"},
      {"history --since 2026-11-28T10:00:00Z " + state(), "no history"},
      // Refused while the command line is parsed: the operator's error, never a device fault.
      {"qualify --backend cpu --size 4", "--size: must be at least 8 bytes"},
  };
  for (const auto& [args, message] : cases) {
    const Outcome r = sdcprobe(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
  }
}

}  // namespace
