#include "goodput/cluster/cluster_ledger.hpp"

#include <glob.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <unordered_map>

#include "goodput/cluster/cluster_summary.hpp"
#include "goodput/merge.hpp"
#include "goodput/run_hangs.hpp"
#include "host/error.hpp"

namespace sdc::goodput::cluster {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kNsPerS = 1'000'000'000;
constexpr int64_t kSecondsPerDay = 86400;

// Where accounting time goes: a loss category (queue) or an unlabelled run class.
GpuNs& slot(ClusterBreakdown& b, std::optional<Unlabelled> run) { return run ? b[*run] : b[goodput::Category::kQueue]; }

// Adds the part of [begin_s, end_s) inside the window, weighted by `gpus`, to the queue (no `run`) or
// to the run class, in `b` and in the days it falls in.
void add_interval(int64_t begin_s, int64_t end_s, int64_t gpus, const Window& w, std::optional<Unlabelled> run,
                  ClusterBreakdown& b, std::map<int64_t, ClusterBreakdown>* days) {
  begin_s = std::max(begin_s, w.since_s);
  end_s = std::min(end_s, w.until_s);
  for (int64_t t = begin_s; t < end_s;) {
    const int64_t day = t - t % kSecondsPerDay;
    const int64_t next = std::min(end_s, day + kSecondsPerDay);
    const GpuNs v = static_cast<GpuNs>(next - t) * kNsPerS * gpus;
    b.wall += v;
    slot(b, run) += v;
    if (days) {
      ClusterBreakdown& d = (*days)[day];
      d.wall += v;
      slot(d, run) += v;
    }
    t = next;
  }
}

// A folder glob could not read, other than a missing one (a job without logs has no folder).
thread_local std::string unreadable_folder;
int on_glob_error(const char* path, int error) {
  if (error == ENOENT || error == ENOTDIR) return 0;
  unreadable_folder = std::string(path) + ": " + std::strerror(error);
  return 1;
}

// The files a template names for a job, sorted; none when the pattern matches nothing, its folder
// included. A folder that exists but cannot be read is an error.
std::vector<std::string> job_logs(const std::string& tmpl, int64_t job_id) {
  std::string pattern = tmpl;
  const std::string id = std::to_string(job_id);
  for (size_t at = pattern.find("{job_id}"); at != std::string::npos; at = pattern.find("{job_id}", at + id.size())) {
    pattern.replace(at, 8, id);
  }
  glob_t g{};
  unreadable_folder.clear();
  const int rc = ::glob(pattern.c_str(), 0, on_glob_error, &g);
  std::vector<std::string> paths;
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      if (fs::is_regular_file(g.gl_pathv[i])) paths.emplace_back(g.gl_pathv[i]);
    }
  }
  ::globfree(&g);
  if (rc != 0 && rc != GLOB_NOMATCH) {
    throw InputError("--logs: cannot read the files of " + pattern +
                     (unreadable_folder.empty() ? "" : " (" + unreadable_folder + ")"));
  }
  return paths;
}

// The job's span in the accounting: from its first eligible (or start) to its last end (a cancel
// while pending included); INT64_MAX while a record runs or waits.
std::pair<int64_t, int64_t> span(const ClusterJob& job) {
  const ClusterRecord& first = job.records.front();
  const int64_t begin = first.eligible_s != 0
                            ? std::min(first.eligible_s, first.start_s != 0 ? first.start_s : INT64_MAX)
                            : first.start_s;
  const ClusterRecord& last = job.records.back();
  return {begin, last.end_s != 0 ? last.end_s : INT64_MAX};
}

// log P(X <= k) for X ~ Poisson(mu).
double poisson_cdf(int64_t k, double mu) {
  double term = -mu, sum = 0;  // log terms, summed stably
  double max_term = -mu;
  std::vector<double> terms;
  for (int64_t i = 0; i <= k; ++i) {
    if (i > 0) term += std::log(mu) - std::log(static_cast<double>(i));
    terms.push_back(term);
    max_term = std::max(max_term, term);
  }
  for (double t : terms) sum += std::exp(t - max_term);
  return std::exp(max_term) * sum;
}

