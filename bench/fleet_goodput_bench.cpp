// The cluster ledger at scale. A month of a 10,000-GPU cluster (50,000 jobs, half with summaries from
// the simulator, the rest known to the accounting only): jobs per second and peak memory against
// the input size. And the raw-log path: bytes per second per core against simdjson parsing the same
// lines on one core, measured in the same iterations, and its peak memory.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "goodput/cluster/cluster_report.hpp"
#include "goodput/report.hpp"
#include "goodput/simulator.hpp"

namespace {

namespace fs = std::filesystem;
namespace cluster = sdc::goodput::cluster;
std::vector<fs::path> temporary_dirs;  // removed when the benchmarks are done
using sdc::goodput::kNsPerSecond;
constexpr int64_t kT0 = 1'798'761'600;  // 2027-01-01T00:00:00Z

nlohmann::json record(int64_t id, int64_t gpus, const std::string& state, int64_t eligible, int64_t start, int64_t end,
                      std::mt19937_64& rng) {
  static const char* kUsers[] = {"ann", "ben", "cy", "dee", "eli", "fay", "gus", "hal"};
  static const char* kParts[] = {"train", "train", "debug", "inference"};
  return {{"job_id", id},
          {"user", kUsers[rng() % 8]},
          {"account", "lab" + std::to_string(rng() % 5)},
          {"partition", kParts[rng() % 4]},
          {"state", {{"current", {state}}}},
          {"time", {{"eligible", eligible}, {"start", start}, {"end", end}}},
          {"tres", {{"allocated", {{{"type", "gres"}, {"name", "gpu"}, {"count", gpus}}}}}}};
}

struct Month {
  fs::path dir;
  uint64_t input_bytes = 0;
  int64_t jobs = 0;
};

// 50,000 jobs over 30 days: sizes 1 to 1,024 GPUs (most of 8), runs of 0.2 to 6.4 h, 10% failing.
const Month& month() {
  static const Month m = [] {
    Month out;
    out.dir = fs::temp_directory_path() / ("sdc-fleet-bench-" + std::to_string(::getpid()));
    fs::create_directories(out.dir / "spool");
    temporary_dirs.push_back(out.dir);
    std::mt19937_64 rng(3);
    nlohmann::json jobs = nlohmann::json::array();
    const int64_t sizes[] = {1, 8, 8, 8, 8, 32, 32, 128, 1024};
    for (int64_t id = 1; id <= 50'000; ++id) {
      const int64_t gpus = sizes[rng() % 9];
      const int64_t eligible = kT0 + static_cast<int64_t>(rng() % (30 * 86400));
      const int64_t start = eligible + static_cast<int64_t>(rng() % 3600);
      const int64_t run_s = 720 + static_cast<int64_t>(rng() % (6 * 3600));
      const bool failed = rng() % 10 == 0;
      int64_t end = start + run_s;
      if (id % 2 == 0) {
        sdc::goodput::SimParams p;
        p.seed = static_cast<uint64_t>(id);
        p.first_queue_ns = (start - eligible) * kNsPerSecond;
        p.duration_ns = run_s * kNsPerSecond;
        p.step_ns = 30 * kNsPerSecond;
        p.faults_per_day = 0.05 * static_cast<double>(gpus) / 8.0;
        const sdc::goodput::SimResult r = sdc::goodput::simulate(p, nullptr);
        end = eligible + (r.truth.wall_ns + kNsPerSecond - 1) / kNsPerSecond;  // faults make runs longer
        nlohmann::json s = nlohmann::json::parse(sdc::goodput::json_breakdown(r.truth));
        s["job_id"] = id;
        // The simulator counts incidents, not saves: the summary says so with zero saves.
        const nlohmann::json none = {{"count", 0}, {"ns", 0}};
        s["measured"] = {{"saves", none},  {"data_waits", none},    {"evals", none},
                         {"probes", none}, {"save_interval_ns", 0}, {"incidents", r.faults + r.sdc_detections}};
        const std::string text = s.dump();
        std::ofstream(out.dir / "spool" / (std::to_string(id) + ".json")) << text;
        out.input_bytes += text.size();
      }
      jobs.push_back(record(id, gpus, failed ? "NODE_FAIL" : "COMPLETED", eligible, start, end, rng));
    }
    const std::string sacct = nlohmann::json{{"jobs", jobs}}.dump();
    std::ofstream(out.dir / "sacct.json") << sacct;
    out.input_bytes += sacct.size();
    out.jobs = 50'000;
    return out;
  }();
  return m;
}

// Peak resident memory of computing a cluster ledger in a fresh process (this program re-run with
// --memory-of KIND DIR), in bytes: its own high-water mark (VmHWM, which the set-up's memory, forked
// with the child, does not reach), as the child reports it.
double fresh_process_peak_rss(const char* kind, const fs::path& dir) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();  // the shell's own, once in it
  const std::string command = "'" + self + "' --memory-of " + kind + " '" + dir.string() + "'";
  FILE* child = ::popen(command.c_str(), "r");
  if (child == nullptr) return -1;
  double kib = -1;
  if (std::fscanf(child, "%lf", &kib) != 1) kib = -1;
  return ::pclose(child) == 0 && kib > 0 ? kib * 1024.0 : -1;
}

