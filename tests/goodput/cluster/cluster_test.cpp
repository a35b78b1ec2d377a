// The cluster ledger: the worked example of docs/goodput.md ("Cluster") by hand, the accounting's
// exact window cuts, the sum over simulated clusters for every window and grouping, a job's logs and
// its summary giving the same labels, and bad input naming its file and record.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "goodput/cluster/cluster_report.hpp"
#include "goodput/commands.hpp"
#include "goodput/merge.hpp"
#include "goodput/report.hpp"
#include "goodput/simulator.hpp"
#include "host/error.hpp"
#include "tests/fuzz/mutate.hpp"

namespace sdc::goodput::cluster {
namespace {

namespace fs = std::filesystem;
using goodput::Category;
constexpr int64_t kT0 = 1'798'761'600;  // 2027-01-01T00:00:00Z
constexpr int64_t kH = 3600;
constexpr GpuNs kGpuHour = static_cast<GpuNs>(kH) * 1'000'000'000;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("sdc-fleet-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// One sacct record, as Slurm 23 writes it ({"set", "number"} times; 0: unset).
nlohmann::json record(int64_t id, const std::string& user, const std::string& partition, int64_t gpus,
                      const std::string& state, int64_t eligible, int64_t start, int64_t end) {
  auto t = [](int64_t s) { return nlohmann::json{{"set", s != 0}, {"infinite", false}, {"number", s}}; };
  nlohmann::json tres = nlohmann::json::array({{{"type", "cpu"}, {"name", ""}, {"count", 4}}});
  if (gpus > 0) tres.push_back({{"type", "gres"}, {"name", "gpu"}, {"count", gpus}});
  return {{"job_id", id},
          {"user", user},
          {"account", user + "-lab"},
          {"partition", partition},
          {"state", {{"current", {state}}}},
          {"time", {{"eligible", t(eligible)}, {"start", t(start)}, {"end", t(end)}}},
          {"tres", {{"allocated", start != 0 ? tres : nlohmann::json::array()}, {"requested", tres}}}};
}

std::string sacct(const std::vector<nlohmann::json>& records) { return nlohmann::json{{"jobs", records}}.dump(); }

// The five jobs of docs/goodput.md, "Cluster" (hours after 2027-01-01T00:00Z; the window is that day).
struct Example {
  TempDir dir;
  ClusterInputs inputs;
  Example() {
    auto h = [](double hours) { return kT0 + static_cast<int64_t>(hours * kH); };
    inputs.sacct_path = dir.file("sacct.json", sacct({
                                                   record(101, "alice", "train", 8, "COMPLETED", h(1), h(2), h(11)),
                                                   record(102, "bob", "train", 4, "NODE_FAIL", h(0), h(3), h(5)),
                                                   record(102, "bob", "train", 4, "COMPLETED", h(0), h(6), h(10)),
                                                   record(103, "bob", "debug", 2, "RUNNING", h(20), h(22), 0),
                                                   record(104, "carol", "train", 16, "TIMEOUT", h(-2), h(-1), h(3)),
                                                   record(105, "carol", "debug", 1, "FAILED", h(12), h(12), h(13)),
                                                   record(106, "dave", "cpu", 0, "COMPLETED", h(1), h(1), h(2)),
                                               }));
    const int64_t ns = 1'000'000'000LL * kH;
    nlohmann::json s = {{"wall_ns", 10 * ns},
                        {"productive_ns", 8 * ns},
                        {"ettr", 0.8},
                        {"sdc_lost_ns", ns},
                        {"categories",
                         {{"queue", {{"ns", ns}, {"sdc_ns", 0}}},
                          {"detection_teardown", {{"ns", 0}, {"sdc_ns", 0}}},
                          {"restart_warmup", {{"ns", ns / 2}, {"sdc_ns", 0}}},
                          {"rework", {{"ns", ns / 2}, {"sdc_ns", ns / 2}}},
                          {"blocking_overhead", {{"ns", 0}, {"sdc_ns", 0}}}}},
                        {"job_id", 101},
                        {"measured",
                         {{"saves", {{"count", 12}, {"ns", 600'000'000'000}}},
                          {"data_waits", {{"count", 4}, {"ns", 0}}},
                          {"evals", {{"count", 0}, {"ns", 0}}},
                          {"probes", {{"count", 0}, {"ns", 0}}},
                          {"save_interval_ns", 3'000'000'000'000},
                          {"incidents", 1}}}};
    inputs.summaries = {dir.file("spool/101.json", s.dump())};
    inputs.since_s = kT0;
    inputs.until_s = kT0 + 24 * kH;
  }
};

TEST(ClusterLedger, WorkedExampleOfTheDocs) {
  Example e;
  const Cluster c = compute_cluster(e.inputs);
  const ClusterBreakdown& t = c.total;
  EXPECT_EQ(t.wall, 177 * kGpuHour);
  EXPECT_EQ(t.productive, 64 * kGpuHour);
  EXPECT_EQ(t[Category::kQueue], (8 + 16 + 4) * kGpuHour);
  EXPECT_EQ(t[Category::kRestartWarmup], 4 * kGpuHour);
  EXPECT_EQ(t[Category::kRework], 4 * kGpuHour);
  EXPECT_EQ(t.sdc_ns[static_cast<size_t>(Category::kRework)], 4 * kGpuHour);
  EXPECT_EQ(t[Unlabelled::kFailedRun], (8 + 48 + 1) * kGpuHour);
  EXPECT_EQ(t[Unlabelled::kOtherRun], (16 + 4) * kGpuHour);
  EXPECT_EQ(t.instrumented_wall, 80 * kGpuHour);
  EXPECT_TRUE(t.balanced());
  EXPECT_NEAR(t.ettr(), 64.0 / 177.0, 1e-12);
  EXPECT_EQ(c.jobs_without_gpus, 1);
  EXPECT_EQ(c.results.size(), 5u);
  // One incident in (80 - 8) / 24 = 3 instrumented GPU-days of run time.
  EXPECT_EQ(c.incidents.count, 1);
  EXPECT_NEAR(c.incidents.per_gpu_day, 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(c.incidents.low * 3.0, 0.0253, 1e-3);  // Garwood's 95% interval of one count
  EXPECT_NEAR(c.incidents.high * 3.0, 5.572, 1e-3);

  const std::vector<WorkItem> work = work_list(c, GroupBy::kJob, 5);
  ASSERT_GE(work.size(), 4u);
  EXPECT_EQ(work[0].key, "uninstrumented_failed_run");
  EXPECT_EQ(work[0].top[0].name, "104");
  EXPECT_EQ(work[1].key, "queue");
  EXPECT_EQ(work[1].top[0].name, "102");
  EXPECT_EQ(work[2].key, "uninstrumented_other_run");
  const auto rework = std::find_if(work.begin(), work.end(), [](const WorkItem& w) { return w.key == "rework"; });
  ASSERT_NE(rework, work.end());
  ASSERT_TRUE(rework->top[0].advice && rework->top[0].advice->available);
  const Advice& a = *rework->top[0].advice;
  // λ = 8 GPUs x 1/3 per GPU-day = 1/10800 s; T* = sqrt(2 x 50 s / λ) = 1800 s; from 3000 s: rework
  // 4 GPU-h x 1800/3000, and saves (600 s x 8 GPUs = 4/3 GPU-h) x 3050/1850.
  EXPECT_NEAR(a.save_s, 50.0, 1e-9);
  EXPECT_NEAR(a.interval_s, 1800.0, 1e-6);
  EXPECT_NEAR(a.saved_gpu_hours, 4 + 4.0 / 3 - (4 * 0.6 + 4.0 / 3 * 3050.0 / 1850.0), 1e-9);
  EXPECT_LT(a.interval_low_s, a.interval_s);
  EXPECT_GT(a.interval_high_s, a.interval_s);

  // Grouped by user, the groups of every item sum to the item.
  for (GroupBy by : {GroupBy::kUser, GroupBy::kAccount, GroupBy::kPartition, GroupBy::kJob}) {
    for (const WorkItem& w : work_list(c, by, 1000)) {
      GpuNs sum = 0;
      for (const GroupItem& g : w.top) sum += g.gpu_ns;
      EXPECT_EQ(sum, w.gpu_ns) << w.key << " by " << group_by_name(by);
    }
  }
}

TEST(ClusterLedger, ReportsCarryTheSums) {
  Example e;
  const Cluster c = compute_cluster(e.inputs);
  const std::vector<WorkItem> work = work_list(c, GroupBy::kUser, 5);
  const nlohmann::json j = nlohmann::json::parse(json_report(c, work, GroupBy::kUser));
  EXPECT_EQ(j["gpu_ns"]["wall"], to_string(177 * kGpuHour));
  EXPECT_EQ(j["gpu_ns"]["uninstrumented_failed_run"]["gpu_ns"], to_string(57 * kGpuHour));
  EXPECT_EQ(j["days"].size(), 1u);
  EXPECT_EQ(j["days"][0]["wall"], to_string(177 * kGpuHour));
  const std::string prom = prometheus_report(c);
  EXPECT_NE(prom.find("sdcprobe_cluster_ettr 0.361581920903954"), std::string::npos) << prom;
  EXPECT_NE(prom.find("sdcprobe_partition_ettr{partition=\"train\"}"), std::string::npos);
  EXPECT_NE(prom.find("sdcprobe_cluster_gpu_seconds{partition=\"debug\",category=\"queue\"} 14400"), std::string::npos)
      << prom;
  const std::string svg = svg_report(c, work);
  EXPECT_NE(svg.find("ETTR 36.2%"), std::string::npos);
  EXPECT_NE(svg.find("uninstrumented run, ended in failure: 57.0 GPU-h"), std::string::npos);
}

// Cutting a window in two gives the same accounting as the whole, to the GPU-nanosecond.
TEST(ClusterLedger, WindowCutsAreExact) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    ClusterJob job;
    job.job_id = trial;
    int64_t t = kT0 + static_cast<int64_t>(rng() % 1000);
    const int records = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < records; ++k) {
      ClusterRecord r;
      r.eligible_s = kT0;
      r.start_s = t + static_cast<int64_t>(rng() % 5000);
      r.end_s = (k + 1 == records && rng() % 3 == 0) ? 0 : r.start_s + 1 + static_cast<int64_t>(rng() % 90000);
      r.gpus = 1 + static_cast<int64_t>(rng() % 64);
      r.state = k + 1 < records ? "REQUEUED" : (rng() % 2 ? "COMPLETED" : "NODE_FAIL");
      t = r.end_s;
      job.records.push_back(r);
      if (r.end_s == 0) break;
    }
    const Window whole{kT0 - 100, kT0 + 4 * 86400};
    const int64_t cut =
        whole.since_s + static_cast<int64_t>(rng() % static_cast<uint64_t>(whole.until_s - whole.since_s));
    std::map<int64_t, ClusterBreakdown> days;
    const ClusterBreakdown all = sacct_breakdown(job, whole, &days);
    ClusterBreakdown parts = sacct_breakdown(job, {whole.since_s, cut});
    parts.add(sacct_breakdown(job, {cut, whole.until_s}));
    EXPECT_TRUE(all.balanced());
    EXPECT_EQ(all.wall, parts.wall);
    EXPECT_EQ(all.ns, parts.ns);
    EXPECT_EQ(all.unlabelled, parts.unlabelled);
    ClusterBreakdown by_day;
    for (const auto& [day, b] : days) by_day.add(b);
    EXPECT_EQ(by_day.wall, all.wall);
    EXPECT_EQ(by_day.ns, all.ns);
  }
}

TEST(ClusterLedger, JobCrossingTheWindowCountsOnlyItsTimeInside) {
  Example e;
  e.inputs.since_s = kT0 + 2 * kH;  // job 104 ran from -1 h to 3 h: 1 h inside, on 16 GPUs
  e.inputs.until_s = kT0 + 3 * kH;
  const Cluster c = compute_cluster(e.inputs);
  // Inside [2 h, 3 h): job 101 runs (its ledger crosses the edge, so its accounting counts: 1 h x 8),
  // job 102 queues (1 h x 4), job 104 runs (1 h x 16).
  EXPECT_EQ(c.total.wall, (8 + 4 + 16) * kGpuHour);
  EXPECT_EQ(c.total[Unlabelled::kFailedRun], 16 * kGpuHour);
  EXPECT_EQ(c.total[Unlabelled::kOtherRun], 8 * kGpuHour);
  EXPECT_EQ(c.total[Category::kQueue], 4 * kGpuHour);
  EXPECT_EQ(c.total.instrumented_wall, 0);
}

// Simulated clusters: jobs with summaries (the simulator's ground truth) and jobs with accounting only;
// for random windows, the cluster is the sum of its jobs, balanced, and every grouping sums to it.
TEST(ClusterLedger, SimulatedClustersSumForEveryWindowAndGrouping) {
  std::mt19937_64 rng(11);
  for (int cluster = 0; cluster < 4; ++cluster) {
    TempDir dir;
    std::vector<nlohmann::json> records;
    std::vector<std::string> summaries;
    const char* users[] = {"ann", "ben", "cy"};
    const char* parts[] = {"a", "b"};
    for (int job = 0; job < 40; ++job) {
      goodput::SimParams p;
      p.seed = rng();
      p.duration_ns = static_cast<int64_t>(1 + rng() % 36) * kH * goodput::kNsPerSecond;
      p.faults_per_day = static_cast<double>(rng() % 20);
      const goodput::SimResult sim = goodput::simulate(p, nullptr);
      const int64_t gpus = 1 << (rng() % 8);
      const int64_t eligible = kT0 + static_cast<int64_t>(rng() % (3 * 86400));
      const int64_t start = eligible + static_cast<int64_t>(rng() % 7200);
      const int64_t end = start + sim.truth.wall_ns / goodput::kNsPerSecond;
      const std::string user = users[rng() % 3];
      records.push_back(record(1000 + job, user, parts[rng() % 2], gpus, rng() % 4 ? "COMPLETED" : "FAILED", eligible,
                               start, rng() % 8 ? end : 0));
      if (rng() % 2) {
        nlohmann::json s = nlohmann::json::parse(goodput::json_breakdown(sim.truth));
        s["job_id"] = 1000 + job;
        summaries.push_back(dir.file("s/" + std::to_string(job) + ".json", s.dump()));
      }
    }
    ClusterInputs in;
    in.sacct_path = dir.file("sacct.json", sacct(records));
    in.summaries = {dir.path("s")};
    for (int w = 0; w < 6; ++w) {
      const int64_t a = kT0 + static_cast<int64_t>(rng() % (4 * 86400));
      const int64_t b = a + 1 + static_cast<int64_t>(rng() % (3 * 86400));
      in.since_s = a;
      in.until_s = b;
      const Cluster c = compute_cluster(in);
      EXPECT_TRUE(c.total.balanced());
      ClusterBreakdown sum, days;
      for (const JobResult& r : c.results) {
        EXPECT_TRUE(r.gpu.balanced());
        sum.add(r.gpu);
      }
      for (const auto& [day, d] : c.days) days.add(d);
      EXPECT_EQ(sum.wall, c.total.wall);
      EXPECT_EQ(days.wall, c.total.wall);
      EXPECT_EQ(days.productive, c.total.productive);
      for (GroupBy by : {GroupBy::kUser, GroupBy::kAccount, GroupBy::kPartition, GroupBy::kJob}) {
        GpuNs gap = 0;
        for (const WorkItem& item : work_list(c, by, 100000)) {
          GpuNs groups = 0;
          for (const GroupItem& g : item.top) groups += g.gpu_ns;
          EXPECT_EQ(groups, item.gpu_ns);
          gap += item.gpu_ns;
        }
        EXPECT_EQ(gap, c.total.gap());
      }
    }
  }
}

// The same job from its logs and from its summary (sdcprobe goodput --json --job-id) gives the same
// labels, weighted by its GPUs.
TEST(ClusterLedger, LogsAndSummaryAgree) {
  TempDir dir;
  goodput::SimParams p;
  p.seed = 5;
  p.duration_ns = 6 * kH * goodput::kNsPerSecond;
  p.faults_per_day = 12;
  p.requeue_prob = 0;
  std::string log;
  int64_t first = -1, last = 0;
  goodput::simulate(p, [&](std::string_view line) {
    log.append(line);
    log += '\n';
    const int64_t t = nlohmann::json::parse(line)["t"].get<int64_t>();
    if (first < 0) first = t;
    last = t;
  });
  const std::string events = dir.file("logs/77/events.rank0.jsonl", log);
  const int64_t start = first / goodput::kNsPerSecond, end = last / goodput::kNsPerSecond + 1;
  const std::string sacct_path =
      dir.file("sacct.json", sacct({record(77, "ann", "a", 8, "COMPLETED", start, start, end)}));
  ClusterInputs in;
  in.sacct_path = sacct_path;
  in.logs_template = dir.path("logs/{job_id}/events.rank*.jsonl");
  const Cluster from_logs = compute_cluster(in);
  ASSERT_EQ(from_logs.results.size(), 1u);
  EXPECT_EQ(from_logs.results[0].source, JobSource::kLogs);

  goodput::GoodputOptions o;
  o.events_paths = {events};
  o.sacct_path = dir.file("job77.sacct.json", sacct({record(77, "ann", "a", 8, "COMPLETED", start, start, end)}));
  o.json = true;
  o.job_id = 77;
  std::ostringstream summary;
  goodput::goodput_command(o, summary);
  in.logs_template.clear();
  in.summaries = {dir.file("77.json", summary.str())};
  const Cluster from_summary = compute_cluster(in);
  ASSERT_EQ(from_summary.results.size(), 1u);
  EXPECT_EQ(from_summary.results[0].source, JobSource::kSummary);
  EXPECT_EQ(from_logs.total.wall, from_summary.total.wall);
  EXPECT_EQ(from_logs.total.ns, from_summary.total.ns);
  EXPECT_EQ(from_logs.total.sdc_ns, from_summary.total.sdc_ns);
  EXPECT_EQ(from_logs.total.productive, from_summary.total.productive);
  ASSERT_TRUE(from_logs.results[0].tally && from_summary.results[0].tally);
  EXPECT_EQ(from_logs.results[0].tally->saves, from_summary.results[0].tally->saves);
  EXPECT_EQ(from_logs.results[0].tally->incidents, from_summary.results[0].tally->incidents);
  EXPECT_GT(from_logs.results[0].tally->incidents, 0);
  EXPECT_EQ(from_logs.total.wall % 8, 0);
}

// What the logs measured: saves and data waits by their pairs (a save cut by a fault is none), the
// spacing of saves, and incidents (two ranks reporting one fault with no step_end between: one).
TEST(ClusterLedger, TallyOfTheLogs) {
  TempDir dir;
  auto line = [](int64_t t, const char* event, const std::string& extra = "") {
    return "{\"t\":" + std::to_string(t) + ",\"event\":\"" + event + "\"" + extra + "}\n";
  };
  const std::string rank0 = dir.file(
      "events.rank0.jsonl",
      line(0, "process_start") + line(10, "step_begin", ",\"step\":1") + line(20, "step_end", ",\"step\":1") +
          line(20, "ckpt_begin", ",\"step\":1") + line(25, "ckpt_end", ",\"step\":1") + line(25, "data_wait_begin") +
          line(28, "data_wait_end") + line(30, "step_begin", ",\"step\":2") + line(40, "step_end", ",\"step\":2") +
          line(40, "ckpt_begin", ",\"step\":2") + line(47, "ckpt_end", ",\"step\":2") +
          line(50, "ckpt_begin", ",\"step\":3") + line(52, "fault_detected") + line(60, "process_start") +
          line(70, "step_begin", ",\"step\":3") + line(80, "step_end", ",\"step\":3") + line(90, "fault_detected"));
  const std::string rank1 = dir.file(
      "events.rank1.jsonl", line(53, "fault_detected", ",\"rank\":1") + line(95, "sdc_detected", ",\"rank\":1"));
  // Counted by the ledger's pass (fleet goodput reads the logs once), in either order given.
  for (const std::vector<std::string>& paths : {std::vector<std::string>{rank0, rank1}, {rank1, rank0}}) {
    goodput::Tally t;
    goodput::analyze_files(paths, {}, false, nullptr, "", &t);
    EXPECT_EQ(t.saves, (goodput::Activity{2, 12}));
    EXPECT_EQ(t.data_waits, (goodput::Activity{1, 3}));
    EXPECT_EQ(t.save_interval_ns, 22);
    EXPECT_EQ(t.incidents, 2);  // 52 and 53: one; 90 and 95: one
  }
  // One log alone, streamed through the ledger, counts in its one pass as the merge does.
  goodput::Tally alone, merged;
  goodput::analyze_file(rank0, {}, false, &alone);
  goodput::analyze_files({rank0}, {}, false, nullptr, "", &merged);
  EXPECT_EQ(alone.saves, (goodput::Activity{2, 12}));
  EXPECT_EQ(alone.data_waits, merged.data_waits);
  EXPECT_EQ(alone.save_interval_ns, merged.save_interval_ns);
  EXPECT_EQ(alone.incidents, 2);  // 52, and 90 after the step that ended at 80
  EXPECT_EQ(alone.incidents, merged.incidents);
}

// A fault on another rank stops the job: rank 0's steps after it, until rank 0 starts over, are the
// dying attempt's (as in the merge), so the stop they end in is the same incident (an inline probe's
// sdc_detected, and the stop the job's agreement on it makes some steps later). After a start over,
// a fault is a new incident.
TEST(ClusterLedger, StepsAfterAnotherRanksFaultAreNoProgress) {
  TempDir dir;
  auto line = [](int64_t t, const char* event, const std::string& extra = "") {
    return "{\"t\":" + std::to_string(t) + ",\"event\":\"" + event + "\"" + extra + "}\n";
  };
  auto steps = [&](int64_t from) {
    return line(from, "step_begin", ",\"step\":" + std::to_string(from)) +
           line(from + 5, "step_end", ",\"step\":" + std::to_string(from));
  };
  const std::string rank1 = dir.file("events.rank1.jsonl", line(35, "sdc_detected", ",\"rank\":1"));
  const std::string dying = dir.file("events.rank0.jsonl", line(0, "process_start") + steps(10) + steps(30) +
                                                               steps(40) + steps(50) + line(70, "fault_detected"));
  goodput::Tally t;
  goodput::analyze_files({dying, rank1}, {}, false, nullptr, "", &t);
  EXPECT_EQ(t.incidents, 1);
  const std::string restarted =
      dir.file("restarted.rank0.jsonl", line(0, "process_start") + steps(10) + steps(30) + line(45, "process_start") +
                                            steps(50) + line(70, "fault_detected"));
  goodput::analyze_files({restarted, rank1}, {}, false, nullptr, "", &t);
  EXPECT_EQ(t.incidents, 2);
}

void expect_error(const ClusterInputs& in, const std::string& needle) {
  try {
    compute_cluster(in);
    ADD_FAILURE() << "no error, expected " << needle;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// sacct as Slurm writes it: "meta" and "errors" around "jobs", and records that carry steps whose
// keys repeat the record's own. Read one record at a time, keeping the record's own fields, the
// cluster is the same as from the bare records.
// The work list ranks nodes by the GPU-hours their hangs cost. Job 201 is the job GoodputLog
// recorded (tests/goodput/data/goodput_hang: rank 2 on host vm, a CPU), read from its logs; job 202's
// summary is sdcprobe goodput's over logs whose rank 2 ran on node7's GPU-8f2c..., which the node's
// health report (tests/goodput/data/cluster_hang, sdcprobe health) shows in fault: hardware.
TEST(ClusterLedger, HangsRankNodesAndMarkHardware) {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string data = std::string(SDC_SOURCE_DIR) + "/tests/goodput/data/";
  fs::create_directories(dir.path("logs"));
  fs::copy(data + "goodput_hang", dir.path("logs/201"), fs::copy_options::recursive);
  int64_t first = INT64_MAX, last = 0;
  for (int r = 0; r < 4; ++r) {
    std::ifstream in(dir.path("logs/201/events.rank" + std::to_string(r) + ".jsonl"));
    for (std::string line; std::getline(in, line);) {
      const int64_t t = nlohmann::json::parse(line)["t"].get<int64_t>();
      first = std::min(first, t);
      last = std::max(last, t);
    }
  }
  const int64_t start = first / goodput::kNsPerSecond, end = last / goodput::kNsPerSecond + 1;

  // Job 202: 1 s steps; rank 2 never ends step 2 (begun at 2 s), rank 0 faults at 12 s, teardown to
  // 20 s. Rework 2..3 s (the median step), waiting 3..12 s, teardown 12..20 s: 17 s on 4 GPUs.
  const int64_t s = goodput::kNsPerSecond, t0 = kT0 * s;
  const std::string b = "GPU-8f2c0d1a-7b3e-4c5d-9e6f-0a1b2c3d4e5f";
  auto line = [&](int64_t t, const std::string& rest) {
    return "{\"t\":" + std::to_string(t0 + t) + "," + rest + "}\n";
  };
  for (int r = 0; r < 4; ++r) {
    const std::string where = r == 2 ? R"("host":"node7","device":")" + b + R"(","pci_bus_id":"00000000:11:00.0")"
                                     : R"("host":"node3","device":"GPU-1111)" + std::to_string(r) + R"(")";
    std::string log = line(0, R"("event":"process_start","attempt":0,"rank":)" + std::to_string(r) + "," + where);
    if (r == 0) {
      log += line(1 * s, R"("event":"step_begin","step":1)") + line(2 * s, R"("event":"step_end","step":1)") +
             line(2 * s, R"("event":"step_begin","step":2)") + line(12 * s, R"("event":"fault_detected")") +
             line(20 * s, R"("event":"teardown_end")") + line(20 * s, R"("event":"job_end")");
    }
    dir.file("job202/events.rank" + std::to_string(r) + ".jsonl", log);
  }
  fs::create_directories(dir.path("job202/flight_recorder"));
  fs::copy(data + "flight_recorder/stop", dir.path("job202/flight_recorder/attempt0"));
  fs::remove(dir.path("job202/flight_recorder/attempt0/expected.json"));
  goodput::GoodputOptions o;
  o.events_paths = {dir.path("job202/events.rank*.jsonl")};
  o.json = true;
  o.job_id = 202;
  std::ostringstream summary;
  goodput::goodput_command(o, summary);

  ClusterInputs in;
  in.sacct_path = dir.file("sacct.json", sacct({record(201, "ann", "a", 8, "FAILED", start, start, end),
                                                record(202, "bob", "a", 4, "FAILED", kT0, kT0, kT0 + 20)}));
  in.logs_template = dir.path("logs/{job_id}/events.rank*.jsonl");
  in.summaries = {dir.file("spool/202.json", summary.str())};
  in.health = {data + "cluster_hang/health.node7.json"};
  const Cluster c = compute_cluster(in);
  ASSERT_EQ(c.results.size(), 2u);
  const std::vector<WorkItem> work = work_list(c, GroupBy::kUser, 5);
  const auto dt =
      std::find_if(work.begin(), work.end(), [](const WorkItem& w) { return w.key == "detection_teardown"; });
  ASSERT_NE(dt, work.end());
  EXPECT_EQ(dt->hangs, 2);
  // Job 201's hang is its whole detection & teardown (one incident); job 202's, 17 s on 4 GPUs.
  const GpuNs recorded = c.results[0].gpu[Category::kDetectionTeardown];
  EXPECT_GT(recorded, 0);
  EXPECT_EQ(dt->hang_gpu_ns, recorded + 4 * 17 * static_cast<GpuNs>(s));
  EXPECT_EQ(dt->hang_gpu_ns, dt->gpu_ns);
  ASSERT_EQ(dt->nodes.size(), 2u);
  const HangNode& node7 = dt->nodes[recorded > 68 * static_cast<GpuNs>(s) ? 1 : 0];
  const HangNode& vm = dt->nodes[recorded > 68 * static_cast<GpuNs>(s) ? 0 : 1];
  EXPECT_EQ(node7.host, "node7");
  EXPECT_EQ(node7.gpu_ns, 68 * static_cast<GpuNs>(s));
  EXPECT_EQ(node7.gpus, std::vector<std::string>{b + " 00000000:11:00.0"});
  EXPECT_EQ(node7.faults, std::vector<std::string>{b + ": recovery_action, xid"});
  EXPECT_TRUE(node7.hardware());
  EXPECT_EQ(vm.host, "vm");
  EXPECT_EQ(vm.gpu_ns, recorded);
  EXPECT_EQ(vm.gpus, std::vector<std::string>{"cpu"});
  EXPECT_FALSE(vm.hardware());

  auto hours = [](GpuNs v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", gpu_hours(v));
    return std::string(buf);
  };
  const std::string text = text_report(c, work, GroupBy::kUser);
  EXPECT_NE(text.find("     hangs: " + hours(dt->hang_gpu_ns) + " GPU-h in 2 hangs; nodes by the GPU-hours"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("       node node7: " + hours(node7.gpu_ns) + " GPU-h (1 hang; " + b +
                      " 00000000:11:00.0): hardware, health: " + b + ": recovery_action, xid\n"),
            std::string::npos)
      << text;
  const nlohmann::json j = nlohmann::json::parse(json_report(c, work, GroupBy::kUser));
  for (const nlohmann::json& item : j["work_list"]) {
    if (item["category"] != "detection_teardown") continue;
    EXPECT_EQ(item["hangs"]["count"], 2);
    bool found = false;
    for (const nlohmann::json& n : item["hangs"]["nodes"]) {
      if (n["host"] != "node7") continue;
      found = true;
      EXPECT_EQ(n["hardware"], true);
      EXPECT_EQ(n["faults"][0], b + ": recovery_action, xid");
    }
    EXPECT_TRUE(found) << item.dump();
  }

  // A health report that is not one names its file and field.
  for (const auto& [text_of, why] : std::vector<std::pair<std::string, std::string>>{
           {"[]", "not a JSON object (expected `sdcprobe health --json` output)"},
           {"{}", "gpus is missing"},
           {R"({"gpus":[{"conditions":{}}]})", "gpus[0].uuid is missing"},
           {R"({"gpus":[{"uuid":"GPU-1","conditions":{"xid":{"state":1}}}]})",
            "gpus[0].conditions.xid.state must be a string"}}) {
    in.health = {dir.file("bad-health.json", text_of)};
    try {
      compute_cluster(in);
      ADD_FAILURE() << text_of;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), in.health[0] + ": " + why);
    }
  }
}

TEST(ClusterLedger, SacctRecordsAreReadOneAtATimeByTheirOwnFields) {
  Example plain;
  const Cluster expected = compute_cluster(plain.inputs);
  nlohmann::json full = nlohmann::json::parse(std::ifstream(plain.inputs.sacct_path));
  for (nlohmann::json& r : full["jobs"]) {
    r["steps"] = {{{"job_id", 1}, {"state", "x"}, {"time", {{"start", "later"}}}, {"tres", nullptr}}};
  }
  const std::string text = "{\"meta\": {\"jobs\": []}, \"jobs\": " + full["jobs"].dump() + ", \"errors\": []}";
  Example real;
  real.inputs.sacct_path = real.dir.file("sacct.json", text);
  const Cluster c = compute_cluster(real.inputs);
  ASSERT_EQ(c.jobs.size(), expected.jobs.size());
  EXPECT_EQ(c.total.wall, expected.total.wall);
  EXPECT_EQ(c.total.productive, expected.total.productive);
  EXPECT_EQ(c.total.ns, expected.total.ns);
  EXPECT_EQ(c.total.unlabelled, expected.total.unlabelled);
  for (size_t j = 0; j < c.jobs.size(); ++j) {
    EXPECT_EQ(c.jobs[j].job_id, expected.jobs[j].job_id);
    EXPECT_EQ(c.jobs[j].user, expected.jobs[j].user);
    EXPECT_EQ(c.jobs[j].records.size(), expected.jobs[j].records.size());
  }
}

TEST(ClusterLedger, BadInputNamesTheFileAndRecord) {
  TempDir dir;
  ClusterInputs in;
  in.sacct_path = dir.file("a.json", "{\"jobs\": [");
  expect_error(in, "a.json: not valid JSON");
  nlohmann::json r = record(1, "u", "p", 1, "COMPLETED", kT0, kT0 + 10, kT0 + 20);
  r["time"].erase("start");
  in.sacct_path = dir.file("b.json", sacct({record(2, "u", "p", 1, "COMPLETED", kT0, kT0, kT0 + 5), r}));
  expect_error(in, "b.json: jobs[1].time.start is missing");
  in.sacct_path = dir.file("c.json", sacct({record(3, "u", "p", 1, "REQUEUED", kT0, kT0, kT0 + 50),
                                            record(3, "u", "p", 1, "COMPLETED", kT0, kT0 + 40, kT0 + 60)}));
  expect_error(in, "c.json: jobs[1]: job 3's records overlap");
  r = record(4, "u", "p", 1, "COMPLETED", kT0, kT0, kT0 + 5);
  r["tres"]["allocated"][1]["count"] = -2;
  in.sacct_path = dir.file("d.json", sacct({r}));
  expect_error(in, "d.json: jobs[0].tres.allocated[1].count -2 is out of range");
  // Slurm 23's {"set", "infinite", "number"} with a flag that is not a boolean (cluster_fuzzer found it).
  r = record(6, "u", "p", 1, "COMPLETED", kT0, kT0, kT0 + 5);
  r["job_id"] = {{"set", "yes"}, {"number", 6}};
  in.sacct_path = dir.file("f.json", sacct({r}));
  expect_error(in, "f.json: jobs[0].job_id.set must be true or false");
  r = record(6, "u", "p", 1, "COMPLETED", kT0, kT0, kT0 + 5);
  r["tres"]["allocated"][1]["count"] = {{"set", true}, {"infinite", "no"}, {"number", 2}};
  in.sacct_path = dir.file("g.json", sacct({r}));
  expect_error(in, "g.json: jobs[0].tres.allocated[1].count.infinite must be true or false");
  in.sacct_path = dir.file("e.json", sacct({record(5, "u", "p", 1, "COMPLETED", kT0, kT0, kT0 + 5)}));
  in.summaries = {dir.file("s.json", "{\"job_id\": 5, \"wall_ns\": 10, \"productive_ns\": 3, \"categories\": {}}")};
  expect_error(in, "s.json: categories.queue is missing");
  in.summaries = {dir.file("t.json", goodput::json_breakdown(goodput::Breakdown{}))};
  expect_error(in, "t.json: job_id is missing");
  // A summary longer than its job's accounting (5 s) by more than Slurm's rounding.
  goodput::Breakdown b;
  b.wall_ns = b.productive_ns = 8 * goodput::kNsPerSecond;
  nlohmann::json long_summary = nlohmann::json::parse(goodput::json_breakdown(b));
  long_summary["job_id"] = 5;
  in.summaries = {dir.file("u.json", long_summary.dump())};
  expect_error(in, "u.json: wall_ns 8000000000 exceeds job 5's time in");
  in.summaries.clear();
  in.since_s = kT0 + 10;
  in.until_s = kT0 + 10;
  expect_error(in, "the window is empty");
}

// Through the binary: the reports are written on success; bad input is one error line, exit 2, and
// no report.
TEST(FleetGoodputCli, WritesReportsOrFailsWithExitTwo) {
  Example e;
  const std::string binary = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";
  const std::string out = e.dir.path("out");
  fuzz::ProcessResult r = fuzz::run_process({binary,
                                             "fleet",
                                             "goodput",
                                             "--sacct",
                                             e.inputs.sacct_path,
                                             "--since",
                                             "2027-01-01T00:00:00Z",
                                             "--until",
                                             "2027-01-02T00:00:00Z",
                                             "--by",
                                             "job",
                                             "--json",
                                             out + ".json",
                                             "--markdown",
                                             out + ".md",
                                             "--svg",
                                             out + ".svg",
                                             "--prom",
                                             out + ".prom",
                                             e.dir.path("spool")},
                                            e.dir.path(""), 120);
  ASSERT_TRUE(r.exited) << r.err;
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Cluster ETTR (GPU-weighted): 0.3616"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("planner: checkpoint every 1800 s"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(out + ".json"));
  EXPECT_EQ(j["gpu_ns"]["wall"], to_string(177 * kGpuHour));
  for (const char* ext : {".md", ".svg", ".prom"}) EXPECT_TRUE(fs::file_size(out + ext) > 0) << ext;

  const std::string bad = e.dir.file("bad.json", "{\"jobs\": [{\"job_id\": 1, \"time\": {}}]}");
  const std::string none = e.dir.path("none.json");
  r = fuzz::run_process({binary, "fleet", "goodput", "--sacct", bad, "--json", none}, e.dir.path(""), 120);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "sdcprobe: error: " + bad + ": jobs[0].time.eligible is missing\n");
  EXPECT_FALSE(fs::exists(none));
}

// `sdcprobe fleet goodput` with `args`; the JSON report it wrote (null when none).
struct FleetRun {
  fuzz::ProcessResult process;
  nlohmann::json report;
};
FleetRun fleet_goodput(const TempDir& dir, std::vector<std::string> args) {
  const std::string json = dir.path("fleet-out.json");
  fs::remove(json);
  args.insert(args.begin(), {std::string(SDC_BINARY_DIR) + "/cli/sdcprobe", "fleet", "goodput", "--json", json});
  FleetRun r{fuzz::run_process(args, dir.path(""), 120), nullptr};
  if (fs::exists(json)) r.report = nlohmann::json::parse(std::ifstream(json));
  return r;
}

// --health takes `sdcprobe health --json` reports; one that is not is exit 2 naming it, and nothing
// is written.
TEST(FleetGoodputCli, HealthReportsAreReadOrRefusedByName) {
  TempDir dir;
  const std::string sacct_path =
      dir.file("sacct.json", sacct({record(1, "ann", "a", 2, "COMPLETED", kT0, kT0, kT0 + 10)}));
  const std::string health = std::string(SDC_SOURCE_DIR) + "/tests/goodput/data/cluster_hang/health.node7.json";
  FleetRun r = fleet_goodput(dir, {"--sacct", sacct_path, "--health", health});
  ASSERT_TRUE(r.process.exited);
  EXPECT_EQ(r.process.code, 0) << r.process.err;
  const std::string bad = dir.file("bad.json", "{\"gpus\": 3}");
  r = fleet_goodput(dir, {"--sacct", sacct_path, "--health", health, bad});
  ASSERT_TRUE(r.process.exited);
  EXPECT_EQ(r.process.code, 2);
  EXPECT_EQ(r.process.err, "sdcprobe: error: " + bad + ": gpus must be an array\n");
  EXPECT_TRUE(r.report.is_null());
}

// A job cancelled while pending, as each Slurm writes it: 22.05's null or 0 start, 24.11's NO_VAL
// (4294967294), 23.02's schema {"set": false} object. Its 8 GPUs queue from eligible to the cancel, 4 s: 32 GPU-s,
// whatever the window's end; beside it a job that ran 10 s on 2 GPUs after 1 s in the queue.
TEST(FleetGoodputCli, JobCancelledWhilePendingQueuesUntilItsCancel) {
  TempDir dir;
  const std::string tres = R"("tres": {"allocated": [], "requested": [{"type": "gres", "name": "gpu", "count": 8}]})";
  const std::string ran = R"({"job_id": 1, "state": {"current": "COMPLETED"}, "time": {"eligible": )" +
                          std::to_string(kT0) + R"(, "start": )" + std::to_string(kT0 + 1) + R"(, "end": )" +
                          std::to_string(kT0 + 11) +
                          R"(}, "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}})";
  const std::string eligible = std::to_string(kT0 + 2), end = std::to_string(kT0 + 6);
  const std::vector<std::pair<std::string, std::string>> forms = {
      {"22.05 null", R"("eligible": )" + eligible + R"(, "start": null, "end": )" + end},
      {"22.05 zero", R"("eligible": )" + eligible + R"(, "start": 0, "end": )" + end},
      {"24.11 NO_VAL", R"("eligible": )" + eligible + R"(, "start": 4294967294, "end": )" + end},
      {"23.02 object", R"("eligible": {"set": true, "infinite": false, "number": )" + eligible +
                           R"(}, "start": {"set": false, "infinite": false, "number": 0}, "end": {"set": true, )" +
                           R"("infinite": false, "number": )" + end + "}"}};
  for (const auto& [name, times] : forms) {
    const std::string path = dir.file(
        "sacct.json", "{\"jobs\": [" + ran + R"(, {"job_id": 2, "state": {"current": "CANCELLED"}, "time": {)" + times +
                          "}, " + tres + "}]}");
    // The window reaches an hour past the cancel; the queue must not.
    const FleetRun r = fleet_goodput(dir, {"--sacct", path, "--until", "2027-01-01T01:00:00Z"});
    ASSERT_TRUE(r.process.exited) << name;
    ASSERT_EQ(r.process.code, 0) << name << ": " << r.process.err;
    const GpuNs s = 1'000'000'000;
    EXPECT_EQ(r.report["gpu_ns"]["queue"]["gpu_ns"], to_string(8 * 4 * s + 2 * 1 * s)) << name;
    EXPECT_EQ(r.report["gpu_ns"]["uninstrumented_other_run"]["gpu_ns"], to_string(2 * 10 * s)) << name;
    EXPECT_EQ(r.report["gpu_ns"]["wall"], to_string(32 * s + 22 * s)) << name;
    EXPECT_EQ(r.report["jobs"]["from_sacct"], 2) << name;
  }
  // A time in none of these forms names its field.
  const std::string bad =
      dir.file("bad.json", "{\"jobs\": [" + ran +
                               R"(, {"job_id": 2, "time": {"eligible": 1, "start": {"set": "no"}, "end": 2}}]})");
  const FleetRun r = fleet_goodput(dir, {"--sacct", bad});
  EXPECT_EQ(r.process.code, 2);
  EXPECT_EQ(r.process.err, "sdcprobe: error: " + bad + ": jobs[1].time.start.set must be true or false\n");
  // Only NO_VAL and INFINITE are unset: the second before NO_VAL is a time, here after the end.
  const std::string late = dir.file(
      "late.json",
      "{\"jobs\": [" + ran +
          R"(, {"job_id": 2, "state": {"current": "CANCELLED"}, "time": {"eligible": 1, "start": 4294967293, "end": 2}}]})");
  const FleetRun l = fleet_goodput(dir, {"--sacct", late});
  EXPECT_EQ(l.process.code, 2);
  EXPECT_EQ(l.process.err, "sdcprobe: error: " + late + ": jobs[1]: end before start\n");
  EXPECT_TRUE(l.report.is_null());
  EXPECT_TRUE(r.report.is_null());
}

