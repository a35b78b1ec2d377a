// The fleet store's writer and import: a run's rows as its report says, the same bytes from the run
// and from its JSON report, a history's rows and quarantine decisions, idempotent imports, whole
// files only, and a store that cannot be written refused naming it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fleet/store_import.hpp"
#include "fleet/store_writer.hpp"
#include "host/error.hpp"
#include "scheduler/consensus/consensus.hpp"

namespace sdc {
namespace {

namespace fs = std::filesystem;

constexpr double kDay0 = 1796083200;  // 2026-12-01T00:00:00Z

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

DeviceIdentity gpu(int index) {
  DeviceIdentity d;
  d.backend = "cuda";
  d.index = index;
  d.name = "NVIDIA H100 80GB HBM3";
  d.uuid = "GPU-node1-" + std::to_string(index);
  d.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  d.compute_units = 132;
  d.compute_capability = "9.0";
  d.memory_bytes = 80ull << 30;
  d.driver_version = "550.54";
  d.runtime_version = "12.4";
  return d;
}

nlohmann::json sample(double temperature, double power, bool under_load) {
  return {{"temperature_c", temperature}, {"sm_clock_mhz", 1980.0},   {"power_w", power},
          {"power_limit_w", 700.0},       {"under_load", under_load}, {"clock_event_reasons", nullptr}};
}

// A run of two GPUs: a passing chain probe with a digest, a burn that failed at 83 C, a memory probe
// with two mismatch records on GPU 1, and a skipped probe.
RunReport a_run() {
  RunReport r;
  r.mode = "qualify";
  r.host = "node1";
  r.seed = 0xfeedfacecafebeefull;
  r.level = Level::kStandard;
  r.size_bytes = 1 << 20;
  r.started_at = "2026-12-01T15:00:00Z";
  r.devices = {gpu(0), gpu(1)};
  for (int d = 0; d < 2; ++d) {
    ProbeResult chain;
    chain.probe = "alu.fma32";
    chain.device_index = d;
    chain.device_uuid = r.devices[d].uuid;
    chain.report.checked = 1000;
    chain.duration_s = 0.125 + d;
    chain.seed = 42;
    chain.digest = Digest128{1, 2};
    chain.golden_digest = Digest128{1, 2};
    r.results.push_back(chain);
  }
  ProbeResult burn;
  burn.probe = "gemm.burn.bf16";
  burn.device_uuid = r.devices[0].uuid;
  burn.outcome = Outcome::kFail;
  burn.report.checked = 5000;
  burn.report.mismatches = 1;
  burn.duration_s = 60;
  burn.params = {{"samples", {sample(60, 650, true), sample(85, 690, false)}},
                 {"wrong_results", {{{"gemm", 7}, {"conditions", sample(83, 680, true)}}}}};
  r.results.push_back(burn);
  ProbeResult mem;
  mem.probe = "mem.march_c";
  mem.device_index = 1;
  mem.device_uuid = r.devices[1].uuid;
  mem.outcome = Outcome::kFail;
  mem.report.checked = 1 << 17;
  mem.report.mismatches = 2;
  mem.report.records = {{10, 0, 8, 64, -1, -1, false}, {99, 0xff, 0xfe, 64, -1, -1, false}};
  mem.duration_s = 2.5;
  r.results.push_back(mem);
  ProbeResult skipped;
  skipped.probe = "sfu.transcendental";
  skipped.device_uuid = r.devices[1].uuid;
  skipped.outcome = Outcome::kSkipped;
  skipped.reason = "no library";
  r.results.push_back(skipped);
  return r;
}

std::vector<nlohmann::json> lines_of(const std::string& rows) {
  std::vector<nlohmann::json> out;
  std::istringstream in(rows);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

const StoreFile& table(const std::vector<StoreFile>& files, const std::string& name) {
  for (const auto& f : files) {
    if (f.table == name) return f;
  }
  throw std::runtime_error("no " + name + " file");
}

// Every file under `dir`, by path relative to it, with its bytes.
std::map<std::string, std::string> files_under(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    out[fs::relative(e.path(), dir).string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return out;
}

TEST(StoreWriter, ARunsRowsSayWhatItsResultsSay) {
  const RunReport run = a_run();
  const std::vector<StoreFile> files = store_files(run);
  ASSERT_EQ(files.size(), 3u);  // results, devices, sites
  for (const auto& f : files) {
    EXPECT_EQ(f.day, "2026-12-01");
    EXPECT_EQ(f.name.rfind("node1-20261201T150000Z-", 0), 0u) << f.name;
    EXPECT_EQ(f.name, files[0].name);
  }
  const auto rows = lines_of(table(files, "results").rows);
  ASSERT_EQ(rows.size(), run.results.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const ProbeResult& r = run.results[i];
    const nlohmann::json& row = rows[i];
    EXPECT_EQ(row["schema_version"], kStoreSchemaVersion);
    EXPECT_EQ(row["time"], "2026-12-01T15:00:00.000000Z");
    EXPECT_EQ(row["host"], "node1");
    EXPECT_EQ(row["device_uuid"], r.device_uuid);
    EXPECT_EQ(row["probe"], r.probe);
    EXPECT_EQ(row["family"], r.probe.substr(0, r.probe.find('.')));
    EXPECT_EQ(row["outcome"], outcome_name(r.outcome));
    EXPECT_EQ(row["checked"], r.report.checked);
    EXPECT_EQ(row["mismatches"], r.report.mismatches);
    EXPECT_EQ(row["duration_s"], r.duration_s);
    EXPECT_EQ(row["run_seed"], "0xfeedfacecafebeef");
    EXPECT_EQ(row["size_bytes"], 1 << 20);
    EXPECT_TRUE(row["iterations"].is_null());
    EXPECT_EQ(row["injected"], false);
    const DeviceIdentity& d = run.devices[r.device_uuid == run.devices[0].uuid ? 0 : 1];
    EXPECT_EQ(row["class_key"], equivalence_class(d, r));
    EXPECT_EQ(row["pci_bus_id"], d.pci_bus_id);
    EXPECT_EQ(row["model"], d.name);
    EXPECT_EQ(row["driver"], d.driver_version);
    if (r.digest) {
      EXPECT_EQ(row["digest"], digest_hex(*r.digest));
    } else {
      EXPECT_TRUE(row["digest"].is_null());
    }
  }
  // The burn's conditions at its first wrong result; none for the others.
  EXPECT_EQ(rows[2]["temperature_c"], 83.0);
  EXPECT_EQ(rows[2]["power_w"], 680.0);
  EXPECT_EQ(rows[2]["power_limit_w"], 700.0);
  EXPECT_TRUE(rows[0]["temperature_c"].is_null());

  const auto sites = lines_of(table(files, "sites").rows);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0]["device_uuid"], "GPU-node1-1");
  EXPECT_EQ(sites[0]["byte_offset"], 80);
  EXPECT_EQ(sites[0]["bits"], nlohmann::json::array({3}));
  EXPECT_EQ(sites[1]["byte_offset"], 99 * 8);
  EXPECT_EQ(sites[1]["observed"], "0x00000000000000fe");
  EXPECT_TRUE(sites[1]["unit"].is_null());

  const auto devices = lines_of(table(files, "devices").rows);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1]["uuid"], "GPU-node1-1");
  EXPECT_EQ(devices[1]["compute_units"], 132);
  EXPECT_EQ(devices[1]["memory_bytes"], 80ull << 30);
}

