// History, quarantine policy, pass planning, metrics and worker protocol, without running probes.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "host/backend.hpp"
#include "host/error.hpp"
#include "scheduler/consensus/consensus.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/isolation.hpp"
#include "scheduler/sweep/history.hpp"
#include "scheduler/sweep/prometheus.hpp"
#include "scheduler/sweep/quarantine.hpp"
#include "scheduler/sweep/sweep.hpp"
#include "scheduler/version.hpp"
#include "tests/scheduler/sweep/prom_check.hpp"

namespace sdc {
namespace {

namespace fs = std::filesystem;

class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sdcprobe-ops-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    db_ = (dir_ / "history.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static DeviceIdentity device(int index) {
    DeviceIdentity d;
    d.backend = "cpu";
    d.index = index;
    d.name = "Test \"CPU\"";
    d.uuid = "CPU-0000000" + std::to_string(index);
    d.pci_bus_id = "cpu:" + std::to_string(index);
    return d;
  }
  static ProbeResult result(const DeviceIdentity& d, const std::string& probe, Outcome outcome) {
    ProbeResult r;
    r.probe = probe;
    r.device_index = d.index;
    r.device_uuid = d.uuid;
    r.outcome = outcome;
    r.report.checked = 100;
    if (outcome == Outcome::kFail) {
      r.report.mismatches = 1;
      r.report.records.push_back({5, 0x10, 0x90, 64, 2, 3});
    }
    r.duration_s = 0.5;
    return r;
  }
  // A complete sweep pass at `at` with these results for `d` (and a pass of every other device given).
  static int64_t pass(History& h, const DeviceIdentity& d, const std::vector<ResultRecord>& records, double at) {
    const int64_t id = h.begin_run({0, "sweep", "host", 1, "quick", "0.1.0", at, 0, "running"});
    h.record(id, {d}, records, at);
    h.finish_run(id, "complete", at + 1);
    return id;
  }

  fs::path dir_;
  std::string db_;
};

TEST_F(OpsTest, HistoryIsWalVersionedAndRecordsRunsAndResults) {
  History h(db_);
  EXPECT_EQ(h.schema_version(), History::kSchemaVersion);
  const DeviceIdentity d = device(0);
  const int64_t run = h.begin_run({0, "sweep", "node7", 0xfedcba9876543210ULL, "standard", "0.1.0", 1000, 0, ""});
  h.record(run, {d}, {to_record(result(d, "alu.fma32", Outcome::kFail), 0, "persistent")}, 1001);
  h.finish_run(run, "complete", 1002);

  const auto runs = h.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].host, "node7");
  EXPECT_EQ(runs[0].seed, 0xfedcba9876543210ULL);  // all 64 bits survive SQLite's signed integers
  EXPECT_EQ(runs[0].status, "complete");
  const auto rows = h.results(d.uuid);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].probe, "alu.fma32");
  EXPECT_EQ(rows[0].outcome, "fail");
  EXPECT_EQ(rows[0].mismatches, 1u);
  EXPECT_EQ(rows[0].syndrome, "0x0000000000000080 bits 7");
  EXPECT_EQ(rows[0].fault, "persistent");
  EXPECT_EQ(rows[0].mode, "sweep");
  EXPECT_TRUE(h.results("CPU-other").empty());
  EXPECT_TRUE(h.results("", 1002).empty());  // --since after it

  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &s, nullptr);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "wal");
  sqlite3_finalize(s);
  sqlite3_close(raw);
}

