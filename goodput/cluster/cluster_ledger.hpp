// The cluster ledger: every job's GPU-time in a window, labelled by the job's own ledger where it has
// one (its event logs, or a summary from `sdcprobe goodput --json`) and by Slurm's accounting alone
// where it has none, summed exactly in integer GPU-nanoseconds (docs/goodput.md, "Cluster").
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "goodput/breakdown.hpp"
#include "goodput/cluster/cluster_health.hpp"
#include "goodput/cluster/cluster_sacct.hpp"
#include "goodput/cluster/cluster_summary.hpp"
#include "goodput/ledger.hpp"
#include "goodput/tally.hpp"
#include "host/progress.hpp"

namespace sdc::goodput::cluster {

// GPU-nanoseconds: 10,000 GPUs for 30 days is 2.6e19, past int64.
using GpuNs = __int128;
std::string to_string(GpuNs v);
double gpu_hours(GpuNs v);

// Where the GPU-time of jobs without a ledger went, as far as Slurm says: runs that ended in failure
// (ended_in_failure), and the other runs (completed, cancelled, still running), whose split into
// productive time and losses is not known.
enum class Unlabelled : uint8_t { kFailedRun, kOtherRun };
inline constexpr size_t kUnlabelledCount = 2;
std::string_view unlabelled_key(Unlabelled u);    // "uninstrumented_failed_run"
std::string_view unlabelled_title(Unlabelled u);  // "uninstrumented run, ended in failure"

struct ClusterBreakdown {
  GpuNs wall = 0;
  GpuNs productive = 0;
  std::array<GpuNs, goodput::kCategoryCount> ns{};
  std::array<GpuNs, goodput::kCategoryCount> sdc_ns{};
  std::array<GpuNs, kUnlabelledCount> unlabelled{};
  GpuNs instrumented_wall = 0;  // the wall time of jobs labelled by their own ledger

  GpuNs& operator[](goodput::Category c) { return ns[static_cast<size_t>(c)]; }
  GpuNs operator[](goodput::Category c) const { return ns[static_cast<size_t>(c)]; }
  GpuNs& operator[](Unlabelled u) { return unlabelled[static_cast<size_t>(u)]; }
  GpuNs operator[](Unlabelled u) const { return unlabelled[static_cast<size_t>(u)]; }
  // wall - productive: the five categories plus the unlabelled runs.
  GpuNs gap() const { return wall - productive; }
  GpuNs sdc_lost() const;
  // productive + categories + unlabelled == wall, exactly.
  bool balanced() const;
  // Productive over all wall time: unlabelled runs count as not known to be productive.
  double ettr() const;
  void add(const ClusterBreakdown& o);
  void add_ledger(const goodput::Breakdown& b, int64_t gpus);
};

// Unix seconds; [since, until).
struct Window {
  int64_t since_s = 0;
  int64_t until_s = 0;
};

enum class JobSource : uint8_t { kSummary, kLogs, kSacct };

struct JobResult {
  size_t job = 0;  // index into the accounting's jobs
  JobSource source = JobSource::kSacct;
  bool crosses_window = false;        // has a ledger but crosses the window's edge: counted from sacct alone
  bool logs_matched_nothing = false;  // --logs was given, no summary, and its template matched no file
  int64_t gpus = 0;
  ClusterBreakdown gpu;
  std::optional<goodput::Tally> tally;  // from its logs or its summary's "measured"
  std::vector<JobHang> hangs;           // from its logs' flight-recorder dumps or its summary's "hangs"
};

struct ClusterInputs {
  std::string sacct_path;
  // A path template with {job_id}, expanded as a glob per job; no match (its folder missing
  // included): the job has no logs, and is listed in Cluster::logs_matched_nothing.
  std::string logs_template;
  std::vector<std::string> summaries;  // files or directories of *.json
  std::vector<std::pair<std::string, std::string>> summary_texts;  // (where, text): from the fleet store
  std::vector<std::string> health;     // `sdcprobe health --json` reports of the nodes' GPUs
  std::optional<int64_t> since_s, until_s;
  std::optional<int64_t> since_before_until_s;  // --since 7d: that long before the window's end
  goodput::LedgerOptions ledger;
};

struct Incidents {
  int64_t count = 0;         // faults and SDC detections in the instrumented jobs inside the window
  double gpu_days = 0;       // their GPU-time, in GPU-days
  double per_gpu_day = 0;    // count / gpu_days
  double low = 0, high = 0;  // 95% interval (exact Poisson)
};

struct Cluster {
  Window window;
  std::vector<ClusterJob> jobs;
  std::vector<JobResult> results;  // one per job with GPUs and time in the window
  ClusterBreakdown total;
  // UTC day (Unix seconds of its midnight) -> GPU-time. Accounting time falls in the day it was
  // spent; a ledger's, in the day its job ended.
  std::map<int64_t, ClusterBreakdown> days;
  Incidents incidents;
  int64_t jobs_without_gpus = 0;
  int64_t summaries_without_record = 0;
  std::vector<int64_t> logs_matched_nothing;  // ids of the counted jobs whose --logs matched no file
  GpuFaults gpu_faults;                       // from the health reports
};

// Throws InputError naming the file and line or `jobs[i]` on bad input. `progress`: the summaries read,
// then the jobs done of the accounting's, with the log files read.
Cluster compute_cluster(const ClusterInputs& inputs, Progress* progress = nullptr);

// The exact 95% Poisson interval of a count (Garwood), as a count.
std::pair<double, double> poisson_interval(int64_t count);

// The ledger part of the accounting: the job's queue and runs inside the window, weighted by each
// record's GPUs (exposed for the tests).
ClusterBreakdown sacct_breakdown(const ClusterJob& job, const Window& window,
                                 std::map<int64_t, ClusterBreakdown>* days = nullptr);

}  // namespace sdc::goodput::cluster
