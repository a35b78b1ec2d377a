#include "goodput/commands.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "goodput/analyze.hpp"
#include "goodput/merge.hpp"
#include "goodput/report.hpp"
#include "goodput/run_hangs.hpp"
#include "host/atomic_file.hpp"
#include "host/error.hpp"

namespace sdc::goodput {
namespace {

std::string seconds(double s) {
  char buf[64];
  if (std::isinf(s)) return "never";
  std::snprintf(buf, sizeof buf, "%.0f s (%.2f h)", s, s / 3600.0);
  return buf;
}

std::string ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", r);
  return buf;
}

nlohmann::ordered_json activity_json(const Activity& a) { return {{"count", a.count}, {"ns", a.ns}}; }

// The ledger's JSON, plus the job id and what the logs measured (docs/goodput.md, "Cluster").
std::string summary_json(const Analysis& analysis, const GoodputOptions& o, const Tally& t,
                         const std::vector<RunHang>& hangs) {
  nlohmann::ordered_json j = json_report(analysis);
  if (o.job_id >= 0) j["job_id"] = o.job_id;
  j["measured"] = {{"saves", activity_json(t.saves)},        {"data_waits", activity_json(t.data_waits)},
                   {"evals", activity_json(t.evals)},        {"probes", activity_json(t.probes)},
                   {"save_interval_ns", t.save_interval_ns}, {"incidents", t.incidents}};
  if (!hangs.empty()) j["hangs"] = run_hangs_json(hangs);
  return j.dump(2) + "\n";
}

}  // namespace

int goodput_command(const GoodputOptions& o, std::ostream& out) {
  const std::vector<std::string> paths = expand_event_paths(o.events_paths);
  if (paths.empty()) throw InputError("no event log given");
  Analysis analysis;
  Tally measured;  // counted by the pass that reads the logs: each is read once
  if (!o.sacct_path.empty()) {
    if (paths[0] == "-") throw InputError("--sacct merges event files, not standard input");
    const std::vector<SlurmRecord> records = read_sacct_json(o.sacct_path);
    analysis = analyze_files(paths, o.ledger, o.lenient, &records, o.sacct_path, &measured);
  } else if (paths.size() > 1) {
    analysis = analyze_files(paths, o.ledger, o.lenient, nullptr, "", &measured);
  } else if (paths[0] == "-") {
    analysis = analyze(std::cin, o.ledger, o.lenient, &measured);
  } else {
    analysis = analyze_file(paths[0], o.ledger, o.lenient, &measured);
  }
  if (analysis.stats.events == 0) {
    throw InputError((paths.size() > 1 ? std::string("the merged logs") : paths[0]) + ": no events");
  }
  // The flight-recorder dumps beside the logs name the rank that hung an attempt (docs/goodput.md).
  const std::vector<RunHang> hangs = find_run_hangs(paths, measured.starts, analysis.breakdown.attempts);
  if (!o.svg_path.empty()) write_file_atomically(o.svg_path, svg_report(analysis.breakdown));
  out << (o.json ? summary_json(analysis, o, measured, hangs) : text_report(analysis) + run_hangs_text(hangs));
  return 0;
}

