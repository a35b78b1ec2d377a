// The fleet store read by the engines (docs/fleet.md#reading-the-store): a generated fleet's reports
// and history, imported into a store, give the same `fleet sdc` JSON report from the files, from the
// store through embedded DuckDB, before and after compaction to Parquet and a second import, and
// from that store through Spark (local[2]) and --aggregates. Bad stores and aggregates are exit 2 naming the file.
// The engines come from the fleet_engines_venv fixture ($SDC_FLEET_ENGINES_PYTHON).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "scheduler/consensus/fleet_seed.hpp"
#include "scheduler/sweep/history.hpp"
#include "tests/cli/run_sdcprobe.hpp"
#include "tests/fleet/sim_fleet.hpp"

namespace sdc {
namespace {

namespace fs = std::filesystem;
using test::Outcome;
using test::run_command;
using test::sdcprobe;

constexpr int kHosts = 16, kGpus = 4, kPasses = 8;
// The seed nodes 12 and 14 are swept with in every pass (an operator's --seed): their votes span days.
constexpr uint64_t kPinnedSeed = 7;

std::string engines_python() {
  const char* python = std::getenv("SDC_FLEET_ENGINES_PYTHON");
  return python ? python : "";
}

// The engine, as `fleet sdc --store` runs it and as a user runs the Spark job.
std::string engine_env() {
  return "SDCPROBE_PYTHON=" + engines_python() + " PYTHONPATH=" + std::string(SDC_SOURCE_DIR) + "/python ";
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

nlohmann::json record(bool memory, uint64_t index, int bit, int unit) {
  nlohmann::json r = {
      {"index", index}, {"expected", uint64_t{0}}, {"observed", uint64_t{1} << bit}, {"syndrome", uint64_t{1} << bit},
      {"bits", {bit}},  {"width_bits", 64}};
  if (memory) {
    r["byte_offset"] = index * 8;
  } else {
    r["unit"] = unit;
    r["lane"] = bit % 32;
  }
  return r;
}

// A fleet of kHosts nodes of kGpus GPUs (H100 on even nodes, A100 with another driver on odd ones),
// swept every 6 hours for two days with the fleet seed. Planted: node3's GPU 2 fails the memory probe
// in one DRAM row every pass (a lemon device), node5's GPUs all fail it every other pass (a lemon
// node), node7's GPU 1 hands back a wrong GEMM digest and passes its own checks, node11's GPU 0 fails
// its burns from 80 C (a temperature-triggered device), nodes 13 and 15 split evenly on one probe (an
// inconclusive vote); nodes 12 and 14 are swept with one pinned seed, and node14's GPU 3 hands back wrong
// digests under it in every pass of both days (a minority digest of a vote that spans days); background failures
// elsewhere. One report ran with an injection, one result was skipped; the
// A100s' transcendental probe carries the host's golden digest. Also a history with a quarantine, a release and a
// failure after it. Returns the inputs for `fleet sdc`.
std::string generate_fleet(const fs::path& dir) {
  std::mt19937_64 rng(20261205);
  std::bernoulli_distribution background(0.01);
  for (int h = 0; h < kHosts; ++h) {
    const std::string host = "node" + std::to_string(h);
    const bool a100 = h % 2 == 1;
    std::vector<DeviceIdentity> devices;
    for (int g = 0; g < kGpus; ++g) {
      DeviceIdentity d = a100 ? gpu(host, g, "NVIDIA A100-SXM4-80GB") : gpu(host, g);
      if (a100) d.driver_version = "535.104";
      devices.push_back(d);
    }
    for (int p = 0; p < kPasses; ++p) {
      const int64_t at = kDay0 + 6 * 3600 * p + 60 * h;
      const bool pinned = h == 12 || h == 14;
      const uint64_t seed = pinned ? kPinnedSeed : fleet_seed("site-secret", SeedPeriod::kHour, at).seed;
      std::vector<std::vector<SimResult>> results(kGpus);
      for (int g = 0; g < kGpus; ++g) {
        results[g] = deterministic((h == 7 && g == 1) || (h == 14 && g == 3));
        SimResult mem{"mem.march_c", false, false, false, 600.0 + g};
        const bool lemon_device = h == 3 && g == 2, lemon_node = h == 5 && p % 2 == 0;
        if (lemon_device || lemon_node || background(rng)) {
          mem.failed = true;
          const uint64_t base = (uint64_t{5} << 18) + (lemon_device ? 0 : 4096 * p);
          mem.records = {record(true, base + p, p % 64, -1), record(true, base + 40 + p, 3, -1)};
        }
        results[g].push_back(mem);
        // Only nodes 13 and 15 run alu.fma32 in the first sweep, and disagree: an even split.
        if ((h == 13 || h == 15) && p == 0) results[g].push_back({"alu.fma32", false, h == 15});
        // Two burns, warmer each pass; node11's GPU 0 fails from 80 C (a temperature-triggered defect).
        for (int k = 0; k < 2; ++k) {
          const double celsius = 50.25 + 6 * p + 3 * k + g;
          SimResult burn{k ? "gemm.burn.fp16" : "gemm.burn.bf16", h == 11 && g == 0 && celsius >= 80, false, false,
                         10.0};
          burn.params = {{"samples",
                          {{{"temperature_c", celsius},
                            {"sm_clock_mhz", 1980.0},
                            {"power_w", 600.5 + 10 * g + 5 * p},
                            {"power_limit_w", 700.0},
                            {"under_load", true}}}}};
          results[g].push_back(burn);
        }
      }
      nlohmann::json report_json = nlohmann::json::parse(report(host, at, seed, devices, results));
      for (auto& r : report_json["results"]) {
        if (a100 && r["probe"] == "sfu.transcendental") r["golden_digest"] = digest_hex(right_digest(r["probe"], seed));
      }
      if (h == 9 && p == 0) report_json["injections"] = {"device=0,probe=alu.fma32,model=bitflip,bit=7"};
      if (h == 10 && p == 2) {
        auto& skipped = report_json["results"][1];
        skipped["outcome"] = "skipped";
        skipped.erase("digest");
      }
      write(dir / "reports" / (host + "-" + std::to_string(p) + ".json"), report_json.dump());
    }
  }
  const fs::path history_dir = dir / "hist";
  fs::create_directories(history_dir);
  {
    History h((history_dir / kHistoryFile).string());
    const DeviceIdentity d = gpu("hist", 0);
    auto result = [&](const std::string& outcome, double at, const char* probe = "mem.march_c") {
      ResultRecord r;
      r.recorded_at = at;
      r.device_uuid = d.uuid;
      r.probe = probe;
      r.outcome = outcome;
      r.duration_s = 600.123456789;
      return r;
    };
    const int64_t id = h.begin_run({0, "sweep", "hist", 1, "standard", "test", kDay0, 0, "running"});
    h.record(id, {d}, {result("fail", kDay0 + 10.0000004), result("pass", kDay0 + 20, "alu.fma32")}, kDay0 + 30);
    h.quarantine(d.uuid, "test", kDay0 + 40);
    h.release(d.uuid, "operator", kDay0 + 50.25);
    h.record(id, {d}, {result("fail", kDay0 + 60)}, kDay0 + 70);
    h.finish_run(id, "complete", kDay0 + 80);
  }
  std::string topology;
  for (int h = 0; h < kHosts; ++h) topology += "node" + std::to_string(h) + " rack=R" + std::to_string(h / 4) + "\n";
  write(dir / "topology.txt", topology);
  return (dir / "reports").string() + " " + (history_dir / kHistoryFile).string();
}

class StoreEngines : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(engines_python().empty()) << "SDC_FLEET_ENGINES_PYTHON is not set (the fleet_engines_venv fixture)";
    dir_ = fs::temp_directory_path() / ("store_engines_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string topology() const { return " --topology " + path("topology.txt"); }

  // `fleet sdc ARGS --json FILE`: its exit code, and the report.
  nlohmann::json fleet_sdc(const std::string& args, const std::string& env = "") {
    const std::string json = path("report-" + std::to_string(++reports_) + ".json");
    const Outcome o = run_command(env + SDC_BINARY_DIR "/cli/sdcprobe fleet sdc " + args + " --json " + json);
    EXPECT_EQ(o.code, 1) << args << "\n" << o.out;  // the planted faults
    std::ifstream in(json);
    EXPECT_TRUE(in.good()) << args << "\n" << o.out;
    return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
  }
  nlohmann::json through_duckdb(const std::string& args = "") {
    return fleet_sdc("--store " + path("store") + topology() + args, engine_env());
  }
  void import(const std::string& inputs) {
    const Outcome o = sdcprobe("fleet import " + inputs + " --store " + path("store"));
    ASSERT_EQ(o.code, 0) << o.out;
  }

  // The store's table files (not its partial aggregates) with this extension.
  std::vector<fs::path> table_files(const std::string& extension) const {
    std::vector<fs::path> found;
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "store")) {
      if (e.path().extension() == extension && e.path().string().find("/partials/") == std::string::npos)
        found.push_back(e.path());
    }
    return found;
  }
  void compact() {
    const Outcome o =
        run_command(engine_env() + engines_python() + " -m sdcprobe.fleet_engine compact --store " + path("store"));
    ASSERT_EQ(o.code, 0) << o.out;
  }