// --logs 'ROOT/{job_id}/events.rank*.jsonl': a job without a folder has no log (counted from sacct
// and listed); a template that matches nothing for any job warns; a folder that exists but cannot be
// read (here a symbolic link to itself) is an error.
TEST(FleetGoodputCli, LogsTemplateMissingFoldersAreJobsWithoutLogs) {
  TempDir dir;
  std::vector<nlohmann::json> records;
  for (int64_t id = 1; id <= 13; ++id) records.push_back(record(id, "u", "p", 1, "COMPLETED", kT0, kT0, kT0 + 10));
  const std::string path = dir.file("sacct.json", sacct(records));
  // Job 1's loop ran from its start to its end, one step.
  auto line = [](int64_t s, const char* event, const std::string& extra = "") {
    return "{\"t\":" + std::to_string(s * 1'000'000'000) + ",\"event\":\"" + event + "\"" + extra + "}\n";
  };
  dir.file("logs/1/events.rank0.jsonl", line(kT0, "process_start") + line(kT0 + 1, "step_begin", ",\"step\":1") +
                                            line(kT0 + 9, "step_end", ",\"step\":1") + line(kT0 + 10, "job_end"));
  FleetRun r = fleet_goodput(dir, {"--sacct", path, "--logs", dir.path("logs/{job_id}/events.rank*.jsonl")});
  ASSERT_EQ(r.process.code, 0) << r.process.err;
  EXPECT_EQ(r.report["jobs"]["from_logs"], 1);
  EXPECT_EQ(r.report["jobs"]["from_sacct"], 12);
  EXPECT_EQ(r.report["jobs"]["logs_matched_nothing"], 12);
  EXPECT_EQ(r.report["jobs"]["logs_matched_nothing_first"], nlohmann::json({2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_NE(r.process.out.find("--logs matched no file for 12 of 13 jobs (counted from sacct alone): 2, 3, 4, 5, 6, "
                               "7, 8, 9, 10, 11 and 2 more\n"),
            std::string::npos)
      << r.process.out;
  EXPECT_EQ(r.process.err, "");
  // Exact: job 1's own ledger (one GPU), the other twelve 10 s each of uninstrumented run.
  const fuzz::ProcessResult own =
      fuzz::run_process({std::string(SDC_BINARY_DIR) + "/cli/sdcprobe", "goodput", "--json", "--sacct",
                         dir.file("1.sacct.json", sacct({records[0]})), dir.path("logs/1/events.rank0.jsonl")},
                        dir.path(""), 120);
  ASSERT_EQ(own.code, 0) << own.err;
  const nlohmann::json ledger = nlohmann::json::parse(own.out);
  EXPECT_EQ(ledger["wall_ns"], 10'000'000'000);
  EXPECT_EQ(r.report["gpu_ns"]["productive"], to_string(GpuNs{ledger["productive_ns"].get<int64_t>()}));
  EXPECT_EQ(r.report["gpu_ns"]["uninstrumented_other_run"]["gpu_ns"], to_string(GpuNs{120'000'000'000}));
  EXPECT_EQ(r.report["gpu_ns"]["wall"], to_string(GpuNs{130'000'000'000}));

  r = fleet_goodput(dir, {"--sacct", path, "--logs", dir.path("log/{job_id}/events.rank*.jsonl")});
  ASSERT_EQ(r.process.code, 0) << r.process.err;
  EXPECT_EQ(r.report["jobs"]["logs_matched_nothing"], 13);
  EXPECT_EQ(r.process.err, "sdcprobe: WARNING: --logs '" + dir.path("log/{job_id}/events.rank*.jsonl") +
                               "' matched no file for any of the 13 jobs; check the template\n");

  fs::create_symlink(dir.path("logs/2"), dir.path("logs/2"));
  r = fleet_goodput(dir, {"--sacct", path, "--logs", dir.path("logs/{job_id}/events.rank*.jsonl")});
  EXPECT_EQ(r.process.code, 2);
  EXPECT_NE(r.process.err.find("--logs: cannot read the files of " + dir.path("logs/2/events.rank*.jsonl") + " (" +
                               dir.path("logs/2") + ": Too many levels of symbolic links)"),
            std::string::npos)
      << r.process.err;
  EXPECT_TRUE(r.report.is_null());
}

// A requeued run failed, in each Slurm's form of the record's state: 22.05's "REQUEUED", 24.11's
// ["PENDING", "REQUEUED"] (the base state, then its flag), the schema's ["REQUEUED"]; a run of a job
// without a log is then a failed run, not another. Job 1 runs 10 s on 2 GPUs, is requeued and runs
// 7 s more.
TEST(FleetGoodputCli, RequeuedRecordIsAFailedRunInEachForm) {
  TempDir dir;
  auto job = [](const std::string& state) {
    auto rec = [](const std::string& st, int64_t start, int64_t end) {
      return R"({"job_id": 1, "state": {"current": )" + st + R"(}, "time": {"eligible": )" + std::to_string(kT0) +
             R"(, "start": )" + std::to_string(kT0 + start) + R"(, "end": )" + std::to_string(kT0 + end) +
             R"(}, "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}})";
    };
    return "{\"jobs\": [" + rec(state, 1, 11) + ", " + rec(R"(["COMPLETED"])", 13, 20) + "]}";
  };
  const std::vector<std::pair<std::string, bool>> forms = {
      {R"("REQUEUED")", true},   {R"(["PENDING", "REQUEUED"])", true},
      {R"(["REQUEUED"])", true}, {R"(["FAILED"])", true},
      {R"(["PENDING"])", false}, {R"(["COMPLETED"])", false},
      {R"("COMPLETED")", false}};
  const GpuNs s = 1'000'000'000;
  for (const auto& [state, failed] : forms) {
    const FleetRun r = fleet_goodput(dir, {"--sacct", dir.file("sacct.json", job(state))});
    ASSERT_EQ(r.process.code, 0) << state << ": " << r.process.err;
    EXPECT_EQ(r.report["gpu_ns"]["uninstrumented_failed_run"]["gpu_ns"], to_string(failed ? 20 * s : 0)) << state;
    EXPECT_EQ(r.report["gpu_ns"]["uninstrumented_other_run"]["gpu_ns"], to_string(failed ? 14 * s : 34 * s)) << state;
  }
  const std::string bad = dir.file("bad.json", job(R"(["PENDING", 3])"));
  const FleetRun r = fleet_goodput(dir, {"--sacct", bad});
  EXPECT_EQ(r.process.code, 2);
  EXPECT_EQ(r.process.err,
            "sdcprobe: error: " + bad + ": jobs[0].state.current must be a string or an array of strings\n");
  EXPECT_TRUE(r.report.is_null());
}

// Every rank logs its saves and evals (GoodputCallback on each DDP rank): the measured counts are
// rank 0's, as the ledger's timeline is (TallyOfTheLogs: other ranks' faults still count).
TEST(FleetGoodputCli, MeasuredSavesAndEvalsAreRankZeros) {
  TempDir dir;
  auto line = [](int64_t t, const char* event, const std::string& extra = "") {
    return "{\"t\":" + std::to_string(t) + ",\"event\":\"" + event + "\"" + extra + "}\n";
  };
  // Rank r's saves take 5 + r ns: rank 1's would show in the time as well as in the count.
  auto rank = [&](int r) {
    const std::string tag = ",\"rank\":" + std::to_string(r);
    std::string text = line(0, "process_start", tag);
    for (int step = 1; step <= 2; ++step) {
      const int64_t t = 100 * step;
      text += line(t, "step_begin", tag + ",\"step\":" + std::to_string(step)) +
              line(t + 50, "step_end", tag + ",\"step\":" + std::to_string(step)) +
              line(t + 50, "ckpt_begin", tag + ",\"step\":" + std::to_string(step)) +
              line(t + 55 + r, "ckpt_end", tag + ",\"step\":" + std::to_string(step));
    }
    text += line(300, "eval_begin", tag) + line(310 + r, "eval_end", tag);
    return text + (r == 0 ? line(400, "job_end", tag) : "");
  };
  const std::string r0 = dir.file("events.rank0.jsonl", rank(0)), r1 = dir.file("events.rank1.jsonl", rank(1));
  const fuzz::ProcessResult p = fuzz::run_process(
      {std::string(SDC_BINARY_DIR) + "/cli/sdcprobe", "goodput", "--json", "--job-id", "7", r0, r1}, dir.path(""), 120);
  ASSERT_EQ(p.code, 0) << p.err;
  const nlohmann::json m = nlohmann::json::parse(p.out)["measured"];
  EXPECT_EQ(m["saves"], nlohmann::json({{"count", 2}, {"ns", 10}})) << m.dump();
  EXPECT_EQ(m["evals"], nlohmann::json({{"count", 1}, {"ns", 10}})) << m.dump();
  EXPECT_EQ(m["save_interval_ns"], 100);
  EXPECT_EQ(m["incidents"], 0);
}

// A real Slurm dump, tests/goodput/data/fleet_VERSION (its README.md: a requeue, an SDC, a job
// without a log folder, one running at the window's end, one cancelled while pending, two ranks),
// with its jobs' real logs, by the documented --logs template. Each job with logs equals its own
// `goodput --sacct` ledger times its GPUs; the others are the accounting's own arithmetic; the sum
// is exact. `per_job` gets, for each job (a to f), the categories its time falls in when the job's
// own records are summed alone; those sums add up to the whole.
// Unset: 22.05's null, 24.11's NO_VAL.
int64_t seconds(const nlohmann::json& v) { return v.is_null() || v == 4294967294u ? int64_t{0} : v.get<int64_t>(); }

int64_t gpus_of(const nlohmann::json& rec) {  // allocated, else requested (a record that never ran)
  for (const char* kind : {"allocated", "requested"}) {
    for (const nlohmann::json& t : rec["tres"][kind]) {
      if (t["type"] == "gres" && t["name"] == "gpu") return t["count"].get<int64_t>();
    }
  }
  return 0;
}

struct RealDump {
  fs::path data;
  std::string until;
  std::map<std::string, int64_t> id;  // a to f (and g in 22.05's): the job ids
  nlohmann::json dump;                // sacct.json as recorded
  explicit RealDump(const std::string& version)
      : data(fs::path(SDC_SOURCE_DIR) / "tests/goodput/data" / ("fleet_" + version)) {
    std::ifstream(data / "until") >> until;
    for (std::ifstream in(data / "jobs"); in;) {
      std::string kv;
      if (!(in >> kv)) break;
      id[kv.substr(0, 1)] = std::stoll(kv.substr(2));
    }
    dump = nlohmann::json::parse(std::ifstream(data / "sacct.json"));
  }
  // The job's records, by start (sacct lists a requeued record where the job was first submitted).
  nlohmann::json records_of(const std::string& job) const {
    nlohmann::json out = nlohmann::json::array();
    for (const nlohmann::json& rec : dump["jobs"]) {
      if (rec["job_id"] == id.at(job)) out.push_back(rec);
    }
    std::stable_sort(out.begin(), out.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
      return seconds(x["time"]["start"]) < seconds(y["time"]["start"]);
    });
    return out;
  }
};

void replay_real_dump(const RealDump& d, std::map<std::string, std::set<std::string>>& per_job,
                      nlohmann::json& report) {
  ASSERT_GE(d.id.size(), 6u);
  // The jobs that log: a, b, f, and 22.05's fast requeue g.
  std::vector<std::string> logged = {"a", "b", "f"};
  if (d.id.count("g")) logged.push_back("g");
  TempDir dir;
  const std::string binary = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";
  const std::string logs = (d.data / "logs/{job_id}/events.rank*.jsonl").string();
  const FleetRun r =
      fleet_goodput(dir, {"--sacct", (d.data / "sacct.json").string(), "--logs", logs, "--until", d.until});
  ASSERT_EQ(r.process.code, 0) << r.process.err;
  EXPECT_EQ(r.process.err, "");
  EXPECT_EQ(r.report["jobs"]["from_logs"], logged.size());
  EXPECT_EQ(r.report["jobs"]["from_sacct"], 3);
  EXPECT_EQ(r.report["jobs"]["logs_matched_nothing"], 3);
  EXPECT_EQ(r.report["jobs"]["logs_matched_nothing_first"], nlohmann::json({d.id.at("c"), d.id.at("d"), d.id.at("e")}));
  report = r.report;

  const int64_t until_s = r.report["window"]["until_s"];
  std::map<std::string, GpuNs> expect;
  const GpuNs s = 1'000'000'000;
  for (const std::string& job : logged) {
    const nlohmann::json recs = d.records_of(job);
    const std::string acct = dir.file(job + ".sacct.json", nlohmann::json{{"jobs", recs}}.dump());
    const std::string pattern = (d.data / "logs" / std::to_string(d.id.at(job)) / "events.rank*.jsonl").string();
    const fuzz::ProcessResult g =
        fuzz::run_process({binary, "goodput", "--json", "--sacct", acct, pattern}, dir.path(""), 120);
    ASSERT_EQ(g.code, 0) << job << ": " << g.err;
    const nlohmann::json ledger = nlohmann::json::parse(g.out);
    const int64_t gpus = gpus_of(recs[0]);
    expect["wall"] += GpuNs{ledger["wall_ns"].get<int64_t>()} * gpus;
    expect["productive"] += GpuNs{ledger["productive_ns"].get<int64_t>()} * gpus;
    for (const auto& [category, v] : ledger["categories"].items())
      expect[category] += GpuNs{v["ns"].get<int64_t>()} * gpus;
  }
  for (const char* job : {"c", "d", "e"}) {
    const nlohmann::json rec = d.records_of(job)[0];
    const int64_t gpus = gpus_of(rec), eligible = seconds(rec["time"]["eligible"]);
    const int64_t start = seconds(rec["time"]["start"]), end = seconds(rec["time"]["end"]);
    if (std::string(job) == "e") {  // cancelled while pending: queued until the cancel
      EXPECT_EQ(start == 0 || start == end, true) << rec["time"].dump();
      expect["queue"] += (end - eligible) * s * gpus;
      expect["wall"] += (end - eligible) * s * gpus;
      continue;
    }
    const int64_t stop = std::string(job) == "d" ? until_s : end;  // d runs past the window's end
    expect["queue"] += (start - eligible) * s * gpus;
    expect["uninstrumented_other_run"] += (stop - start) * s * gpus;
    expect["wall"] += (stop - eligible) * s * gpus;
  }
  const nlohmann::json& got = r.report["gpu_ns"];
  EXPECT_EQ(got["wall"], to_string(expect["wall"]));
  EXPECT_EQ(got["productive"], to_string(expect["productive"]));
  const char* categories[] = {"queue",
                              "detection_teardown",
                              "restart_warmup",
                              "rework",
                              "blocking_overhead",
                              "uninstrumented_other_run",
                              "uninstrumented_failed_run"};
  for (const char* k : categories) EXPECT_EQ(got[k]["gpu_ns"], to_string(expect[k])) << k;
  EXPECT_EQ(got["uninstrumented_failed_run"]["gpu_ns"], "0");
  EXPECT_GT(expect["queue"], 0);

  // Each job alone, on its own records as recorded: the same window, and the parts sum to the whole.
  std::map<std::string, GpuNs> sum;
  for (const auto& [job, job_id] : d.id) {
    const std::string acct = dir.file(job + ".alone.json", nlohmann::json{{"jobs", d.records_of(job)}}.dump());
    const FleetRun one = fleet_goodput(dir, {"--sacct", acct, "--logs", logs, "--until", d.until});
    ASSERT_EQ(one.process.code, 0) << job << ": " << one.process.err;
    const nlohmann::json& g = one.report["gpu_ns"];
    sum["wall"] += std::stoll(g["wall"].get<std::string>());
    sum["productive"] += std::stoll(g["productive"].get<std::string>());
    if (g["productive"] != "0") per_job[job].insert("productive");
    for (const char* k : categories) {
      sum[k] += std::stoll(g[k]["gpu_ns"].get<std::string>());
      if (g[k]["gpu_ns"] != "0") per_job[job].insert(k);
      if (g[k]["sdc_gpu_ns"] != "0") per_job[job].insert(std::string("sdc ") + k);
    }
  }
  EXPECT_EQ(to_string(sum["wall"]), got["wall"]);
  EXPECT_EQ(to_string(sum["productive"]), got["productive"]);
  for (const char* k : categories) EXPECT_EQ(to_string(sum[k]), got[k]["gpu_ns"]) << k;
}

// Slurm 22.05's dump; the same in Slurm 23.02's schema forms (sacct_as_23.py) gives the same ledger.
TEST(FleetGoodputCli, RealSlurm2205DumpReplaysExactly) {
  const RealDump d("22.05");
  std::map<std::string, std::set<std::string>> per_job;
  nlohmann::json report;
  ASSERT_NO_FATAL_FAILURE(replay_real_dump(d, per_job, report));
  EXPECT_EQ(d.records_of("e")[0]["time"]["start"], nullptr);  // 22.05's cancelled-while-pending start
  TempDir dir;
  const FleetRun as_23 =
      fleet_goodput(dir, {"--sacct", (d.data / "sacct_23.02_form.json").string(), "--logs",
                          (d.data / "logs/{job_id}/events.rank*.jsonl").string(), "--until", d.until});
  ASSERT_EQ(as_23.process.code, 0) << as_23.process.err;
  EXPECT_EQ(as_23.report["gpu_ns"], report["gpu_ns"]);
  EXPECT_EQ(as_23.report["jobs"], report["jobs"]);
}

// Slurm 24.11's dump (Debian 13) of the same six jobs: its own forms (plain integer times, NO_VAL for
// the cancelled job's start, a requeued record's state as ["PENDING", "REQUEUED"]) sum exactly, and
// every job's time falls in the same categories as in 22.05's dump.
TEST(FleetGoodputCli, RealSlurm2411DumpReplaysExactly) {
  const RealDump d("24.11"), old("22.05");
  std::map<std::string, std::set<std::string>> per_job, per_job_2205;
  nlohmann::json report, report_2205;
  ASSERT_NO_FATAL_FAILURE(replay_real_dump(d, per_job, report));
  EXPECT_EQ(d.dump["meta"]["slurm"]["release"], "24.11.5");
  EXPECT_EQ(d.records_of("e")[0]["time"]["start"], 4294967294u);
  EXPECT_EQ(d.records_of("a")[0]["state"]["current"], nlohmann::json({"PENDING", "REQUEUED"}));
  EXPECT_EQ(d.records_of("a").size(), 2u);
  ASSERT_NO_FATAL_FAILURE(replay_real_dump(old, per_job_2205, report_2205));
  ASSERT_EQ(per_job.size(), 6u);
  // The scheduler's timing excepted: the queue is whole seconds of it (d and f started within the
  // second they became eligible in the 22.05 recording, one or two seconds later in this one), and
  // a's rework is whether its requeue came before or after the steps past its last save (after, in
  // 22.05's; before, in this one). b's SDC rework is not timing: it is checked below.
  auto but_timing = [](std::set<std::string> categories) {
    categories.erase("queue");
    categories.erase("rework");
    return categories;
  };
  for (const char* job : {"a", "b", "c", "d", "e", "f"}) {
    EXPECT_EQ(but_timing(per_job[job]), but_timing(per_job_2205[job])) << job;
  }
  // What each job is: e only queued; b's SDC shows; c and d ran without a log.
  EXPECT_EQ(per_job["e"], std::set<std::string>({"queue"}));
  EXPECT_EQ(per_job["c"], per_job["d"]);
  EXPECT_EQ(per_job["d"], std::set<std::string>({"queue", "uninstrumented_other_run"}));
  EXPECT_EQ(per_job["b"].count("sdc rework"), 1u);
  // 22.05's dump also holds the fast requeue g, a seventh job with a log.
  EXPECT_EQ(report["jobs"]["from_logs"], 3);
  for (const char* k : {"from_sacct", "logs_matched_nothing"})
    EXPECT_EQ(report["jobs"][k], report_2205["jobs"][k]) << k;
}

// Job g of the 22.05 dump, requeued fast: the SIGTERM of `scontrol requeue` is its fault, logged
// after the requeued record's End (Slurm cuts it down to the second) and less than 1 s before the
// next record's Start. The record its attempt names (slurm_restart) holds it: the gap from the fault
// to the next Start is queue, and detection & teardown ends at the fault. The old rule (an event belongs
// to the record starting at most 1 s after it), given the same log without slurm_restart, puts the
// fault in the next record and labels the gap detection & teardown.
TEST(FleetGoodputCli, RealSlurmFastRequeueKeepsItsFaultInItsRecord) {
  const RealDump real("22.05");
  const int64_t job = real.id.at("g");
  const nlohmann::json recs = real.records_of("g");
  ASSERT_GE(recs.size(), 2u);
  const int64_t s = 1'000'000'000, gpus = gpus_of(recs[0]);
  auto at = [&](size_t k, const char* key) { return recs[k]["time"][key].get<int64_t>() * s; };
  // The log's events by the record their attempt names; the same log without slurm_restart.
  std::vector<std::vector<nlohmann::json>> in_record(recs.size());
  std::string stripped;
  size_t record = 0;
  std::ifstream in(real.data / "logs" / std::to_string(job) / "events.rank0.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json e = nlohmann::json::parse(line);
    if (e["event"] == "process_start") {
      record = e.at("slurm_restart").get<size_t>();
      e.erase("slurm_restart");
    }
    ASSERT_LT(record, recs.size()) << line;
    in_record[record].push_back(e);
    stripped += e.dump() + "\n";
  }
  // Queue: eligible to the first Start, then each gap from the later of End and the record's last
  // event to the next Start. The recording holds a fault in the second after an End, with the next
  // Start in the second after that: the one the old rule misplaces.
  int64_t queue = at(0, "start") - at(0, "eligible"), in_flight = 0;
  int ambiguous = 0;
  for (size_t k = 0; k + 1 < recs.size(); ++k) {
    ASSERT_FALSE(in_record[k].empty()) << k;
    const nlohmann::json& last = in_record[k].back();
    const int64_t t = last["t"], released = std::max(at(k, "end"), t), granted = at(k + 1, "start");
    ASSERT_GE(granted, released) << k;
    queue += granted - released;
    if (last["event"] == "fault_detected" && t >= at(k, "end") && t >= granted - s) {
      ++ambiguous;
      // The step it cut short (hung in the job's wait) may be detection & teardown, nothing after it.
      for (const nlohmann::json& e : in_record[k]) {
        if (e["event"] == "step_begin") in_flight = t - e["t"].get<int64_t>();
      }
    }
  }
  ASSERT_GE(ambiguous, 1) << "no fault of the recording falls in the second between two records";
  queue *= gpus;

  TempDir dir;
  const std::string acct = dir.file("g.sacct.json", nlohmann::json{{"jobs", recs}}.dump());
  auto run = [&](const std::string& root) {
    const FleetRun r = fleet_goodput(
        dir, {"--sacct", acct, "--logs", root + "/{job_id}/events.rank*.jsonl", "--until", real.until, "--by", "job"});
    EXPECT_EQ(r.process.code, 0) << r.process.err;
    const nlohmann::json& got = r.report["gpu_ns"];
    GpuNs sum = std::stoll(got["productive"].get<std::string>());
    for (const char* k : {"queue", "detection_teardown", "restart_warmup", "rework", "blocking_overhead"})
      sum += std::stoll(got[k]["gpu_ns"].get<std::string>());
    EXPECT_EQ(to_string(sum), got["wall"]) << got.dump();
    EXPECT_EQ(got["uninstrumented_other_run"]["gpu_ns"], "0");
    return got;
  };
  const nlohmann::json named = run((real.data / "logs").string());
  EXPECT_EQ(named["queue"]["gpu_ns"], to_string(GpuNs{queue})) << named.dump();
  const int64_t detection = std::stoll(named["detection_teardown"]["gpu_ns"].get<std::string>());
  EXPECT_LT(detection, in_flight * gpus) << named.dump();

  dir.file("old/" + std::to_string(job) + "/events.rank0.jsonl", stripped);
  const nlohmann::json by_time = run(dir.path("old"));
  EXPECT_LT(std::stoll(by_time["queue"]["gpu_ns"].get<std::string>()), queue) << by_time.dump();
  EXPECT_GT(std::stoll(by_time["detection_teardown"]["gpu_ns"].get<std::string>()), in_flight * gpus) << by_time.dump();
  EXPECT_EQ(by_time["wall"], named["wall"]);
}

// A job that saves every second within each attempt, crashes, restarts 6 s later and saves every
// second again: the planner's current interval is 1 s (the attempts' own), not the file's 2.42 s
// that the crash stretches; its figures are readable at this scale and never "-0.0".
TEST(FleetGoodputCli, PlannerIntervalIsMeasuredWithinAttempts) {
  TempDir dir;
  const int64_t ms = 1'000'000, t0 = kT0 * 1'000'000'000;
  auto line = [&](int64_t at_ms, const char* event, const std::string& extra = "") {
    return "{\"t\":" + std::to_string(t0 + at_ms * ms) + ",\"event\":\"" + event + "\"" + extra + "}\n";
  };
  auto step = [](int64_t n) { return ",\"step\":" + std::to_string(n); };
  // Steps of 900 ms, each saved in 100 ms, from `at_ms`.
  auto saved_steps = [&](int64_t at_ms, int64_t first, int64_t last) {
    std::string text;
    for (int64_t n = first; n <= last; ++n, at_ms += 1000) {
      text += line(at_ms, "step_begin", step(n)) + line(at_ms + 900, "step_end", step(n)) +
              line(at_ms + 900, "ckpt_begin", step(n)) + line(at_ms + 1000, "ckpt_end", step(n)) +
              line(at_ms + 1000, "ckpt_commit", step(n));
    }
    return text;
  };
  const std::string log = line(0, "process_start") + saved_steps(0, 1, 3) + line(3000, "step_begin", step(4)) +
                          line(3900, "step_end", step(4)) + line(4000, "fault_detected") +
                          line(10000, "process_start") + line(10000, "restore_begin") +
                          line(10100, "restore_end", step(3)) + saved_steps(10100, 4, 6) + line(20000, "job_end");
  dir.file("logs/9/events.rank0.jsonl", log);
  const std::string path = dir.file("sacct.json", sacct({record(9, "u", "p", 1, "COMPLETED", kT0, kT0, kT0 + 20)}));
  const FleetRun r =
      fleet_goodput(dir, {"--sacct", path, "--logs", dir.path("logs/{job_id}/events.rank*.jsonl"), "--by", "job"});
  ASSERT_EQ(r.process.code, 0) << r.process.err;
  nlohmann::json planner;
  for (const nlohmann::json& item : r.report["work_list"]) {
    if (item["category"] == "rework") planner = item["top"][0]["planner"];
  }
  ASSERT_TRUE(planner.is_object()) << r.report.dump(2);
  EXPECT_EQ(planner["interval_now_s"], 1.0) << planner.dump();
  EXPECT_EQ(planner["save_s"], 0.1) << planner.dump();
  const double saved = planner["saved_gpu_hours"];
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.3g", std::fabs(saved));
  const std::string expected = saved < 0 ? std::string("would have cost ") + figure + " GPU-h more"
                                         : std::string("would have saved ") + figure + " GPU-h";
  EXPECT_NE(r.process.out.find("instead of 1 s (save 0.1 s): " + expected), std::string::npos) << r.process.out;
  EXPECT_FALSE(std::regex_search(r.process.out, std::regex("-0\\.0+[^0-9]"))) << r.process.out;
}

// A log of a replica check's events only, with no process_start: the ledger would call all of it
// queue, its probe and its SDC included. Without the scheduler's records there is no start to count
// from: a clear error, exit 2. With them (--sacct), the allocation starts the job's time.
TEST(FleetGoodputCli, LogWithoutProcessStartIsRefused) {
  TempDir dir;
  auto line = [](int64_t s, const char* event, const std::string& extra = "") {
    return "{\"t\":" + std::to_string(s * 1'000'000'000) + ",\"event\":\"" + event + "\"" + extra + "}\n";
  };
  const std::string log =
      dir.file("events.rank0.jsonl", line(kT0 + 1, "probe_begin", ",\"probe\":\"replica_check\"") +
                                         line(kT0 + 3, "probe_end", ",\"probe\":\"replica_check\"") +
                                         line(kT0 + 3, "sdc_detected", ",\"detector\":\"replica_check\""));
  const std::string binary = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";
  const std::string why =
      "no process_start (GoodputLog.attempt()) or alloc_granted: the job's time cannot be told from its queue; "
      "log the start of each attempt, or give --sacct\n";
  fuzz::ProcessResult p = fuzz::run_process({binary, "goodput", "--json", log}, dir.path(""), 120);
  EXPECT_EQ(p.code, 2) << p.out;
  EXPECT_EQ(p.out, "");
  EXPECT_EQ(p.err, "sdcprobe: error: " + why);
  // Merged with another rank's file (whose steps are not the job's timeline), the error names rank 0's.
  const std::string rank1 = dir.file(
      "events.rank1.jsonl", line(kT0 + 1, "step_begin", ",\"step\":1") + line(kT0 + 2, "step_end", ",\"step\":1"));
  p = fuzz::run_process({binary, "goodput", "--json", log, rank1}, dir.path(""), 120);
  EXPECT_EQ(p.code, 2) << p.out;
  EXPECT_EQ(p.err, "sdcprobe: error: " + log + ": " + why);
  const std::string acct = dir.file("sacct.json", sacct({record(3, "u", "p", 1, "FAILED", kT0, kT0, kT0 + 4)}));
  p = fuzz::run_process({binary, "goodput", "--json", "--sacct", acct, log}, dir.path(""), 120);
  ASSERT_EQ(p.code, 0) << p.err;
  const nlohmann::json b = nlohmann::json::parse(p.out);
  EXPECT_EQ(b["categories"]["queue"]["ns"], 0) << b.dump();
  EXPECT_EQ(b["wall_ns"], 4'000'000'000) << b.dump();
}

}  // namespace
}  // namespace sdc::goodput::cluster