int plan_command(const PlanParams& p, bool json, std::ostream& out) {
  const PlanResult r = plan(p);
  if (json) {
    nlohmann::ordered_json j;
    j["gpus"] = p.nodes * p.gpus_per_node;
    j["job_failures_per_day"] = r.job_failures_per_day;
    j["mttf_s"] = std::isinf(r.mttf_s) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.mttf_s);
    j["young_interval_s"] = r.young_interval_s;
    j["daly_interval_s"] = r.daly_interval_s;
    j["meta_ettr"] = r.meta_ettr;
    j["poisson_ettr"] = r.poisson_ettr;
    j["planned_ettr"] = r.planned_ettr;
    j["check_before_commit"] = {{"sdc_rework_unbound_s", r.sdc_rework_unbound_s},
                                {"sdc_rework_bound_s", r.sdc_rework_bound_s},
                                {"bound_ettr", r.bound_ettr}};
    j["optimal_ckpt_interval_s"] = std::isinf(r.optimal_ckpt_interval_s)
                                       ? nlohmann::ordered_json(nullptr)
                                       : nlohmann::ordered_json(r.optimal_ckpt_interval_s);
    j["optimal_probe_interval_s"] = r.optimal_probe_interval_s;
    j["optimal_ettr"] = r.optimal_ettr;
    j["monte_carlo"] = {
        {"trials", r.mc_trials}, {"days", p.days}, {"mean_ettr", r.mc_mean}, {"p2_5", r.mc_low}, {"p97_5", r.mc_high}};
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "Job: " << p.nodes << " nodes x " << p.gpus_per_node << " GPUs = " << p.nodes * p.gpus_per_node << " GPUs, "
      << r.job_failures_per_day << " failures/day, MTTF " << seconds(r.mttf_s) << "\n\n";
  out << "Closed forms at checkpoint interval " << seconds(p.ckpt_interval_s) << ", probe interval "
      << seconds(p.probe_interval_s) << ":\n";
  out << "  Meta ETTR model (Kokolis et al. 2024), failures only: " << ratio(r.meta_ettr) << "\n";
  out << "  exact for Poisson failures, failures only:            " << ratio(r.poisson_ettr) << "\n";
  out << "  Meta model with SDC rework and probe cost:            " << ratio(r.planned_ettr) << "\n";
  out << "    rework per SDC, unbound cadence (P + T/2):          " << seconds(r.sdc_rework_unbound_s) << "\n";
  out << "  with check before commit (every commit verified):     " << ratio(r.bound_ettr) << "\n";
  out << "    rework per SDC, back to the newest commit:          " << seconds(r.sdc_rework_bound_s)
      << " (T/2 + min(P, T)/2)\n";
  out << "  Young optimal checkpoint interval:                    " << seconds(r.young_interval_s) << "\n";
  out << "  Daly optimal checkpoint interval:                     " << seconds(r.daly_interval_s) << "\n\n";
  out << "Monte Carlo (" << r.mc_trials << " runs of " << p.days << " days, seed " << p.seed << "): mean ETTR "
      << ratio(r.mc_mean) << ", 95% of runs in [" << ratio(r.mc_low) << ", " << ratio(r.mc_high) << "]\n\n";
  out << "Optimal checkpoint interval (failures and SDC): " << seconds(r.optimal_ckpt_interval_s) << "\n";
  if (r.optimal_probe_interval_s > 0) {
    out << "Optimal probe interval (probe cost vs SDC rework): " << seconds(r.optimal_probe_interval_s) << "\n";
  } else {
    out << "Optimal probe interval: none (SDC rate is 0, probes only cost)\n";
  }
  out << "ETTR at both optima: " << ratio(r.optimal_ettr) << "\n";
  return 0;
}

SimParams simulate_params(const SimulateOptions& o) {
  const PlanParams& p = o.plan;
  if (o.step_s <= 0 || p.days <= 0) throw InputError("simulate: --step and --days must be positive");
  if (p.ckpt_interval_s <= 0 || p.probe_interval_s <= 0) throw InputError("simulate: intervals must be positive");
  auto ns = [](double s) { return static_cast<int64_t>(std::llround(s * 1e9)); };
  SimParams s;
  s.seed = p.seed;
  s.duration_ns = ns(p.days * 86400.0);
  s.step_ns = ns(o.step_s);
  s.step_jitter_ns = s.step_ns / 20;
  s.gap_max_ns = s.step_ns / 1000;
  s.ckpt_every = std::max<int64_t>(1, std::llround(p.ckpt_interval_s / o.step_s));
  s.ckpt_write_ns = ns(p.ckpt_write_s);
  s.probe_every = std::max<int64_t>(1, std::llround(p.probe_interval_s / o.step_s));
  s.probe_ns = ns(p.probe_cost_s);
  s.eval_every = std::max<int64_t>(1, std::llround(5000.0 / o.step_s));  // an eval every ~83 minutes
  s.faults_per_day = static_cast<double>(p.nodes) * p.failure_rate;
  s.sdc_per_day = static_cast<double>(p.nodes) * p.sdc_rate;
  s.teardown_ns = ns(p.restart_s / 4.0);
  s.warmup_ns = ns(p.restart_s * 3.0 / 4.0);
  s.rfc3339_prob = o.rfc3339_fraction;
  return s;
}

int simulate_command(const SimulateOptions& o, std::ostream& out) {
  const SimParams params = simulate_params(o);
  std::string log;
  const SimResult r = simulate(params, [&](std::string_view line) {
    log.append(line);
    log += '\n';
  });
  write_file_atomically(o.out_path, log);
  if (!o.truth_path.empty()) write_file_atomically(o.truth_path, json_breakdown(r.truth));
  if (o.json) {
    out << json_breakdown(r.truth);
  } else {
    Analysis truth;
    truth.breakdown = r.truth;
    truth.stats.events = r.events;
    out << "Wrote " << r.events << " events (" << r.faults << " faults, " << r.sdc_detections
        << " SDC detections, seed " << params.seed << ") to " << o.out_path << ". Ground truth:\n\n"
        << text_report(truth, false);
  }
  return 0;
}

}  // namespace sdc::goodput