// The child's VmHWM in KiB.
long own_peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

cluster::ClusterInputs month_inputs(const fs::path& dir) {
  cluster::ClusterInputs in;
  in.sacct_path = (dir / "sacct.json").string();
  in.summaries = {(dir / "spool").string()};
  return in;
}

void BM_ClusterMonthFromSummaries(benchmark::State& state) {
  const Month& m = month();
  const cluster::ClusterInputs in = month_inputs(m.dir);
  const double rss = fresh_process_peak_rss("summaries", m.dir);
  for (auto _ : state) {
    const cluster::Cluster c = cluster::compute_cluster(in);
    const auto work = cluster::work_list(c, cluster::GroupBy::kUser, 5);
    benchmark::DoNotOptimize(cluster::json_report(c, work, cluster::GroupBy::kUser).size());
  }
  state.counters["jobs_per_s"] = benchmark::Counter(
      static_cast<double>(m.jobs) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["input_bytes"] = static_cast<double>(m.input_bytes);
  state.counters["peak_rss_bytes"] = rss;
  state.counters["peak_rss_over_input"] = rss / static_cast<double>(m.input_bytes);
  state.counters["threads"] = omp_get_max_threads();
}
BENCHMARK(BM_ClusterMonthFromSummaries)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(2);

struct Logs {
  fs::path dir;
  std::string text;  // all logs concatenated, for the ceiling
};

// 48 jobs of 8 GPUs with raw event logs (a day each at 10 s steps: about 20,000 events per job).
const Logs& logs() {
  static const Logs l = [] {
    Logs out;
    out.dir = fs::temp_directory_path() / ("sdc-fleet-bench-logs-" + std::to_string(::getpid()));
    fs::create_directories(out.dir);
    temporary_dirs.push_back(out.dir);
    std::mt19937_64 rng(5);
    nlohmann::json jobs = nlohmann::json::array();
    for (int64_t id = 1; id <= 48; ++id) {
      sdc::goodput::SimParams p;
      p.seed = static_cast<uint64_t>(id);
      p.start_ns = (kT0 + id * 86400) * kNsPerSecond;
      p.requeue_prob = 0;
      std::string log;
      int64_t first = -1, last = 0;
      sdc::goodput::simulate(p, [&](std::string_view line) {
        log.append(line);
        log += '\n';
        const int64_t t = nlohmann::json::parse(line)["t"].get<int64_t>();
        if (first < 0) first = t;
        last = t;
      });
      fs::create_directories(out.dir / std::to_string(id));
      std::ofstream(out.dir / std::to_string(id) / "events.rank0.jsonl") << log;
      out.text += log;
      jobs.push_back(
          record(id, 8, "COMPLETED", first / kNsPerSecond, first / kNsPerSecond, last / kNsPerSecond + 1, rng));
    }
    std::ofstream(out.dir / "sacct.json") << nlohmann::json{{"jobs", jobs}}.dump();
    return out;
  }();
  return l;
}

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// simdjson on-demand over every line on one core, touching every field: its CPU seconds (the machine
// is shared: wall time would measure the neighbours).
double simdjson_cpu_seconds(const simdjson::padded_string& padded) {
  simdjson::ondemand::parser parser;
  uint64_t sink = 0;
  const double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  const char* p = padded.data();
  const char* end = p + padded.size();
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const size_t len = static_cast<size_t>((nl ? nl : end) - p);
    simdjson::ondemand::document doc;
    if (parser.iterate(p, len, static_cast<size_t>(end - p) + simdjson::SIMDJSON_PADDING).get(doc) ==
        simdjson::SUCCESS) {
      simdjson::ondemand::object obj;
      if (doc.get_object().get(obj) == simdjson::SUCCESS) {
        for (auto field : obj) {
          std::string_view raw;
          if (field.value().raw_json_token().get(raw) == simdjson::SUCCESS) sink += raw.size();
        }
      }
    }
    p += len + 1;
  }
  benchmark::DoNotOptimize(sink);
  return cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
}