  fs::path dir_;
  int reports_ = 0;
};

// The planted faults, found: so that equal reports are not equal by being empty.
void expect_planted_found(const nlohmann::json& report) {
  bool wrong_digest = false, wrong_pinned = false;
  for (const auto& s : report["suspects"]) {
    wrong_digest = wrong_digest || s["uuid"] == "GPU-node7-1";
    wrong_pinned = wrong_pinned || s["uuid"] == "GPU-node14-3";
  }
  EXPECT_TRUE(wrong_digest) << report["suspects"].dump();
  EXPECT_TRUE(wrong_pinned) << report["suspects"].dump();
  bool lemon = false;
  for (const auto& l : report["lemons"]["devices"]) lemon = lemon || l["uuid"] == "GPU-node3-2";
  EXPECT_TRUE(lemon) << report["lemons"].dump();
  bool node = false;
  for (const auto& l : report["lemons"]["nodes"]) node = node || l["host"] == "node5";
  EXPECT_TRUE(node) << report["lemons"].dump();
  ASSERT_EQ(report["refailed_after_release"].size(), 1u);
  EXPECT_EQ(report["refailed_after_release"][0]["uuid"], "GPU-hist-0");
  EXPECT_EQ(report["locations"][0]["uuid"], "GPU-node3-2");
  EXPECT_EQ(report["locations"][0]["pattern"], "one_location");
  EXPECT_EQ(report["inputs"]["reports"], kHosts * kPasses);
  EXPECT_EQ(report["inputs"]["histories"], 1);
  EXPECT_EQ(report["inputs"]["reports_with_injections"], 1);
  EXPECT_EQ(report["inputs"]["skipped"], 1);
  EXPECT_GT(report["votes"]["golden"].get<int>() + report["votes"]["agreed"].get<int>(), 0);
  ASSERT_EQ(report["inconclusive"].size(), 1u) << report["inconclusive"].dump();
  EXPECT_EQ(report["inconclusive"][0]["probe"], "alu.fma32");
  for (const auto& d : report["inconclusive"][0]["digests"]) EXPECT_EQ(d["members"].size(), 4u) << d.dump();
  const nlohmann::json& conditions = report["burn_conditions"];
  ASSERT_EQ(conditions["temperature_triggered"].size(), 1u) << conditions.dump();
  EXPECT_EQ(conditions["temperature_triggered"][0]["uuid"], "GPU-node11-0");
  EXPECT_EQ(conditions["temperature_triggered"][0]["trigger_c"], 80);
  EXPECT_EQ(conditions["temperature_triggered"][0]["passes_below"], 10);
  EXPECT_FALSE(conditions["temperature_bands"].empty());
  EXPECT_FALSE(conditions["power_bands"].empty());
}

TEST_F(StoreEngines, FilesDuckDbAndSparkGiveTheSameReport) {
  const std::string inputs = generate_fleet(dir_);
  import(inputs);
  const nlohmann::json files = fleet_sdc(inputs + topology());
  expect_planted_found(files);

  EXPECT_EQ(through_duckdb(), files);

  // Compacted to Parquet with each day's partial aggregates, and a report imported again after that:
  // each row still counts once.
  compact();
  EXPECT_EQ(table_files(".ndjson").size(), 0u);
  const std::vector<fs::path> compacted = table_files(".parquet");
  EXPECT_GT(compacted.size(), 0u);
  // Beside each day's Parquet file, an older copy, as a compaction leaves the file it merged until its
  // own is published: neither engine counts it.
  for (const fs::path& p : compacted) {
    const fs::path older = p.parent_path() / "compacted-0-merged.parquet";
    fs::copy_file(p, older);
    fs::last_write_time(older, fs::last_write_time(p) - std::chrono::hours(1));
  }
  import((dir_ / "reports" / "node3-0.json").string() + " " + (dir_ / "hist" / kHistoryFile).string());
  EXPECT_EQ(through_duckdb(), files);

  // The Spark job as a user submits it (python runs it in local mode here) over the same store of
  // Parquet and landing files, then --aggregates.
  const Outcome spark =
      run_command("PYSPARK_PYTHON=" + engines_python() + " " + engines_python() + " " + SDC_SOURCE_DIR +
                  "/python/sdcprobe/fleet_engine.py aggregate --engine spark "
                  "--master local[2] --store " +
                  path("store") + " --out " + path("aggregates"));
  ASSERT_EQ(spark.code, 0) << spark.out;
  EXPECT_EQ(fleet_sdc("--aggregates " + path("aggregates") + topology()), files);
}

// The cluster's question from the store: each job's summary stored by `goodput --store` (as the
// Slurm epilog runs it) or `fleet import --summaries` gives the cluster ledger the summary files give,
// after compaction and a job stored twice too. Jobs and accounting: the real Slurm 24.11 recording.
TEST_F(StoreEngines, JobSummariesFromTheStoreGiveTheClusterLedgerOfTheFiles) {
  const std::string data = std::string(SDC_SOURCE_DIR) + "/tests/goodput/data/fleet_24.11";
  const std::string sdc = SDC_BINARY_DIR "/cli/sdcprobe ";
  fs::create_directories(path("summaries"));
  for (const char* job : {"1", "2", "4"}) {
    const Outcome o =
        run_command(engine_env() + sdc + "goodput '" + data + "/logs/" + job + "/*.jsonl' --json --job-id " + job +
                    " --store " + path("store") + " > " + path("summaries/") + job + ".json");
    ASSERT_EQ(o.code, 0) << o.out;
  }
  const std::string ledger = "fleet goodput --sacct " + data + "/sacct.json --json ";
  Outcome o = run_command(sdc + ledger + path("files.json") + " " + path("summaries"));
  ASSERT_EQ(o.code, 0) << o.out;
  std::ifstream files_in(path("files.json"));
  const nlohmann::json files = nlohmann::json::parse(files_in);
  ASSERT_EQ(files["jobs"]["from_summaries"], 3) << files.dump();
  auto through_store = [&] {
    const Outcome s = run_command(engine_env() + sdc + ledger + path("store.json") + " --store " + path("store"));
    EXPECT_EQ(s.code, 0) << s.out;
    std::ifstream in(path("store.json"));
    return nlohmann::json::parse(in);
  };
  EXPECT_EQ(through_store(), files);
  compact();
  o = sdcprobe("fleet import --summaries " + path("summaries/2.json") + " --store " + path("store"));
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("1 job summaries"), std::string::npos) << o.out;
  EXPECT_EQ(through_store(), files);
  // Not a summary: exit 2 naming the file, nothing stored.
  write(dir_ / "bad.json", "{\"job_id\": 7, \"wall_ns\": 10}");
  o = sdcprobe("fleet import --summaries " + path("bad.json") + " --store " + path("store"));
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find(path("bad.json")), std::string::npos) << o.out;
  EXPECT_EQ(through_store(), files);
}