TEST(StoreWriter, EveryRowHasEveryColumnInOneOrder) {
  const auto rows = lines_of(table(store_files(a_run()), "results").rows);
  // docs/fleet.md's columns, in its order (nlohmann's objects list keys sorted: compared as sets here,
  // the order on the line below).
  std::vector<std::string> documented = {"schema_version", "run_key",       "time",         "host",    "mode",
                                         "device_uuid",    "pci_bus_id",    "model",        "driver",  "backend",
                                         "class_key",      "probe",         "family",       "level",   "size_bytes",
                                         "iterations",     "run_seed",      "seed",         "attempt", "outcome",
                                         "duration_s",     "checked",       "mismatches",   "digest",  "golden_digest",
                                         "injected",       "temperature_c", "sm_clock_mhz", "power_w", "power_limit_w"};
  const std::string line = table(store_files(a_run()), "results").rows.substr(0, 2000);
  size_t at = 0;
  for (const auto& column : documented) {
    const size_t found = line.find("\"" + column + "\":", at);
    ASSERT_NE(found, std::string::npos) << column << " missing or out of order";
    at = found;
  }
  std::sort(documented.begin(), documented.end());
  for (const auto& row : rows) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : row.items()) keys.push_back(key);
    EXPECT_EQ(keys, documented);
  }
}

