// Seeded mutation fuzzing of the cluster ledger's two parsers: sacct's JSON of a whole cluster and a
// job's summary. Every case is accepted with a balanced cluster ledger, or refused with an InputError
// naming the file; no other exception, crash or hang. Replays exactly from (seed, case).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "goodput/cluster/cluster_ledger.hpp"
#include "host/error.hpp"
#include "tests/fuzz/mutate.hpp"

namespace sdc::goodput::cluster {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kSeed = 20261201;
constexpr int kCases = 800;

const char* kSacct = R"({"jobs": [
 {"job_id": 7, "user": "ann", "account": "lab", "partition": "a", "state": {"current": ["REQUEUED"]},
  "time": {"eligible": 1798761600, "start": 1798761700, "end": 1798765300},
  "tres": {"allocated": [{"type": "cpu", "name": "", "count": 8}, {"type": "gres", "name": "gpu", "count": 4}]}},
 {"job_id": 7, "user": "ann", "account": "lab", "partition": "a", "state": {"current": "COMPLETED"},
  "time": {"eligible": {"set": true, "infinite": false, "number": 1798765300}, "start": 1798765400, "end": 1798769000},
  "tres": {"allocated": [{"type": "gres", "name": "gpu:a100", "count": 4}]}},
 {"job_id": 8, "user": "ben", "account": "lab", "partition": "b", "state": {"current": "RUNNING"},
  "time": {"eligible": 1798761600, "start": 1798762000, "end": {"set": false, "number": 0}},
  "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}},
 {"job_id": 9, "user": "cy", "account": "x", "partition": "b", "state": {"current": "PENDING"},
  "time": {"eligible": 1798762000, "start": 0, "end": 0},
  "tres": {"allocated": [], "requested": [{"type": "gres", "name": "gpu", "count": 16}]}}
]})";

const char* kSummary = R"({"wall_ns": 7300000000000, "productive_ns": 7000000000000, "ettr": 0.95,
 "sdc_lost_ns": 0, "categories": {"queue": {"ns": 200000000000, "sdc_ns": 0},
 "detection_teardown": {"ns": 0, "sdc_ns": 0}, "restart_warmup": {"ns": 100000000000, "sdc_ns": 0},
 "rework": {"ns": 0, "sdc_ns": 0}, "blocking_overhead": {"ns": 0, "sdc_ns": 0}},
 "diagnostics": {"gaps": {"count": 0, "ns": 0}, "rollbacks": 0, "events": 10, "skipped_lines": 0},
 "job_id": 7, "measured": {"saves": {"count": 3, "ns": 90000000000}, "data_waits": {"count": 0, "ns": 0},
 "evals": {"count": 0, "ns": 0}, "probes": {"count": 0, "ns": 0}, "save_interval_ns": 1800000000000,
 "incidents": 1}})";

const std::vector<std::string> kWords = {"\"job_id\"",  "\"time\"",     "\"start\"",   "\"end\"",  "\"eligible\"",
                                         "\"set\"",     "\"number\"",   "\"tres\"",    "\"gres\"", "\"gpu\"",
                                         "\"count\"",   "\"state\"",    "\"current\"", "\"ns\"",   "\"sdc_ns\"",
                                         "\"wall_ns\"", "\"measured\"", "-1",          "1e3",      "null"};

TEST(ClusterFuzz, MutatedInputsAreAcceptedBalancedOrRefusedByName) {
  const fs::path dir = fs::temp_directory_path() / ("sdc-fleet-fuzz-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string sacct = (dir / "sacct.json").string(), summary = (dir / "7.json").string();
  fuzz::Mutator m(kSeed);
  int accepted = 0;
  for (int i = 0; i < kCases; ++i) {
    const bool mutate_sacct = i % 2 == 0;
    std::ofstream(sacct) << (mutate_sacct ? m.mutate(kSacct, kWords) : std::string(kSacct));
    std::ofstream(summary) << (mutate_sacct ? std::string(kSummary) : m.mutate(kSummary, kWords));
    ClusterInputs in;
    in.sacct_path = sacct;
    in.summaries = {summary};
    try {
      const Cluster c = compute_cluster(in);
      EXPECT_TRUE(c.total.balanced()) << "seed " << kSeed << " case " << i;
      ++accepted;
    } catch (const InputError& e) {
      const std::string what = e.what();
      const bool named = what.find(mutate_sacct ? sacct : summary) != std::string::npos ||
                         what.find("window is empty") != std::string::npos;
      EXPECT_TRUE(named) << "seed " << kSeed << " case " << i << ": " << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << kSeed << " case " << i << ": not an InputError: " << e.what();
    }
  }
  EXPECT_GT(accepted, 0);  // the mutations leave some inputs valid: the check above ran both ways
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sdc::goodput::cluster
