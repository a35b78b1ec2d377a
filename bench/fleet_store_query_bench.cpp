// `fleet sdc` over the fleet store against `fleet sdc` over the same results as JSON files, as an
// operator runs them: fresh processes of the real binary, in one run on this machine.
//
// The fleet (bench/fleet_sim.hpp): SDC_FLEET_BENCH_GPUS GPUs (default 20,000) swept six times a day
// for SDC_FLEET_BENCH_DAYS days (default 30) with four probes each: 14.4 M results in 450,000
// reports. Each report is written as a JSON file and as the store's rows that `qualify --store`
// writes for it (the same bytes, without the node's fsync of each file). Then, timed:
//   files:   sdcprobe fleet sdc DIR/reports --json files.json
//   compact: PYTHON -m sdcprobe.fleet_engine compact --store DIR/store   (once a day, on a real store:
//            the landing files into Parquet, then each day's partial aggregates)
//   store:   sdcprobe fleet sdc --store DIR/store --json store.json       (embedded DuckDB: the days'
//            partial aggregates)
// Printed: each step's wall and CPU seconds and peak memory (its process tree's largest), the ratio
// store / files (goal: <= 0.25), and whether the two JSON reports are equal.
//
// Usage: fleet_store_query_bench DIR SDCPROBE PYTHON   (PYTHON: with duckdb; sdcprobe's package is
// taken from the source tree)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/fleet_sim.hpp"
#include "fleet/store_import.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sdc::bench;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

struct Step {
  double wall_s = 0, cpu_s = 0, max_rss_mib = 0;
  int status = 0;
};

// Runs `command` with /bin/sh from a fresh child, so that the children's usage it reports back
// (CPU time, the largest peak memory) is this step's alone.
Step timed(const std::string& command) {
  std::fflush(stdout);  // before the child's output
  int fds[2];
  if (pipe(fds) != 0) std::exit(2);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Step s;
    s.status = std::system(command.c_str());
    rusage r{};
    getrusage(RUSAGE_CHILDREN, &r);
    s.cpu_s = static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
              static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
    s.max_rss_mib = static_cast<double>(r.ru_maxrss) / 1024;
    if (write(fds[1], &s, sizeof s) != sizeof s) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  Step s;
  if (read(fds[0], &s, sizeof s) != sizeof s) std::exit(2);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

void print(const char* name, const Step& s) {
  std::printf("%-8s %8.1f s wall %8.1f s CPU %8.0f MiB peak  exit %d\n", name, s.wall_s, s.cpu_s, s.max_rss_mib,
              WIFEXITED(s.status) ? WEXITSTATUS(s.status) : -1);
}

// Writes the reports of nodes [first, last) and their store rows.
void generate(const fs::path& dir, int gpus, int days, int first, int last) {
  const Planted p = planted(gpus);
  constexpr int kSweepsPerDay = 6;
  for (int n = first; n < last; ++n) {
    std::mt19937_64 rng(static_cast<uint64_t>(n) + 1);
    const fs::path reports = dir / "reports" / ("node" + std::to_string(n));
    fs::create_directories(reports);
    for (int s = 0; s < days * kSweepsPerDay; ++s) {
      const std::string text = node_report(n, s, gpus, p, rng, 4, 86400 / kSweepsPerDay);
      const std::string name = "sweep" + std::to_string(s) + ".json";
      std::ofstream(reports / name) << text;
      for (const sdc::StoreFile& f : sdc::report_store_files(name, text)) {
        if (f.rows.empty()) continue;
        const fs::path folder = dir / "store" / f.table / ("day=" + f.day);
        fs::create_directories(folder);
        std::ofstream(folder / f.name) << f.rows;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: fleet_store_query_bench DIR SDCPROBE PYTHON\n");
    return 2;
  }
  const fs::path dir = argv[1];
  const std::string sdcprobe = argv[2], python = argv[3];
  const int gpus = env_int("SDC_FLEET_BENCH_GPUS", 20000), days = env_int("SDC_FLEET_BENCH_DAYS", 30);
  const int nodes = (gpus + kGpusPerNode - 1) / kGpusPerNode;
  fs::remove_all(dir);
  std::printf("fleet: %d GPUs on %d nodes, %d days of 6 sweeps, 4 probes: %lld results in %lld reports\n", gpus, nodes,
              days, 24LL * days * gpus, 6LL * days * nodes);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> writers;
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back(generate, dir, gpus, days, nodes * t / threads, nodes * (t + 1) / threads);
  }
  for (auto& w : writers) w.join();
  std::printf("generated in %.0f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  const std::string d = dir.string();
  const Step files = timed(sdcprobe + " fleet sdc " + d + "/reports/* --json " + d + "/files.json > /dev/null");
  print("files", files);
  const std::string engine = "PYTHONPATH=" SDC_SOURCE_DIR "/python SDCPROBE_PYTHON=" + python + " ";
  const Step compact = timed(engine + python + " -m sdcprobe.fleet_engine compact --store " + d + "/store");
  print("compact", compact);
  const Step store =
      timed(engine + sdcprobe + " fleet sdc --store " + d + "/store --json " + d + "/store.json > /dev/null");
  print("store", store);
  std::printf("store / files: %.2f wall (goal <= 0.25), %.2f CPU\n", store.wall_s / files.wall_s,
              store.cpu_s / files.cpu_s);
  const int same = std::system(("cmp -s " + d + "/files.json " + d + "/store.json").c_str());
  std::printf("the same JSON report: %s\n", same == 0 ? "yes" : "NO");
  return same == 0 ? 0 : 1;
}