TEST_F(OpsTest, OldSchemaIsMigratedAndNewerIsRefused) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, history_migrations()[0].c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(raw,
                   "PRAGMA user_version=1; INSERT INTO runs(mode, host, seed, level, version, started_at, status) "
                   "VALUES('sweep', 'old', 1, 'quick', '0.0.9', 5, 'complete')",
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(raw);
  {
    History h(db_);
    EXPECT_EQ(h.schema_version(), History::kSchemaVersion);
    ASSERT_EQ(h.runs().size(), 1u);
    EXPECT_EQ(h.runs()[0].host, "old");
    h.set_state("k", "v");  // a table version 2 added
    EXPECT_EQ(h.state("k"), "v");
  }
  ASSERT_EQ(sqlite3_open(db_.c_str(), &raw), SQLITE_OK);
  sqlite3_exec(raw, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  try {
    History h(db_);
    FAIL() << "a newer schema was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
}

TEST_F(OpsTest, SchemaTwoIsUpgradedInPlaceAndItsOldRowsHaveNoDigest) {
  // A database as schema 2 wrote it: its own migrations, and rows inserted by its own SQL.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &raw), SQLITE_OK);
  const std::string v2 = history_migrations()[0] + history_migrations()[1] +
                         "PRAGMA user_version=2;"
                         "INSERT INTO runs(mode, host, seed, level, version, started_at, status) "
                         "VALUES('sweep', 'old', 5, 'standard', '0.1.0', 100, 'complete');"
                         "INSERT INTO devices(uuid, backend, idx, name, pci_bus_id, first_seen, last_seen) "
                         "VALUES('CPU-00000000', 'cpu', 0, 'Test', 'cpu:0', 100, 100);"
                         "INSERT INTO results(run_id, recorded_at, device_uuid, probe, outcome, checked, mismatches, "
                         "syndrome, duration_s, seed, attempt, fault, reason) "
                         "VALUES(1, 101, 'CPU-00000000', 'alu.fma32', 'pass', 100, 0, '', 0.5, 5, 0, '', '');";
  ASSERT_EQ(sqlite3_exec(raw, v2.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  {  // Read as it is, without upgrading it: the old row has no class and no digest.
    const History old(db_, 1000, History::Access::kReadOnly);
    EXPECT_EQ(old.schema_version(), 2);
    const auto rows = old.results();
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_FALSE(rows[0].class_key);
    EXPECT_FALSE(rows[0].digest);
    EXPECT_FALSE(old.runs()[0].size_bytes);
  }

  DeviceIdentity d = device(0);
  d.runtime_version = "gcc 14";
  ProbeResult r = result(d, "alu.fma32", Outcome::kPass);
  r.seed = 6;
  r.params = {{"algorithm", "chain"}, {"n", 64}};
  r.digest = Digest128{0x1234, 0x5678};
  {
    History h(db_);  // upgraded in place
    EXPECT_EQ(h.schema_version(), 3);
    RunRecord run{0, "sweep", "old", 6, "standard", "0.1.0", 200, 0, "running"};
    run.size_bytes = 4096;
    const int64_t id = h.begin_run(run);
    h.record(id, {d}, {to_record(r, 0, "")}, 201);
    h.finish_run(id, "complete", 202);
    EXPECT_EQ(h.integrity_check(), "ok");
  }
  const History h(db_, 1000, History::Access::kReadOnly);
  const auto rows = h.results();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].probe, "alu.fma32");  // the old row, kept as it was
  EXPECT_FALSE(rows[0].class_key);
  EXPECT_FALSE(rows[0].digest);
  ASSERT_TRUE(rows[1].class_key);
  EXPECT_EQ(*rows[1].class_key, equivalence_class(d, r));
  EXPECT_NE(rows[1].class_key->find("chain"), std::string::npos);
  EXPECT_EQ(rows[1].digest, r.digest);
  EXPECT_FALSE(rows[1].golden_digest);
  EXPECT_EQ(nlohmann::json::parse(rows[1].params), r.params);
  const auto runs = h.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_FALSE(runs[0].size_bytes);
  EXPECT_EQ(runs[1].size_bytes, 4096u);
  EXPECT_FALSE(runs[1].iterations);
  EXPECT_EQ(h.devices()[0].runtime_version, "gcc 14");

  // A digest that is not one is refused, naming the database, the result and the field.
  sqlite3* edit = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &edit), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(edit, "UPDATE results SET digest = 'xyz' WHERE digest != ''", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(edit);
  try {
    h.results();
    FAIL() << "a bad digest was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(db_ + ": results: alu.fma32 on CPU-00000000: digest"), std::string::npos)
        << e.what();
  }
}

TEST_F(OpsTest, SecondWriterWaitsThenFailsCleanly) {
  History first(db_);
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);

  History impatient(db_, 100);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(impatient.set_state("k", "lost"), HistoryBusy);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(90));  // it waited first

  // A writer with a longer timeout waits for the lock to go and then succeeds.
  std::thread release([holder] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    sqlite3_exec(holder, "COMMIT", nullptr, nullptr, nullptr);
  });
  History patient(db_, 10000);
  patient.set_state("k", "kept");
  release.join();
  sqlite3_close(holder);
  EXPECT_EQ(first.state("k"), "kept");
  EXPECT_EQ(first.integrity_check(), "ok");
}

TEST_F(OpsTest, FaultsAreClassifiedByTheirReRun) {
  const DeviceIdentity d = device(0);
  const ProbeResult fail = result(d, "p", Outcome::kFail), pass = result(d, "p", Outcome::kPass);
  EXPECT_EQ(classify_fault(pass, nullptr), "");
  EXPECT_EQ(classify_fault(fail, &fail), "persistent");
  EXPECT_EQ(classify_fault(fail, &pass), "transient");
  EXPECT_EQ(classify_fault(fail, nullptr), "persistent");
  EXPECT_EQ(classify_fault(result(d, "p", Outcome::kDeviceError), nullptr), "device_error");
}

