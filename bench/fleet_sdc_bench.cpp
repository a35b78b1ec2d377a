// Fleet SDC ingest against the simdjson parse ceiling, on the same reports in the same run.
//
// A simulated fleet of 8-GPU nodes, two GPU models, hourly sweeps with the fleet seed of each hour:
// every pass of a node is one JSON report with one probe per GPU (so GPUs x hours results). Planted:
// two lemon GPUs (a failure rate 50,000 times the fleet's), and one GPU that hands back a consistent
// wrong digest on the deterministic probes while passing its own checks.
//
// BM_IngestVsParse: one core; results/s of ingest_report_text (parse, extract, tally) and of
// simdjson's DOM parse alone over the same reports, and their ratio.
// BM_FleetAtScale: SDC_FLEET_BENCH_GPUS x SDC_FLEET_BENCH_HOURS (default 20,000 x 720, about 14 M
// results) generated and ingested on every core, then analysed: results/s per core against the parse
// ceiling per core (thread CPU time, both), the process's peak memory, and whether the planted devices were found.
#include <benchmark/benchmark.h>
#include <simdjson.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/fleet_sim.hpp"
#include "fleet/fleet_sdc_analysis.hpp"
#include "fleet/fleet_sdc_ingest.hpp"
#include "kernels/common/random.hpp"
#include "probes/result.hpp"
#include "scheduler/consensus/fleet_seed.hpp"

namespace {

using namespace sdc::bench;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// This thread's CPU time: the machine is shared, so wall time would count other processes' turns.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The parse ceiling: simdjson's DOM parse of each report, nothing else.
double parse_seconds(const std::vector<std::string>& reports) {
  simdjson::dom::parser parser;
  size_t sink = 0;
  const double t0 = thread_seconds();
  for (const auto& r : reports) {
    simdjson::dom::element doc;
    if (parser.parse(r.data(), r.size()).get(doc) == simdjson::SUCCESS) sink += doc.is_object();
  }
  benchmark::DoNotOptimize(sink);
  return thread_seconds() - t0;
}

double ingest_seconds(const std::vector<std::string>& reports, sdc::FleetTally& tally) {
  const double t0 = thread_seconds();
  for (const auto& r : reports) sdc::ingest_report_text("bench", r, tally);
  return thread_seconds() - t0;
}

// A sample of the fleet: 2,000 GPUs, 24 hours.
const std::vector<std::string>& sample(uint64_t& results) {
  static uint64_t count = 0;
  static const std::vector<std::string> reports = [] {
    std::vector<std::string> out;
    std::mt19937_64 rng(1);
    const int gpus = 2000;
    for (int h = 0; h < 24; ++h) {
      for (int n = 0; n < gpus / kGpusPerNode; ++n) out.push_back(node_report(n, h, gpus, planted(gpus), rng));
    }
    count = static_cast<uint64_t>(gpus) * 24;
    return out;
  }();
  results = count;
  return reports;
}

void BM_IngestVsParse(benchmark::State& state) {
  uint64_t results = 0;
  const auto& reports = sample(results);
  double parse_s = 1e30, ingest_s = 1e30;
  for (auto _ : state) {
    parse_s = std::min(parse_s, parse_seconds(reports));
    sdc::FleetTally tally;
    ingest_s = std::min(ingest_s, ingest_seconds(reports, tally));
    benchmark::DoNotOptimize(tally.results);
  }
  state.counters["parse_results_per_s"] = static_cast<double>(results) / parse_s;
  state.counters["ingest_results_per_s"] = static_cast<double>(results) / ingest_s;
  state.counters["ingest_over_parse"] = parse_s / ingest_s;
}
BENCHMARK(BM_IngestVsParse)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_FleetAtScale(benchmark::State& state) {
  const int gpus = env_int("SDC_FLEET_BENCH_GPUS", 20000);
  const int hours = env_int("SDC_FLEET_BENCH_HOURS", 720);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const Planted p = planted(gpus);
  const int nodes = (gpus + kGpusPerNode - 1) / kGpusPerNode;
  for (auto _ : state) {
    // Each thread generates a day of its nodes' reports at a time (untimed), then ingests them.
    std::vector<sdc::FleetTally> tallies(threads);
    std::vector<double> ingest_s(threads, 0), parse_s(threads, 0);
    std::atomic<int> next{0};
    auto work = [&](unsigned t) {
      std::mt19937_64 rng(100 + t);
      for (int n; (n = next++) < nodes;) {
        std::vector<std::string> reports;
        for (int h = 0; h < hours; ++h) reports.push_back(node_report(n, h, gpus, p, rng));
        if (n % 16 == 0) parse_s[t] += parse_seconds(reports);  // the ceiling, on a sixteenth of the nodes
        ingest_s[t] += ingest_seconds(reports, tallies[t]);
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
    const double t0 = thread_seconds();  // merging and analysing run on this thread alone
    for (unsigned t = 1; t < threads; ++t) tallies[0].merge(std::move(tallies[t]));
    const sdc::FleetAnalysis a = sdc::analyze_fleet(tallies[0], {});
    const double analyse_s = thread_seconds() - t0;
    double ingest = 0, parse = 0;
    for (unsigned t = 0; t < threads; ++t) {
      ingest += ingest_s[t];
      parse += parse_s[t];
    }
    const double results = static_cast<double>(tallies[0].results);
    const double parsed = results * (static_cast<double>((nodes + 15) / 16) / nodes);
    bool wrong_found = false, lemons_found = true, wrong_is_lemon = false;
    for (const auto& l : a.lemon_devices) wrong_is_lemon = wrong_is_lemon || l.device->uuid == uuid(p.wrong);
    for (const auto& s : a.suspects) wrong_found = wrong_found || s.device->uuid == uuid(p.wrong);
    for (int lemon : {p.lemon_a, p.lemon_b}) {
      bool found = false;
      for (const auto& l : a.lemon_devices) found = found || l.device->uuid == uuid(lemon);
      lemons_found = lemons_found && found;
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    state.counters["results"] = results;
    state.counters["vote_keys"] = static_cast<double>(tallies[0].votes.size());
    state.counters["ingest_results_per_s_per_core"] = results / ingest;
    state.counters["parse_results_per_s_per_core"] = parsed / parse;
    state.counters["ingest_over_parse"] = (results / ingest) / (parsed / parse);
    state.counters["analyse_s"] = analyse_s;
    state.counters["peak_rss_mib"] = static_cast<double>(usage.ru_maxrss) / 1024;
    state.counters["suspects"] = static_cast<double>(a.suspects.size());
    state.counters["wrong_device_found"] = wrong_found;
    state.counters["lemon_devices"] = static_cast<double>(a.lemon_devices.size());
    state.counters["planted_lemons_found"] = lemons_found;
    // Its lost votes are failures too, so the wrong-digest device is a lemon as well.
    state.counters["wrong_device_is_lemon"] = wrong_is_lemon;
  }
}
BENCHMARK(BM_FleetAtScale)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