// The mu at which P(X <= k) (upper) or P(X >= k) (lower) is 2.5%, by bisection.
double poisson_bound(int64_t k, bool upper) {
  double lo = 0, hi = 10.0 + 3.0 * static_cast<double>(k);
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    const double tail = upper ? poisson_cdf(k, mid) : 1.0 - poisson_cdf(k - 1, mid);
    if ((tail > 0.025) == upper) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return (lo + hi) / 2;
}

}  // namespace

std::string to_string(GpuNs v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string s;
  for (unsigned __int128 u = negative ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v); u > 0;
       u /= 10) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
  }
  return negative ? "-" + s : s;
}

double gpu_hours(GpuNs v) { return static_cast<double>(v) / (3600.0 * kNsPerS); }

std::string_view unlabelled_key(Unlabelled u) {
  return u == Unlabelled::kFailedRun ? "uninstrumented_failed_run" : "uninstrumented_other_run";
}
std::string_view unlabelled_title(Unlabelled u) {
  return u == Unlabelled::kFailedRun ? "uninstrumented run, ended in failure" : "uninstrumented run, other";
}

GpuNs ClusterBreakdown::sdc_lost() const {
  GpuNs s = 0;
  for (GpuNs v : sdc_ns) s += v;
  return s;
}

bool ClusterBreakdown::balanced() const {
  GpuNs s = productive;
  for (GpuNs v : ns) s += v;
  for (GpuNs v : unlabelled) s += v;
  return s == wall;
}

double ClusterBreakdown::ettr() const {
  return wall > 0 ? static_cast<double>(productive) / static_cast<double>(wall) : 0.0;
}

void ClusterBreakdown::add(const ClusterBreakdown& o) {
  wall += o.wall;
  productive += o.productive;
  for (size_t i = 0; i < ns.size(); ++i) {
    ns[i] += o.ns[i];
    sdc_ns[i] += o.sdc_ns[i];
  }
  for (size_t i = 0; i < unlabelled.size(); ++i) unlabelled[i] += o.unlabelled[i];
  instrumented_wall += o.instrumented_wall;
}

void ClusterBreakdown::add_ledger(const goodput::Breakdown& b, int64_t gpus) {
  wall += static_cast<GpuNs>(b.wall_ns) * gpus;
  instrumented_wall += static_cast<GpuNs>(b.wall_ns) * gpus;
  productive += static_cast<GpuNs>(b.productive_ns) * gpus;
  for (size_t i = 0; i < ns.size(); ++i) {
    ns[i] += static_cast<GpuNs>(b.categories[i].ns) * gpus;
    sdc_ns[i] += static_cast<GpuNs>(b.categories[i].sdc_ns) * gpus;
  }
}

std::pair<double, double> poisson_interval(int64_t count) {
  // Past a thousand counts the normal approximation is within 0.1% of the exact bounds, and the
  // exact sum would take time linear in the count.
  if (count > 1000) {
    const double k = static_cast<double>(count), d = 1.96 * std::sqrt(k);
    return {k - d, k + d + 1};
  }
  return {count == 0 ? 0.0 : poisson_bound(count, false), poisson_bound(count, true)};
}

ClusterBreakdown sacct_breakdown(const ClusterJob& job, const Window& w, std::map<int64_t, ClusterBreakdown>* days) {
  ClusterBreakdown b;
  const ClusterRecord& first = job.records.front();
  // Queue (docs/goodput.md, "Slurm accounting"): the first record's eligible to its start, then each
  // end to the next start; a record never started waits to its end (cancelled while pending), else
  // to the window's end.
  int64_t waiting_since = first.eligible_s != 0
                              ? std::min(first.eligible_s, first.start_s != 0 ? first.start_s : INT64_MAX)
                              : first.start_s;
  for (const ClusterRecord& r : job.records) {
    const int64_t waited_until = r.start_s != 0 ? r.start_s : r.end_s != 0 ? r.end_s : INT64_MAX;
    if (waiting_since != 0) add_interval(waiting_since, waited_until, r.gpus, w, std::nullopt, b, days);
    if (r.start_s == 0) break;
    const Unlabelled run = ended_in_failure(r.state) ? Unlabelled::kFailedRun : Unlabelled::kOtherRun;
    add_interval(r.start_s, r.end_s != 0 ? r.end_s : INT64_MAX, r.gpus, w, run, b, days);
    waiting_since = r.end_s;
  }
  return b;
}

}  // namespace sdc::goodput::cluster

