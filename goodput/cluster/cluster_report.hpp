// The cluster ledger shown: the work list (losses by owner, then by user, account, partition or job,
// each with what the planner would change), as text, Markdown, JSON, SVG and a Prometheus textfile.
#pragma once

#include <string>
#include <vector>

#include "goodput/cluster/cluster_ledger.hpp"

namespace sdc::goodput::cluster {

enum class GroupBy : uint8_t { kUser, kAccount, kPartition, kJob };
GroupBy parse_group_by(const std::string& text);  // throws InputError
std::string_view group_by_name(GroupBy by);

// What the planner would change for one job's rework: the checkpoint interval `sdcprobe plan` picks
// for the job's measured save time and the window's failure rate (and its 95% interval), and the
// GPU-hours that interval would have saved, by the first-order model: rework scales with the
// interval, blocking saves with its inverse.
struct Advice {
  bool available = false;
  std::string why_not;  // when not available
  double save_s = 0, interval_now_s = 0;
  double interval_s = 0, interval_low_s = 0, interval_high_s = 0;  // low: at the high failure rate
  double saved_gpu_hours = 0, saved_low = 0, saved_high = 0;
};

struct GroupItem {
  std::string name;  // user, account, partition, or job id
  GpuNs gpu_ns = 0, sdc_gpu_ns = 0;
  std::optional<Advice> advice;  // rework of a job
};

// A node by what its hangs cost: the GPU-time of the detection & teardown of each hang that named
// one of its ranks the culprit (a hang of several culprits is shared among them).
struct HangNode {
  std::string host;  // "(unknown)" where no log said
  GpuNs gpu_ns = 0;
  int64_t hangs = 0;
  std::vector<std::string> gpus;    // its culprit devices: "GPU-8f2c... 00000000:19:00.0", or "cpu"
  std::vector<std::string> faults;  // those of them in fault in the health reports: "GPU-8f2c...: xid"
  bool hardware() const { return !faults.empty(); }
};

struct WorkItem {
  std::string key, title, owner, lever;
  GpuNs gpu_ns = 0, sdc_gpu_ns = 0;
  std::vector<GroupItem> top;  // largest first
  // Blocking overhead: the measured time of saves, data waits, evals and probes (GPU-ns).
  std::array<GpuNs, 4> blocking{};
  // Detection & teardown: what the hangs cost, and the `top` nodes that cost most.
  GpuNs hang_gpu_ns = 0;
  int64_t hangs = 0;
  std::vector<HangNode> nodes;
};

// Loss categories and unlabelled run classes, largest first, each with its `top` largest groups.
std::vector<WorkItem> work_list(const Cluster& cluster, GroupBy by, size_t top);

std::string text_report(const Cluster& cluster, const std::vector<WorkItem>& work, GroupBy by);
std::string markdown_report(const Cluster& cluster, const std::vector<WorkItem>& work, GroupBy by);
std::string json_report(const Cluster& cluster, const std::vector<WorkItem>& work, GroupBy by);
// A stacked bar per day (per week past 62 days) and the top items of the work list.
std::string svg_report(const Cluster& cluster, const std::vector<WorkItem>& work);
// The cluster's and each partition's ETTR and GPU-seconds per category.
std::string prometheus_report(const Cluster& cluster);

}  // namespace sdc::goodput::cluster