TEST_F(OpsTest, PersistentFaultQuarantinesOnlyThatDeviceUntilReleasedAfterCleanSweeps) {
  History h(db_);
  QuarantinePolicy policy;
  policy.clean_sweeps = 2;
  const DeviceIdentity good = device(0), bad = device(1);
  const int64_t run = h.begin_run({0, "sweep", "host", 1, "quick", "0.1.0", 100, 0, "running"});
  h.record(run, {good}, {to_record(result(good, "alu.fma32", Outcome::kPass), 0, "")}, 100);
  h.record(run, {bad},
           {to_record(result(bad, "alu.fma32", Outcome::kFail), 0, "persistent"),
            to_record(result(bad, "alu.fma32", Outcome::kFail), 1, "")},
           100);
  h.finish_run(run, "complete", 101);
  apply_quarantine_policy(h, policy, run, 102);

  auto statuses = device_statuses(h, policy, 103);
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].health, Health::kHealthy);
  EXPECT_EQ(statuses[1].health, Health::kQuarantined);
  EXPECT_NE(statuses[1].why.find("persistent fault: alu.fma32"), std::string::npos) << statuses[1].why;
  EXPECT_NE(statuses[1].why.find("0/2 clean sweeps"), std::string::npos) << statuses[1].why;

  EXPECT_THROW(release_device(h, policy, bad.uuid, false, "op", 104), InputError);
  EXPECT_THROW(release_device(h, policy, good.uuid, false, "op", 104), InputError);  // not quarantined
  EXPECT_THROW(release_device(h, policy, "CPU-unknown", true, "op", 104), InputError);
  // Clean sweeps alone never reinstate it: the operator does, once there are enough.
  for (double at : {200.0, 300.0}) pass(h, bad, {to_record(result(bad, "alu.fma32", Outcome::kPass), 0, "")}, at);
  EXPECT_EQ(device_statuses(h, policy, 400)[1].health, Health::kQuarantined);
  EXPECT_NE(device_statuses(h, policy, 400)[1].why.find("sdcprobe release " + bad.uuid), std::string::npos);
  release_device(h, policy, bad.uuid, false, "op", 400);
  EXPECT_EQ(device_statuses(h, policy, 401)[1].health, Health::kHealthy);
}

TEST_F(OpsTest, TransientFaultsMakeASuspectAndKWithinTheWindowQuarantine) {
  History h(db_);
  QuarantinePolicy policy;
  policy.transient_limit = 2;
  policy.window_s = 1000;
  const DeviceIdentity d = device(0);
  auto transient = [&](double at) {
    const int64_t run = pass(h, d,
                             {to_record(result(d, "mem.march_c", Outcome::kFail), 0, "transient"),
                              to_record(result(d, "mem.march_c", Outcome::kPass), 1, "")},
                             at);
    apply_quarantine_policy(h, policy, run, at + 1);
  };
  transient(100);
  auto st = device_statuses(h, policy, 200)[0];
  EXPECT_EQ(st.health, Health::kSuspect);
  EXPECT_NE(st.why.find("1 transient fault"), std::string::npos) << st.why;
  // Outside the window the first one no longer counts.
  transient(1500);
  EXPECT_EQ(device_statuses(h, policy, 1600)[0].health, Health::kSuspect);
  transient(1700);
  st = device_statuses(h, policy, 1800)[0];
  EXPECT_EQ(st.health, Health::kQuarantined);
  EXPECT_NE(st.why.find("2 transient faults within"), std::string::npos) << st.why;
  // A forced release starts a clean slate: old transients do not re-quarantine it at once.
  release_device(h, policy, d.uuid, true, "op", 1900);
  EXPECT_EQ(device_statuses(h, policy, 1901)[0].health, Health::kHealthy);
}