namespace sdc::goodput::cluster {

Cluster compute_cluster(const ClusterInputs& in, Progress* progress) {
  Cluster c;
  c.jobs = read_cluster_sacct(in.sacct_path);
  if (c.jobs.empty()) throw InputError(in.sacct_path + ": no job records");
  c.gpu_faults = read_gpu_faults(in.health);

  // The window: without --since/--until, all of the accounting (to its newest time).
  int64_t first = INT64_MAX, last = 0;
  for (const ClusterJob& job : c.jobs) {
    first = std::min(first, span(job).first);
    for (const ClusterRecord& r : job.records) last = std::max({last, r.eligible_s, r.start_s, r.end_s});
  }
  c.window = {in.since_s.value_or(first), in.until_s.value_or(last)};
  if (in.since_before_until_s) c.window.since_s = c.window.until_s - *in.since_before_until_s;
  if (c.window.since_s >= c.window.until_s) {
    throw InputError(in.sacct_path +
                     ": the window is empty (--since must come before --until, and the accounting must span time)");
  }

  // Summaries, matched to the accounting by job id.
  std::vector<std::string> files = summary_files(in.summaries);
  const size_t from_files = files.size();
  for (const auto& [where, text] : in.summary_texts) files.push_back(where);
  std::vector<JobSummary> summaries(files.size());
  std::vector<std::exception_ptr> summary_errors(files.size());
  if (progress && !files.empty()) progress->start("summaries", files.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      summaries[i] = i < from_files ? read_job_summary(files[i])
                                    : parse_job_summary(files[i], in.summary_texts[i - from_files].second);
    } catch (...) {
      summary_errors[i] = std::current_exception();
    }
    if (progress) progress->add(1);
  }
  for (const std::exception_ptr& e : summary_errors) {
    if (e) std::rethrow_exception(e);
  }
  std::unordered_map<int64_t, size_t> job_index, summary_of;
  for (size_t j = 0; j < c.jobs.size(); ++j) job_index.emplace(c.jobs[j].job_id, j);
  for (size_t i = 0; i < summaries.size(); ++i) {
    const int64_t id = summaries[i].job_id;
    if (!job_index.count(id)) {
      ++c.summaries_without_record;
      continue;
    }
    const auto [it, fresh] = summary_of.emplace(id, i);
    if (!fresh)
      throw InputError(files[i] + ": job " + std::to_string(id) + " has a summary already, " + files[it->second]);
  }