cluster::ClusterInputs logs_inputs(const fs::path& dir) {
  cluster::ClusterInputs in;
  in.sacct_path = (dir / "sacct.json").string();
  in.logs_template = (dir / "{job_id}/events.rank*.jsonl").string();
  return in;
}

// The cluster's CPU time on all threads against simdjson's on one core, each iteration measuring
// both on the same bytes, so that both see the same load from the neighbours. The ratio is the
// median of the iterations' (a neighbour's burst moves one iteration, not the figure), with the
// lowest and highest beside it.
void BM_ClusterFromLogs(benchmark::State& state) {
  const Logs& l = logs();
  const cluster::ClusterInputs in = logs_inputs(l.dir);
  const simdjson::padded_string padded(l.text);
  const double rss = fresh_process_peak_rss("logs", l.dir);
  double cluster_cpu = 0;
  std::vector<double> ratios;
  for (auto _ : state) {
    const double simdjson_cpu = simdjson_cpu_seconds(padded);
    const double t0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    benchmark::DoNotOptimize(cluster::compute_cluster(in).total.wall);
    const double cpu = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - t0;
    cluster_cpu += cpu;
    ratios.push_back(simdjson_cpu / cpu);
  }
  std::sort(ratios.begin(), ratios.end());
  const double bytes = static_cast<double>(l.text.size()) * static_cast<double>(state.iterations());
  state.counters["bytes_per_s_per_core"] = bytes / cluster_cpu;
  state.counters["vs_simdjson_parse_per_core"] = ratios[ratios.size() / 2];
  state.counters["vs_simdjson_lowest"] = ratios.front();
  state.counters["vs_simdjson_highest"] = ratios.back();
  state.counters["input_bytes"] = static_cast<double>(l.text.size());
  state.counters["peak_rss_bytes"] = rss;
  state.counters["peak_rss_over_input"] = rss / static_cast<double>(l.text.size());
  state.counters["threads"] = omp_get_max_threads();
}
BENCHMARK(BM_ClusterFromLogs)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(9);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--memory-of") {  // the child of fresh_process_peak_rss
    const bool logs = std::string(argv[2]) == "logs";
    const bool balanced =
        cluster::compute_cluster(logs ? logs_inputs(argv[3]) : month_inputs(argv[3])).total.balanced();
    std::printf("%ld\n", own_peak_rss_kib());
    return balanced ? 0 : 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (const fs::path& dir : temporary_dirs) fs::remove_all(dir);
  return 0;
}