TEST(StoreWriter, ABurnWithoutAWrongResultCarriesItsHottestSampleUnderLoad) {
  const nlohmann::json params = {{"samples",
                                  {sample(50, 300, false),
                                   sample(70, 690, true),
                                   sample(95, 100, false),
                                   sample(72, 650, true),
                                   {{"temperature_c", nullptr}, {"under_load", true}}}}};
  const BurnConditions c = result_conditions(params);
  EXPECT_EQ(c.temperature_c, 72);
  EXPECT_EQ(c.power_w, 650);
  // None under load: the hottest of all.
  EXPECT_EQ(result_conditions({{"samples", {sample(50, 300, false), sample(95, 100, false)}}}).temperature_c, 95);
  EXPECT_TRUE(std::isnan(result_conditions({{"conditions", "unavailable: cpu"}}).temperature_c));
  EXPECT_TRUE(std::isnan(result_conditions({{"samples", {1, "x"}}, {"wrong_results", 3}}).power_w));
}

TEST(StoreWriter, ItsJsonReportGivesTheSameFilesByteForByte) {
  RunReport run = a_run();
  run.results[2].params["samples"].push_back(sample(NAN, NAN, true));  // NaN is null in the report
  const std::vector<StoreFile> direct = store_files(run);
  const std::vector<StoreFile> imported = report_store_files("node1.json", report_json(run).dump(2));
  ASSERT_EQ(direct.size(), imported.size());
  for (size_t i = 0; i < direct.size(); ++i) {
    EXPECT_EQ(direct[i].table, imported[i].table);
    EXPECT_EQ(direct[i].day, imported[i].day);
    EXPECT_EQ(direct[i].name, imported[i].name);
    EXPECT_EQ(direct[i].rows, imported[i].rows);
  }
  // Another run (one result's duration differs) gets another name.
  run.results[0].duration_s += 1e-9;
  EXPECT_NE(store_files(run)[0].name, direct[0].name);
}

TEST(StoreWriter, ABadReportIsRefusedNamingTheFileAndField) {
  nlohmann::json j = report_json(a_run());
  j["results"][1]["outcome"] = "maybe";
  try {
    report_store_files("node1.json", j.dump());
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("node1.json: results[1].outcome", 0), 0u) << e.what();
  }
  j = report_json(a_run());
  j["level"] = "extreme";  // what the fleet reader leaves unchecked
  EXPECT_THROW(report_store_files("node1.json", j.dump()), InputError);
}

TEST(StoreWriter, PublishedFilesAreWholeAndAReimportChangesNothing) {
  TempDir dir("store_publish");
  const fs::path report = dir.path() / "node1.json";
  std::ofstream(report) << report_json(a_run()).dump(2);
  const std::string store = (dir.path() / "store").string();
  StoreImport first = import_into_store({report.string()}, store);
  EXPECT_EQ(first.reports, 1u);
  EXPECT_EQ(first.results, 5u);
  EXPECT_EQ(first.files, 3u);
  const auto before = files_under(store);
  ASSERT_EQ(before.size(), 3u);
  for (const auto& [path, bytes] : before) {
    EXPECT_EQ(fs::path(path).filename().string().front(), 'n') << path;  // no temporary name left
    EXPECT_EQ(path.find("/day=2026-12-01/"), path.find('/')) << path;
    EXPECT_EQ(bytes.back(), '\n');
  }
  import_into_store({report.string(), dir.path().string()}, store);  // the same report twice more
  EXPECT_EQ(files_under(store), before);
}

TEST(StoreWriter, AStoreThatCannotBeWrittenIsRefusedNamingIt) {
  TempDir dir("store_bad");
  const fs::path file = dir.path() / "a-file";
  std::ofstream(file) << "x";
  const std::string store = (file / "store").string();
  try {
    prepare_store(store);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(store), std::string::npos) << e.what();
  }
  EXPECT_THROW(prepare_store(""), InputError);
}

TEST(StoreWriter, AReaderNeverSeesHalfAFileEvenWhenTheWriterIsKilled) {
  TempDir dir("store_kill");
  const std::string store = (dir.path() / "store").string();
  prepare_store(store);
  // A big run (a few MB of rows) published again and again over itself, until killed.
  RunReport big = a_run();
  for (int i = 0; i < 2000; ++i) big.results.push_back(big.results[i % 4]);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) publish_store_files(store, store_files(big));
  }
  size_t seen = 0;
  for (int look = 0; look < 100; ++look) {
    for (const auto& e : fs::recursive_directory_iterator(store)) {
      const std::string name = e.path().filename().string();
      if (!e.is_regular_file() || name.front() == '.' || name.front() == '_') continue;
      std::ifstream in(e.path());
      const std::string bytes(std::istreambuf_iterator<char>(in), {});
      ASSERT_FALSE(bytes.empty()) << name;
      ASSERT_EQ(bytes.back(), '\n') << name;
      if (e.path().parent_path().parent_path().filename() == "results") {
        ASSERT_EQ(static_cast<size_t>(std::count(bytes.begin(), bytes.end(), '\n')), big.results.size()) << name;
      }
      ++seen;
    }
    ::usleep(5000);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_GT(seen, 0u);
  // What the killed writer left is hidden: every visible file is whole.
  for (const auto& e : fs::recursive_directory_iterator(store)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.front() == '.') continue;
    std::ifstream in(e.path());
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    for (const auto& row : lines_of(bytes)) EXPECT_EQ(row["schema_version"], kStoreSchemaVersion);
  }
}