TEST_F(StoreEngines, SinceAndUntilReadOnlyThoseDays) {
  generate_fleet(dir_);
  // The second day's reports alone, as files and as days of the store.
  std::string day2;
  for (int h = 0; h < kHosts; ++h) {
    for (int p = 4; p < kPasses; ++p)
      day2 += " " + path("reports/node" + std::to_string(h) + "-" + std::to_string(p) + ".json");
  }
  import(path("reports"));
  Outcome o =
      run_command(SDC_BINARY_DIR "/cli/sdcprobe fleet sdc" + day2 + topology() + " --json " + path("day2.json"));
  ASSERT_EQ(o.code, 1) << o.out;
  std::ifstream in(path("day2.json"));
  EXPECT_EQ(through_duckdb(" --since 2026-12-02 --until 2026-12-02"), nlohmann::json::parse(in));
  o = run_command(engine_env() + SDC_BINARY_DIR "/cli/sdcprobe fleet sdc --store " + path("store") +
                  " --since 2026-12-03");
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("could not test"), std::string::npos) << o.out;
}

// Nodes write while the fleet is analysed, and compaction publishes before it removes. An analysis
// reads the files listed when it starts: a file landing later counts in none of its aggregate tables
// (the next analysis counts it); of a day's Parquet files, the newest alone, so the older file a
// compaction merged and has not yet removed is never counted twice.
TEST_F(StoreEngines, AnAnalysisReadsTheStoreAsListedAtItsStart) {
  const std::string inputs = generate_fleet(dir_);
  import(inputs);
  const nlohmann::json files = fleet_sdc(inputs + topology());
  write(dir_ / "landing.py", R"(import glob, os, shutil, sys
from sdcprobe import fleet_engine as fe
store = sys.argv[1]
def count(engine):
    return engine.db.execute("SELECT count(*) FROM results").fetchone()[0]
def load(engine):
    engine.load("results", fe.store_files(fe.day_files(store, "results", None, None)))
engine = fe.DuckDBEngine()
load(engine)
listed = count(engine)
first = sorted(glob.glob(os.path.join(store, "results", "day=*", "*.ndjson")))[0]
shutil.copy(first, os.path.join(os.path.dirname(first), "late.ndjson"))
later = fe.DuckDBEngine()
load(later)
print(listed, count(engine), count(later))
)");
  Outcome o = run_command(engine_env() + engines_python() + " " + path("landing.py") + " " + path("store"));
  ASSERT_EQ(o.code, 0) << o.out;
  std::istringstream counts(o.out);
  uint64_t listed = 0, during = 0, next = 0;
  counts >> listed >> during >> next;
  EXPECT_GT(listed, 0u) << o.out;
  EXPECT_EQ(during, listed) << o.out;
  EXPECT_GT(next, listed) << o.out;
  std::vector<fs::path> late;
  for (const auto& e : fs::recursive_directory_iterator(path("store"))) {
    if (e.path().filename() == "late.ndjson") late.push_back(e.path());
  }
  ASSERT_EQ(late.size(), 1u);
  fs::remove(late[0]);
  EXPECT_EQ(through_duckdb(), files);

  // Compacted, then each day's Parquet file beside an older copy of itself, as a compaction leaves
  // the file it merged until its own is published.
  compact();
  int copies = 0;
  for (const fs::path& p : table_files(".parquet")) {
    const fs::path older = p.parent_path() / "compacted-0-merged.parquet";
    fs::copy_file(p, older);
    fs::last_write_time(older, fs::last_write_time(p) - std::chrono::hours(1));
    ++copies;
  }
  ASSERT_GT(copies, 0);
  EXPECT_EQ(through_duckdb(), files);
  // A compaction of a day removes the older file with the landing files it merged.
  import((dir_ / "reports" / "node3-0.json").string());
  compact();
  size_t kept_older = 0;
  for (const fs::path& p : table_files(".parquet")) kept_older += p.filename() == "compacted-0-merged.parquet";
  EXPECT_LT(kept_older, static_cast<size_t>(copies));
  EXPECT_EQ(through_duckdb(), files);
}

