// A node's cost of writing its rows into the fleet store against writing its JSON report, for the
// same run, in the same process (docs/fleet.md: the goal is no more).
//
// The run: a standard qualify of an 8-GPU node, as its report would hold it: 8 devices x 80 probes
// (digests on the deterministic ones, library and algorithm parameters on the GEMMs), one 60 s
// gemm.burn per GPU with a sample a second; with_failure: one memory probe failed with 16 mismatch
// records (so the rows are three files, results, devices and sites; two without).
//
// BM_Serialise: the text alone, on one core: report_json(report).dump(2) (what qualify --json
// writes) against store_files(report) (every table's rows); ratio = rows time / report time.
// BM_Publish: the same, written as each is written on a node: the report by write_file_atomically,
// the rows by publish_store_files (a file per table, synced together and renamed), into
// SDC_STORE_BENCH_DIR (default the temporary directory; point it at the node's state disk to count
// its fsyncs); ratio as above.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "fleet/store_writer.hpp"
#include "host/atomic_file.hpp"

namespace {

using Clock = std::chrono::steady_clock;

sdc::RunReport node_run(bool with_failure) {
  sdc::RunReport r;
  r.mode = "qualify";
  r.host = "gpu-node-0421";
  r.seed = 0x9e3779b97f4a7c15ull;
  r.level = sdc::Level::kStandard;
  r.started_at = "2026-12-01T15:00:00Z";
  for (int g = 0; g < 8; ++g) {
    sdc::DeviceIdentity d;
    d.backend = "cuda";
    d.index = g;
    d.name = "NVIDIA H100 80GB HBM3";
    d.uuid = "GPU-0000000" + std::to_string(g) + "-1111-2222-3333-444444444444";
    d.pci_bus_id = "00000000:" + std::to_string(18 + g) + ":00.0";
    d.compute_units = 132;
    d.compute_capability = "9.0";
    d.memory_bytes = 85899345920ull;
    d.driver_version = "550.54.15";
    d.runtime_version = "12.4";
    r.devices.push_back(d);
    for (int p = 0; p < 80; ++p) {
      sdc::ProbeResult x;
      x.probe = (p % 4 == 0 ? "mem.probe" : p % 4 == 1 ? "alu.probe" : "gemm.exact.probe") + std::to_string(p);
      x.device_index = g;
      x.device_uuid = d.uuid;
      x.report.checked = 1ull << 24;
      x.duration_s = 0.5 + p * 0.01 + g * 1e-4;
      x.bytes = 1ull << 30;
      x.flops = 1e12;
      x.seed = r.seed ^ static_cast<uint64_t>(p);
      if (p % 4 != 0) x.digest = sdc::Digest128{static_cast<uint64_t>(p), 7};
      if (p % 4 >= 2) x.params = {{"library_version", "cuBLAS 12.4.5"}, {"algorithm", "tile 128x256x64"}, {"m", 4096}};
      r.results.push_back(std::move(x));
    }
    sdc::ProbeResult burn;
    burn.probe = "gemm.burn.bf16";
    burn.device_index = g;
    burn.device_uuid = d.uuid;
    burn.report.checked = 1ull << 30;
    burn.duration_s = 60;
    nlohmann::json samples = nlohmann::json::array();
    for (int s = 0; s < 60; ++s) {
      samples.push_back({{"temperature_c", 60.0 + s * 0.3},
                         {"sm_clock_mhz", 1980.0},
                         {"power_w", 650.0 + s},
                         {"power_limit_w", 700.0},
                         {"clock_event_reasons", nlohmann::json::array()},
                         {"second", s},
                         {"phase", "sustained"},
                         {"under_load", s > 0}});
    }
    burn.params = {{"samples", std::move(samples)}, {"wrong_results", nlohmann::json::array()}};
    r.results.push_back(std::move(burn));
  }
  if (!with_failure) return r;
  sdc::ProbeResult& failed = r.results[4];
  failed.outcome = sdc::Outcome::kFail;
  failed.report.mismatches = 40;
  for (uint64_t k = 0; k < 16; ++k) failed.report.records.push_back({k * 4096, 0, 1ull << (k % 64), 64, -1, -1, false});
  return r;
}

std::string bench_dir() {
  const char* dir = std::getenv("SDC_STORE_BENCH_DIR");
  const std::filesystem::path base = dir ? dir : std::filesystem::temp_directory_path().string();
  return (base / ("fleet_store_bench_" + std::to_string(::getpid()))).string();
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void report_counters(benchmark::State& state, double report_s, double rows_s, size_t report_bytes, size_t rows_bytes,
                     size_t results) {
  const double n = static_cast<double>(state.iterations());
  state.counters["report_us"] = report_s / n * 1e6;
  state.counters["rows_us"] = rows_s / n * 1e6;
  state.counters["ratio"] = rows_s / report_s;  // the goal: at most 1
  state.counters["report_bytes"] = static_cast<double>(report_bytes);
  state.counters["rows_bytes"] = static_cast<double>(rows_bytes);
  state.counters["results"] = static_cast<double>(results);
}

void BM_Serialise(benchmark::State& state) {
  const sdc::RunReport run = node_run(true);
  double report_s = 0, rows_s = 0;
  size_t report_bytes = 0, rows_bytes = 0;
  for (auto _ : state) {
    auto t = Clock::now();
    const std::string report = sdc::report_json(run).dump(2) + "\n";
    report_s += seconds_since(t);
    t = Clock::now();
    const std::vector<sdc::StoreFile> files = sdc::store_files(run);
    rows_s += seconds_since(t);
    report_bytes = report.size();
    rows_bytes = 0;
    for (const auto& f : files) rows_bytes += f.rows.size();
    benchmark::DoNotOptimize(report.data());
    benchmark::DoNotOptimize(files.data());
  }
  report_counters(state, report_s, rows_s, report_bytes, rows_bytes, run.results.size());
}
BENCHMARK(BM_Serialise)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Publish(benchmark::State& state) {
  const sdc::RunReport run = node_run(state.range(0) == 1);
  const std::string dir = bench_dir();
  std::filesystem::create_directories(dir);
  sdc::prepare_store(dir + "/store");
  double report_s = 0, rows_s = 0;
  size_t report_bytes = 0, rows_bytes = 0;
  for (auto _ : state) {
    auto t = Clock::now();
    const std::string report = sdc::report_json(run).dump(2) + "\n";
    sdc::write_file_atomically(dir + "/report.json", report);
    report_s += seconds_since(t);
    t = Clock::now();
    const std::vector<sdc::StoreFile> files = sdc::store_files(run);
    sdc::publish_store_files(dir + "/store", files);
    rows_s += seconds_since(t);
    report_bytes = report.size();
    rows_bytes = 0;
    for (const auto& f : files) rows_bytes += f.rows.size();
  }
  report_counters(state, report_s, rows_s, report_bytes, rows_bytes, run.results.size());
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_Publish)->ArgName("with_failure")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