TEST(PassPlan, EveryProbeRunsWithinTheDocumentedNumberOfPasses) {
  const std::vector<double> estimates = {4, 1, 1, 9, 2, 2, 3, 0, 5};
  const double budget = 6;
  // Fits while the sum stays within the budget, always at least one (9 s alone exceeds it).
  EXPECT_EQ(plan_pass(estimates, 0, budget).probes, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(plan_pass(estimates, 3, budget).probes, (std::vector<size_t>{3}));
  EXPECT_EQ(plan_pass(estimates, 7, budget).probes, (std::vector<size_t>{7, 8}));
  std::set<size_t> seen;
  size_t cursor = 0, passes = 0;
  while (seen.size() < estimates.size()) {
    const auto plan = plan_pass(estimates, cursor, budget);
    ASSERT_FALSE(plan.probes.empty());
    seen.insert(plan.probes.begin(), plan.probes.end());
    cursor = (cursor + plan.probes.size()) % estimates.size();
    ++passes;
  }
  EXPECT_LE(passes, estimates.size());
}

TEST_F(OpsTest, MetricsUseDcgmLabelsAndExplicitZeros) {
  History h(db_);
  const DeviceIdentity good = device(0), bad = device(1);
  pass(h, bad, {to_record(result(bad, "alu.fma32", Outcome::kFail), 0, "persistent")}, 100);
  h.quarantine(bad.uuid, "test", 101);
  const std::string text = render_prometheus(h, {good, bad}, {"alu.fma32", "mem.march_c"}, "node\"7", {}, 200);
  const auto samples = test::parse_prometheus_text(text);
  const std::string l0 =
      "gpu=\"0\",UUID=\"CPU-00000000\",pci_bus_id=\"cpu:0\",Hostname=\"node\\\"7\","
      "modelName=\"Test \\\"CPU\\\"\"";
  const std::string l1 =
      "gpu=\"1\",UUID=\"CPU-00000001\",pci_bus_id=\"cpu:1\",Hostname=\"node\\\"7\","
      "modelName=\"Test \\\"CPU\\\"\"";
  EXPECT_EQ(samples.at("sdcprobe_probe_failures_total{" + l1 + ",probe=\"alu.fma32\"}"), 1);
  // Never-run probes and a never-tested device are explicit zeros.
  EXPECT_EQ(samples.at("sdcprobe_probe_failures_total{" + l1 + ",probe=\"mem.march_c\"}"), 0);
  EXPECT_EQ(samples.at("sdcprobe_probe_runs_total{" + l0 + ",probe=\"alu.fma32\"}"), 0);
  EXPECT_EQ(samples.at("sdcprobe_probe_duration_seconds{" + l0 + ",probe=\"mem.march_c\"}"), 0);
  EXPECT_EQ(samples.at("sdcprobe_last_run_timestamp_seconds{" + l0 + "}"), 0);
  EXPECT_EQ(samples.at("sdcprobe_device_healthy{" + l0 + "}"), 1);
  EXPECT_EQ(samples.at("sdcprobe_device_quarantined{" + l0 + "}"), 0);
  EXPECT_EQ(samples.at("sdcprobe_device_healthy{" + l1 + "}"), 0);
  EXPECT_EQ(samples.at("sdcprobe_device_quarantined{" + l1 + "}"), 1);
  EXPECT_EQ(samples.at("sdcprobe_last_run_timestamp_seconds{" + l1 + "}"), 100);
  EXPECT_EQ(samples.count(std::string("sdcprobe_build_info{version=\"") + kVersion + "\",Hostname=\"node\\\"7\"}"), 1u);

  write_prometheus(dir_.string(), text);
  std::ifstream in(dir_ / kPromFile);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), text);
  EXPECT_EQ(fs::status(dir_ / kPromFile).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
}

TEST_F(OpsTest, APassThatFailsPartWayIsMarkedFailedNotRunning) {
  // A full disk makes a pass throw after its run row exists; the worker factory stands in for it.
  SweepOptions options;
  options.once = true;
  options.state_dir = (dir_ / "state").string();
  const std::vector<DeviceIdentity> devices = {open_devices({"cpu", 1}).front()->identity()};
  const auto catalogue = builtin_registry().select({"alu.fma32"});
  const WorkerCommandFactory full_disk = [](const RunOptions&) -> WorkerCommand {
    throw std::runtime_error("write: No space left on device");
  };
  EXPECT_THROW(run_sweep(options, devices, catalogue, full_disk), std::runtime_error);
  History h((dir_ / "state" / kHistoryFile).string());
  const auto runs = h.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "failed");
  EXPECT_GT(runs[0].finished_at, 0);
}

// Each pass draws a new seed (and runs in a new worker process), so what a process keeps per
// configuration (the ALU goldens, the SFU reference) never holds a sweep to one input set.
TEST_F(OpsTest, EachPassDrawsANewSeed) {
  SweepOptions options;
  options.once = true;
  options.state_dir = (dir_ / "state").string();
  const std::vector<DeviceIdentity> devices = {open_devices({"cpu", 1}).front()->identity()};
  const auto catalogue = builtin_registry().select({"sfu.transcendental"});
  std::vector<uint64_t> seeds;
  const WorkerCommandFactory record = [&seeds](const RunOptions& run) -> WorkerCommand {
    seeds.push_back(run.seed);
    throw std::runtime_error("stop once the pass has its seed");
  };
  for (int pass = 0; pass < 3; ++pass) EXPECT_THROW(run_sweep(options, devices, catalogue, record), std::runtime_error);
  ASSERT_EQ(seeds.size(), 3u);
  EXPECT_EQ(std::set<uint64_t>(seeds.begin(), seeds.end()).size(), 3u);
}