// A compaction stores each day's partial aggregates, and an analysis reads a day that did not change
// from them alone: with the day's results file replaced by garbage of the same name, the report is
// unchanged. The day's partial aggregates stand for it only while its files are the ones they were
// made from: once a file lands there, or they come from another engine version, the day's rows are
// read again (and the garbage is exit 2 naming the file).
TEST_F(StoreEngines, ADayThatDidNotChangeIsReadFromItsPartialAggregatesAlone) {
  const std::string inputs = generate_fleet(dir_);
  import(inputs);
  const nlohmann::json files = fleet_sdc(inputs + topology());
  compact();
  const fs::path day = dir_ / "store" / "results" / "day=2026-12-01";
  ASSERT_TRUE(fs::exists(day));
  std::vector<fs::path> partials;
  for (const auto& e : fs::directory_iterator(dir_ / "store" / "partials" / "day=2026-12-01"))
    partials.push_back(e.path());
  ASSERT_EQ(partials.size(), 1u);
  EXPECT_TRUE(fs::exists(partials[0] / "sources.json"));
  EXPECT_TRUE(fs::exists(partials[0] / "day_vote_devices.parquet"));
  fs::path results;
  for (const auto& e : fs::directory_iterator(day)) results = e.path();
  const auto mtime = fs::last_write_time(results);
  write(results, "PAR1 not Parquet");
  fs::last_write_time(results, mtime);
  EXPECT_EQ(through_duckdb(), files);

  // Made by another engine version: not used.
  const std::string sources = read(partials[0] / "sources.json");
  std::string other = sources;
  other.replace(other.find("duckdb "), 7, "duckdb 0.");
  write(partials[0] / "sources.json", other);
  auto refused = [&](const fs::path& naming) {
    const Outcome o = run_command(engine_env() + SDC_BINARY_DIR "/cli/sdcprobe fleet sdc --store " + path("store") +
                                  " --json " + path("bad.json"));
    EXPECT_EQ(o.code, 2) << o.out;
    EXPECT_NE(o.out.find(naming.string()), std::string::npos) << o.out;
    EXPECT_FALSE(fs::exists(path("bad.json")));
  };
  refused(results.filename());
  // Partial aggregates damaged: exit 2 naming the file.
  write(partials[0] / "sources.json", "{\"partials_version\": ");
  refused(partials[0] / "sources.json");
  write(partials[0] / "sources.json", sources);
  EXPECT_EQ(through_duckdb(), files);
  const fs::path families = partials[0] / "day_families.parquet";
  const std::string kept = read(families);
  write(families, kept.substr(0, kept.size() / 2));
  refused(families);
  write(families, kept);
  EXPECT_EQ(through_duckdb(), files);
  // A report of the day imported again lands a file there: the day is read from its rows.
  import((dir_ / "reports" / "node3-0.json").string());
  ASSERT_EQ(table_files(".ndjson").size(), 3u);  // its results, devices and sites
  EXPECT_EQ(table_files(".ndjson")[0].parent_path().filename(), "day=2026-12-01");
  refused(results.filename());
}

