// The cluster ledger's two parsers (`fleet goodput`): sacct's JSON of a whole cluster and a job's
// summary (`sdcprobe goodput --json --job-id N`). The input is the sacct JSON, then optionally
// "\n--\n" and a summary. Properties, as the seeded ClusterFuzz test: a summary is read with labels
// that sum to its wall time, or refused naming its file; the cluster is computed with well-formed jobs
// (a job's started records by start, not overlapping, at most one not started and that one last) and
// balanced ledgers, or refused with an InputError naming one of the two files; never another exception.
// Seeds (corpus/cluster/): the recorded Slurm dumps of tests/goodput/data (fleet_22.05/sacct.json and
// its sacct_23.02_form.json, fleet_24.11/sacct.json, sacct_requeue_22.05.json), each then "\n--\n" and
// the summary the real binary wrote for one of its jobs from the job's recorded logs, as the epilog
// does: `sdcprobe goodput --json --job-id N 'DIR/logs/N/events.rank*.jsonl'` (the requeue's with
// `--sacct sacct_requeue_22.05.json` and sacct_requeue_events.rank0.jsonl); sacct_24.11_alone is
// 24.11's dump without a summary.
#include <cstdint>
#include <string>
#include <vector>

#include "goodput/cluster/cluster_ledger.hpp"
#include "goodput/cluster/cluster_summary.hpp"
#include "host/error.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"

namespace {

using namespace sdc::goodput::cluster;

bool starts_with_path(const std::string& message, const std::string& path) {
  return message.rfind(path + ": ", 0) == 0;
}

bool well_formed(const ClusterJob& job) {
  const auto& rs = job.records;
  if (rs.empty()) return false;
  for (size_t k = 0; k < rs.size(); ++k) {
    const ClusterRecord& r = rs[k];
    if (r.gpus < 0 || r.eligible_s < 0 || r.start_s < 0 || r.end_s < 0) return false;
    if (r.start_s != 0 && r.end_s != 0 && r.end_s < r.start_s) return false;
    if (k + 1 == rs.size()) break;
    const ClusterRecord& next = rs[k + 1];
    // Only the last may be not started; a started one ends before the next starts.
    if (r.start_s == 0 || r.end_s == 0) return false;
    if (next.start_s != 0 && (next.start_s < r.start_s || r.end_s > next.start_s)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  const std::string text = fuzz::as_text(data, size);
  const std::string separator = "\n--\n";
  const size_t at = text.find(separator);
  const std::string sacct_text = text.substr(0, at);
  const bool with_summary = at != std::string::npos;
  const std::string summary_text = with_summary ? text.substr(at + separator.size()) : "";
  const std::string sacct = fuzz::write_scratch("sacct.json", sacct_text);
  const std::string summary = fuzz::write_scratch("job.json", summary_text);

  if (with_summary) {
    try {
      const JobSummary s = parse_job_summary(summary, summary_text);
      SDC_FUZZ_CHECK(fuzz::sums_exactly(s.breakdown), "summary does not sum");
      SDC_FUZZ_CHECK(s.job_id >= 0, "negative job id");
    } catch (const InputError& e) {
      SDC_FUZZ_CHECK(starts_with_path(e.what(), summary), e.what());
    }
  }

  ClusterInputs in;
  in.sacct_path = sacct;
  if (with_summary) in.summaries = {summary};
  try {
    const Cluster c = compute_cluster(in);
    SDC_FUZZ_CHECK(c.window.since_s < c.window.until_s, "empty window");
    for (const ClusterJob& job : c.jobs) SDC_FUZZ_CHECK(well_formed(job), "job " + std::to_string(job.job_id));
    for (const JobResult& r : c.results) {
      SDC_FUZZ_CHECK(r.job < c.jobs.size() && r.gpu.balanced(), "job result " + std::to_string(r.job));
    }
    SDC_FUZZ_CHECK(c.total.balanced(), "cluster ledger not balanced");
  } catch (const InputError& e) {
    SDC_FUZZ_CHECK(starts_with_path(e.what(), sacct) || (with_summary && starts_with_path(e.what(), summary)),
                   e.what());
  }
  return 0;
}