TEST(PromCheck, RejectsWhatPrometheusWouldReject) {
  const char* bad[] = {
      "x 1\n",                                            // no TYPE
      "# TYPE x gauge\nx{a=\"1\"} one\n",                 // not a number
      "# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"1\"} 2\n",     // duplicate
      "# TYPE x gauge\nx{a=\"1} 1\n",                     // unterminated
      "# TYPE x gauge\n# TYPE y gauge\nx 1\ny 1\nx 2\n",  // not contiguous
      "# TYPE x gauge\nx 1",                              // truncated
  };
  for (const char* text : bad) EXPECT_THROW(test::parse_prometheus_text(text), std::runtime_error) << text;
}

TEST(WorkerProtocol, ResultsRoundTripThroughJson) {
  ProbeResult r;
  r.probe = "mem.march_c";
  r.device_index = 3;
  r.device_uuid = "GPU-1";
  r.outcome = Outcome::kFail;
  r.report.checked = 1u << 20;
  r.report.mismatches = 2;
  r.report.records.push_back({7, 1, 3, 32, 4, -1});
  r.duration_s = 1.25;
  r.bytes = 99;
  r.flops = 1e9;
  r.seed = ~0ULL;
  r.params = {{"words", 12}};
  r.reason = "why";
  const std::string line = worker_result_line(r, false);
  EXPECT_EQ(line.back(), '\n');
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(to_json(result_from_json(j["result"])), to_json(r));
}

TEST(NpdVerdict, IsOneShortLineNamingTheDeviceByUuid) {
  RunReport report;
  DeviceIdentity d;
  d.uuid = "GPU-01234567-89ab-cdef-0123-456789abcdef";
  report.devices = {d};
  ProbeResult ok;
  ok.probe = "gemm.exact.bf16";
  ok.device_uuid = d.uuid;
  report.results = {ok};
  EXPECT_EQ(npd_verdict(report).rfind("OK: ", 0), 0u);
  ProbeResult bad = ok;
  bad.outcome = Outcome::kFail;
  report.results.push_back(bad);
  EXPECT_EQ(npd_verdict(report), "SDC: GPU-01234567-89ab-cdef-0123-456789abcdef gemm.exact.bf16");
  bad.probe = "a.very.long.probe.identifier.that.would.not.fit.on.the.line";
  for (int i = 0; i < 3; ++i) report.results.push_back(bad);
  EXPECT_LE(npd_verdict(report).size(), kNpdVerdictMax);
  report.results = {};
  report.devices = {};
  EXPECT_EQ(npd_verdict(report).rfind("UNKNOWN: ", 0), 0u);
}

// Memory probes move bytes, compute probes do arithmetic: each row's rate is in its own unit.
TEST(ResultsTable, RateIsGBPerSecondForMemoryAndFlopsForCompute) {
  ProbeResult r;
  r.duration_s = 2;
  r.probe = "mem.march_c";
  r.bytes = 8'000'000'000;
  r.flops = 0;
  EXPECT_EQ(rate_text(r), "4.00 GB/s");
  r.probe = "alu.fma32";
  r.bytes = 0;
  r.flops = 3e9;
  EXPECT_EQ(rate_text(r), "1.50 GFLOP/s");
  r.probe = "gemm.dense.bf16";
  r.bytes = 1'000'000'000;
  r.flops = 5e12;
  EXPECT_EQ(rate_text(r), "2.50 TFLOP/s");
  r.flops = 0;
  EXPECT_EQ(rate_text(r), "-");
  r.duration_s = 0;
  r.flops = 1e9;
  EXPECT_EQ(rate_text(r), "-");

  RunReport report;
  DeviceIdentity d;
  report.devices = {d};
  r.duration_s = 1;
  r.probe = "alu.fma32";
  r.flops = 2e9;
  report.results = {r};
  const std::string table = results_table(report);
  EXPECT_NE(table.find("RATE"), std::string::npos) << table;
  EXPECT_NE(table.find("2.00 GFLOP/s"), std::string::npos) << table;
  EXPECT_EQ(table.find("GB/s"), std::string::npos) << table;
}

}  // namespace
}  // namespace sdc
