// Ingest plus classification of a simulated event log, in events per second on one core, against
// two ceilings measured in the same run on the same bytes: simdjson parsing every line and touching
// every field (all a parser can do), and memcpy (all a reader can do). A second benchmark reads a
// short log many times: what each read costs beyond its parsing. A third runs `sdcprobe goodput
// --json` on the log as a file: the command's whole read of it, with what it measures and its JSON.
#include <benchmark/benchmark.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "goodput/analyze.hpp"
#include "goodput/commands.hpp"
#include "goodput/simulator.hpp"

namespace {

using sdc::goodput::SimParams;

struct Log {
  std::string text;
  uint64_t events = 0;
};

// 54 days of a 16,384-GPU run at Llama 3's failure rate: about 0.9 million events.
const Log& simulated_log() {
  static const Log log = [] {
    SimParams p;
    p.seed = 7;
    p.duration_ns = 54 * sdc::goodput::kNsPerDay;
    p.faults_per_day = 419.0 / 54.0;
    p.sdc_per_day = 0.2;
    Log out;
    out.events = sdc::goodput::simulate(p, [&](std::string_view line) {
                   out.text.append(line);
                   out.text += '\n';
                 }).events;
    return out;
  }();
  return log;
}

template <typename F>
double best_seconds(F&& f) {
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Ceiling 1: simdjson on-demand over every line, reading every field's raw token.
double simdjson_events_per_second(const Log& log) {
  simdjson::padded_string padded(log.text);
  simdjson::ondemand::parser parser;
  uint64_t sink = 0;
  const double s = best_seconds([&] {
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
  });
  benchmark::DoNotOptimize(sink);
  return static_cast<double>(log.events) / s;
}

// Ceiling 2: copying the bytes once.
double memcpy_bytes_per_second(const Log& log) {
  std::vector<char> dst(log.text.size());
  const double s = best_seconds([&] {
    std::memcpy(dst.data(), log.text.data(), log.text.size());
    benchmark::ClobberMemory();
  });
  return static_cast<double>(log.text.size()) / s;
}

void BM_GoodputIngest(benchmark::State& state) {
  const Log& log = simulated_log();
  const double parse_ceiling = simdjson_events_per_second(log);
  const double copy_ceiling = memcpy_bytes_per_second(log);
  for (auto _ : state) {
    std::istringstream in(log.text);
    benchmark::DoNotOptimize(sdc::goodput::analyze(in).breakdown.productive_ns);
  }
  const double events = static_cast<double>(log.events) * static_cast<double>(state.iterations());
  const double bytes = static_cast<double>(log.text.size()) * static_cast<double>(state.iterations());
  state.counters["events_per_s"] = benchmark::Counter(events, benchmark::Counter::kIsRate);
  state.counters["bytes_per_s"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate);
  // The fraction of each ceiling reached, from a best-of-5 timing like the ceilings'.
  const double ingest_s = best_seconds([&] {
    std::istringstream in(log.text);
    benchmark::DoNotOptimize(sdc::goodput::analyze(in).breakdown.productive_ns);
  });
  state.counters["vs_simdjson_parse"] = static_cast<double>(log.events) / ingest_s / parse_ceiling;
  state.counters["vs_memcpy"] = static_cast<double>(log.text.size()) / ingest_s / copy_ceiling;
  state.counters["simdjson_events_per_s"] = parse_ceiling;
  state.counters["events"] = static_cast<double>(log.events);
}
BENCHMARK(BM_GoodputIngest)->Unit(benchmark::kMillisecond)->UseRealTime();

// A short log (a job's first 64 events) read many times: what a reader costs per call on top of
// parsing, against simdjson over the same bytes in the same run.
void BM_GoodputIngestSmall(benchmark::State& state) {
  const Log& full = simulated_log();
  Log log;
  size_t end = 0;
  for (; log.events < 64; ++log.events) end = full.text.find('\n', end) + 1;
  log.text = full.text.substr(0, end);
  constexpr int kReads = 200;
  auto read_all = [&] {
    for (int i = 0; i < kReads; ++i) {
      std::istringstream in(log.text);
      benchmark::DoNotOptimize(sdc::goodput::analyze(in).breakdown.productive_ns);
    }
  };
  double parse_ceiling = 0;
  for (int i = 0; i < 50; ++i) parse_ceiling = std::max(parse_ceiling, simdjson_events_per_second(log));
  for (auto _ : state) read_all();
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(log.events * kReads) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  const double ingest_s = best_seconds(read_all) / kReads;
  state.counters["vs_simdjson_parse"] = static_cast<double>(log.events) / ingest_s / parse_ceiling;
}
BENCHMARK(BM_GoodputIngestSmall)->Unit(benchmark::kMillisecond)->UseRealTime();

// The command on the log as a file, against simdjson over the same bytes in the same run.
void BM_GoodputCommandJson(benchmark::State& state) {
  const Log& log = simulated_log();
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("sdc-goodput-bench-" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream(path, std::ios::binary) << log.text;
  sdc::goodput::GoodputOptions options;
  options.events_paths = {path.string()};
  options.json = true;
  auto run = [&] {
    std::ostringstream out;
    sdc::goodput::goodput_command(options, out);
    benchmark::DoNotOptimize(out.str().size());
  };
  const double parse_ceiling = simdjson_events_per_second(log);
  for (auto _ : state) run();
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(log.events) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["vs_simdjson_parse"] = static_cast<double>(log.events) / best_seconds(run) / parse_ceiling;
  std::filesystem::remove(path);
}
BENCHMARK(BM_GoodputCommandJson)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