// A history: one sweep pass on two days, a quarantine and its release.
void record_history(const std::string& path, int passes) {
  History h(path);
  const DeviceIdentity d = gpu(0);
  for (int p = 0; p < passes; ++p) {
    const double at = kDay0 + 86400 * p + 3600;
    RunRecord run{0, "sweep", "node1", 7, "standard", "test", at, 0, "running"};
    const int64_t id = h.begin_run(run);
    ProbeResult r;
    r.probe = "gemm.burn.bf16";
    r.device_uuid = d.uuid;
    r.outcome = p == 0 ? Outcome::kFail : Outcome::kPass;
    r.report.checked = 10;
    r.report.mismatches = p == 0 ? 1 : 0;
    r.duration_s = 60;
    r.seed = 9;
    r.digest = Digest128{3, 4};
    r.params = {{"samples", {sample(77, 600, true)}}};
    ResultRecord rec = to_record(r, 0, p == 0 ? "persistent" : "");
    h.record(id, {d}, {rec}, at + 60);
    h.finish_run(id, "complete", at + 70);
    if (p == 0) {
      h.quarantine(d.uuid, "persistent fault", at + 80);
      h.release(d.uuid, "operator", at + 86400 - 3600);
    }
  }
}

TEST(StoreWriter, AHistorysRowsAndDecisionsByDayAndAGrownHistoryRewritesItsFiles) {
  TempDir dir("store_history");
  const std::string path = (dir.path() / kHistoryFile).string();
  record_history(path, 1);
  const std::string store = (dir.path() / "store").string();
  EXPECT_EQ(import_into_store({path}, store).histories, 1u);
  auto files = files_under(store);
  std::string results_path, quarantine_path;
  for (const auto& [p, bytes] : files) {
    if (p.rfind("results/", 0) == 0) results_path = p;
  }
  ASSERT_FALSE(results_path.empty());
  EXPECT_NE(results_path.find("/node1-history-"), std::string::npos) << results_path;
  const auto rows = lines_of(files[results_path]);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["time"], "2026-12-01T01:01:00.000000Z");  // recorded at the end of the device's probes
  EXPECT_EQ(rows[0]["mode"], "sweep");
  EXPECT_EQ(rows[0]["outcome"], "fail");
  EXPECT_EQ(rows[0]["digest"], digest_hex(Digest128{3, 4}));
  EXPECT_EQ(rows[0]["temperature_c"], 77.0);
  EXPECT_TRUE(rows[0]["injected"].is_null());  // a history does not say
  ASSERT_FALSE(rows[0]["class_key"].is_null());
  EXPECT_EQ(rows[0]["class_key"].get<std::string>().find("cuda|NVIDIA H100"), 0u);
  // Quarantined on the first day, released on the second.
  size_t events = 0;
  for (const auto& [p, bytes] : files) {
    if (p.rfind("quarantine/", 0) != 0) continue;
    for (const auto& e : lines_of(bytes)) {
      ++events;
      EXPECT_EQ(e["event"], p.find("day=2026-12-01") != std::string::npos ? "quarantined" : "released") << p;
    }
  }
  EXPECT_EQ(events, 2u);

  // Imported again unchanged: the same files; after two more passes: the same names, more rows.
  import_into_store({path}, store);
  EXPECT_EQ(files_under(store), files);
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
  record_history(path, 3);  // the same first pass, and two more days
  import_into_store({path}, store);
  const auto grown = files_under(store);
  for (const auto& [p, bytes] : files) EXPECT_TRUE(grown.count(p)) << p;
  size_t results = 0;
  for (const auto& [p, bytes] : grown) {
    if (p.rfind("results/", 0) == 0) results += lines_of(bytes).size();
  }
  EXPECT_EQ(results, 3u);
}

}  // namespace
}  // namespace sdc