  // Each job: its ledger where it has one and lies inside the window, else its accounting.
  std::vector<std::optional<JobResult>> results(c.jobs.size());
  std::vector<std::exception_ptr> errors(c.jobs.size());
  const goodput::LedgerOptions ledger = in.ledger;
  // One job at a time: a job with logs costs as much as thousands without, and chunks of them would
  // leave a thread idle at the end.
  if (progress) progress->start("jobs", c.jobs.size(), "log files");
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t j = 0; j < c.jobs.size(); ++j) {
    size_t logs_read = 0;
    // A job is done however its body ends: skipped, from the accounting, from its ledger, in error.
    const struct Done {
      Progress* progress;
      const size_t& logs;
      ~Done() {
        if (progress) progress->add(1, logs);
      }
    } done{progress, logs_read};
    try {
      const ClusterJob& job = c.jobs[j];
      int64_t gpus = 0;
      for (const ClusterRecord& r : job.records) gpus = std::max(gpus, r.gpus);
      const auto [begin, end] = span(job);
      if (gpus == 0 || end <= c.window.since_s || begin >= c.window.until_s) continue;
      JobResult r;
      r.job = j;
      r.gpus = gpus;
      const auto summary = summary_of.find(job.job_id);
      std::vector<std::string> logs;
      if (summary != summary_of.end()) {
        r.source = JobSource::kSummary;
      } else if (!in.logs_template.empty()) {
        logs = job_logs(in.logs_template, job.job_id);
        if (!logs.empty()) r.source = JobSource::kLogs;
        r.logs_matched_nothing = logs.empty();
      }
      const bool inside = c.window.since_s <= begin && end <= c.window.until_s;
      if (r.source == JobSource::kSacct || !inside) {
        r.crosses_window = r.source != JobSource::kSacct;
        r.source = JobSource::kSacct;
        r.gpu = sacct_breakdown(job, c.window);
        results[j] = std::move(r);
        continue;
      }
      for (const ClusterRecord& rec : job.records) {
        if (rec.start_s != 0 && rec.gpus != gpus) {
          throw InputError(in.sacct_path + ": jobs[" + std::to_string(rec.index) + "]: job " +
                           std::to_string(job.job_id) + "'s records hold different GPU counts (" +
                           std::to_string(rec.gpus) + " and " + std::to_string(gpus) +
                           "); its ledger is weighted by one");
        }
      }
      goodput::Breakdown b;
      if (r.source == JobSource::kSummary) {
        const JobSummary& s = summaries[summary->second];
        // The ledger may widen the accounting by a second at each end (whole seconds); more is
        // another job's summary, or one computed from wrong accounting.
        if (s.breakdown.wall_ns > (end - begin + 2) * kNsPerS) {
          throw InputError(files[summary->second] + ": wall_ns " + std::to_string(s.breakdown.wall_ns) +
                           " exceeds job " + std::to_string(job.job_id) + "'s time in " + in.sacct_path + " (" +
                           std::to_string(end - begin) + " s)");
        }
        b = s.breakdown;
        r.tally = s.measured;
        r.hangs = s.hangs;
      } else {
        std::vector<goodput::SlurmRecord> records;
        for (const ClusterRecord& rec : job.records) {
          if (rec.start_s != 0) records.push_back({rec.eligible_s, rec.start_s, rec.end_s});
        }
        goodput::Tally measured;
        b = goodput::analyze_files(logs, ledger, false, &records, in.sacct_path, &measured).breakdown;
        logs_read = logs.size();
        r.hangs = job_hangs(goodput::find_run_hangs(logs, measured.starts, b.attempts));
        measured.starts = {};  // used: a job's result keeps its hangs, not its ranks' records
        r.tally = measured;
      }
      r.gpu.add_ledger(b, gpus);
      results[j] = std::move(r);
    } catch (...) {
      errors[j] = std::current_exception();
    }
  }
  if (progress) progress->finish();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }

  for (std::optional<JobResult>& r : results) {
    if (!r) {
      continue;
    }
    if (r->logs_matched_nothing) c.logs_matched_nothing.push_back(c.jobs[r->job].job_id);
    c.total.add(r->gpu);
    const ClusterJob& job = c.jobs[r->job];
    if (r->source == JobSource::kSacct) {
      sacct_breakdown(job, c.window, &c.days);
    } else {
      const int64_t end = std::min(span(job).second, c.window.until_s) - 1;
      c.days[end - end % kSecondsPerDay].add(r->gpu);
      if (r->tally) c.incidents.count += r->tally->incidents;
      c.incidents.gpu_days += gpu_hours(r->gpu.wall - r->gpu[goodput::Category::kQueue]) / 24.0;
    }
    c.results.push_back(std::move(*r));
  }
  for (const ClusterJob& job : c.jobs) {
    int64_t gpus = 0;
    for (const ClusterRecord& r : job.records) gpus = std::max(gpus, r.gpus);
    if (gpus == 0) ++c.jobs_without_gpus;
  }
  if (c.incidents.gpu_days > 0) {
    const auto [low, high] = poisson_interval(c.incidents.count);
    c.incidents.per_gpu_day = static_cast<double>(c.incidents.count) / c.incidents.gpu_days;
    c.incidents.low = low / c.incidents.gpu_days;
    c.incidents.high = high / c.incidents.gpu_days;
  }
  return c;
}

}  // namespace sdc::goodput::cluster