// The engines group each vote and digest by a 64-bit hash of them. Two that share one (here a hash
// that gives every vote the same value) stop the analysis rather than merge two votes.
TEST_F(StoreEngines, VotesThatShareAHashStopTheAnalysis) {
  import(generate_fleet(dir_));
  write(dir_ / "collide.py", R"(import sys
from sdcprobe import fleet_engine as fe
engine = fe.DuckDBEngine()
engine.db.execute("CREATE MACRO same_for_all(a, b, c, d, e, f, g) AS 7")
engine.hash64 = "same_for_all"
try:
    fe.aggregate(engine, sys.argv[1], sys.argv[2])
except fe.StoreError as e:
    print(e)
    sys.exit(2)
)");
  const Outcome o = run_command(engine_env() + engines_python() + " " + path("collide.py") + " " + path("store") + " " +
                                path("aggregates"));
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_NE(o.out.find("two votes share the hash 7"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(path("aggregates")));
}

// A store with a file of another schema version, a wrong type, a truncated Parquet file: exit 2
// naming the file, and no report. Hidden files (a writer's temporary) are never read.
TEST_F(StoreEngines, BadStoresAreExit2NamingTheFile) {
  generate_fleet(dir_);
  import(path("reports"));
  const fs::path day = dir_ / "store" / "results" / "day=2026-12-01";
  write(day / ".node9-partial.ndjson.tmp.abc", "{\"schema_version\": 1, \"run_key\": \"trunc");
  const nlohmann::json clean = through_duckdb();
  std::string first;
  for (const auto& e : fs::directory_iterator(day)) {
    if (e.path().filename().string()[0] != '.') first = e.path().string();
  }
  std::ifstream in(first);
  const std::string row = [&] {
    std::string line;
    std::getline(in, line);
    return line;
  }();
  auto refused = [&](const std::string& name, const std::string& text, const std::string& says) {
    write(day / name, text);
    const Outcome o = run_command(engine_env() + SDC_BINARY_DIR "/cli/sdcprobe fleet sdc --store " + path("store") +
                                  " --json " + path("bad.json"));
    EXPECT_EQ(o.code, 2) << name << "\n" << o.out;
    EXPECT_NE(o.out.find(name), std::string::npos) << o.out;
    EXPECT_NE(o.out.find(says), std::string::npos) << o.out;
    EXPECT_FALSE(fs::exists(path("bad.json")));
    fs::remove(day / name);
  };
  std::string v2 = row;
  v2.replace(v2.find("\"schema_version\":1"), 18, "\"schema_version\":2");
  refused("node9-v2.ndjson", v2 + "\n", "schema_version 2");
  std::string typed = row;
  const size_t duration = typed.find("\"duration_s\":");
  typed.replace(duration, typed.find(',', duration) - duration, "\"duration_s\":\"slow\"");
  refused("node9-typed.ndjson", typed + "\n", "line 1");
  refused("node9-cut.parquet", "PAR1\x15\x04", "node9-cut.parquet");
  EXPECT_EQ(through_duckdb(), clean);
}

TEST_F(StoreEngines, BadAggregatesAreExit2NamingTheFileAndLine) {
  generate_fleet(dir_);
  import(path("reports"));
  const Outcome made = run_command(engine_env() + engines_python() + " -m sdcprobe.fleet_engine aggregate --store " +
                                   path("store") + " --out " + path("agg"));
  ASSERT_EQ(made.code, 0) << made.out;
  auto refused = [&](const std::string& says) {
    const Outcome o = sdcprobe("fleet sdc --aggregates " + path("agg") + " --json " + path("bad.json"));
    EXPECT_EQ(o.code, 2) << o.out;
    EXPECT_NE(o.out.find(says), std::string::npos) << o.out;
    EXPECT_FALSE(fs::exists(path("bad.json")));
  };
  fs::rename(path("agg/members/_SUCCESS"), path("agg/members/_SUCCESS.kept"));
  refused("members: incomplete: no _SUCCESS");
  fs::rename(path("agg/members/_SUCCESS.kept"), path("agg/members/_SUCCESS"));
  std::ofstream(path("agg/families/part-0.json"), std::ios::app) << "{\"host\": \"node1\"}\n";
  refused("families/part-0.json:");
  std::ofstream(path("agg/version/part-0.json")) << "{\"aggregates_version\": 2, \"store_schema_version\": 1}\n";
  refused("aggregates_version: this sdcprobe reads version 1");
}

}  // namespace
}  // namespace sdc
