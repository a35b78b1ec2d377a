#include "goodput/planner.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "goodput/simulator.hpp"
#include "host/error.hpp"

namespace sdc::goodput {
namespace {

constexpr double kSecondsPerDay = 86400.0;

int64_t to_ns(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e9)); }

}  // namespace

double young_interval(double write_s, double mttf_s) { return std::sqrt(2.0 * write_s * mttf_s); }

double daly_interval(double write_s, double mttf_s) {
  if (write_s >= 2.0 * mttf_s) return mttf_s;
  const double x = write_s / (2.0 * mttf_s);
  return std::sqrt(2.0 * write_s * mttf_s) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - write_s;
}

double meta_ettr(double job_failures_per_s, double restart_s, double interval_s, double write_s) {
  const double lost = job_failures_per_s * (restart_s + interval_s / 2.0) + write_s / (interval_s + write_s);
  return std::clamp(1.0 - lost, 0.0, 1.0);
}

double poisson_ettr(double job_failures_per_s, double restart_s, double interval_s, double write_s) {
  if (job_failures_per_s <= 0) return interval_s / (interval_s + write_s);
  const double wall = (1.0 / job_failures_per_s + restart_s) * std::expm1(job_failures_per_s * (interval_s + write_s));
  return interval_s / wall;
}

double sdc_rework_s(double interval_s, double probe_interval_s, bool check_before_commit) {
  if (!check_before_commit) return probe_interval_s + interval_s / 2.0;
  return (interval_s + std::min(probe_interval_s, interval_s)) / 2.0;
}

double planned_ettr(double failures_per_s, double sdc_per_s, double restart_s, double interval_s, double write_s,
                    double probe_cost_s, double probe_interval_s, bool check_before_commit) {
  double probes = probe_interval_s > 0 && std::isfinite(probe_interval_s) ? probe_cost_s / probe_interval_s : 0.0;
  if (check_before_commit) {
    const double saves_per_probe = interval_s / probe_interval_s;
    const bool on_cadence = std::isfinite(saves_per_probe) && saves_per_probe >= 1 &&
                            std::abs(saves_per_probe - std::round(saves_per_probe)) < 1e-9 * saves_per_probe;
    if (!on_cadence) probes += probe_cost_s / (interval_s + write_s);
  }
  const double sdc = sdc_per_s * (restart_s + sdc_rework_s(interval_s, probe_interval_s, check_before_commit));
  return std::clamp(meta_ettr(failures_per_s, restart_s, interval_s, write_s) - sdc - probes, 0.0, 1.0);
}

double optimal_probe_interval(double sdc_per_s, double probe_cost_s) {
  return sdc_per_s > 0 ? std::sqrt(probe_cost_s / sdc_per_s) : 0.0;
}

PlanResult plan(const PlanParams& p) {
  if (p.nodes < 1 || p.gpus_per_node < 1) throw InputError("plan: nodes and GPUs per node must be at least 1");
  if (p.failure_rate < 0 || p.sdc_rate < 0) throw InputError("plan: rates must not be negative");
  if (p.ckpt_interval_s <= 0 || p.probe_interval_s <= 0 || p.ckpt_write_s < 0 || p.probe_cost_s < 0 ||
      p.restart_s < 0) {
    throw InputError("plan: intervals must be positive and costs not negative");
  }
  if (p.days <= 0 || p.trials < 0) throw InputError("plan: days must be positive and trials not negative");
  PlanResult r;
  const double nodes = static_cast<double>(p.nodes);
  r.job_failures_per_day = nodes * p.failure_rate;
  const double lf = r.job_failures_per_day / kSecondsPerDay;
  const double ls = nodes * p.sdc_rate / kSecondsPerDay;
  r.mttf_s = lf > 0 ? 1.0 / lf : INFINITY;
  r.young_interval_s = young_interval(p.ckpt_write_s, r.mttf_s);
  r.daly_interval_s = daly_interval(p.ckpt_write_s, r.mttf_s);
  r.meta_ettr = meta_ettr(lf, p.restart_s, p.ckpt_interval_s, p.ckpt_write_s);
  r.poisson_ettr = poisson_ettr(lf, p.restart_s, p.ckpt_interval_s, p.ckpt_write_s);
  r.planned_ettr =
      planned_ettr(lf, ls, p.restart_s, p.ckpt_interval_s, p.ckpt_write_s, p.probe_cost_s, p.probe_interval_s);
  r.sdc_rework_unbound_s = sdc_rework_s(p.ckpt_interval_s, p.probe_interval_s, false);
  r.sdc_rework_bound_s = sdc_rework_s(p.ckpt_interval_s, p.probe_interval_s, true);
  r.bound_ettr =
      planned_ettr(lf, ls, p.restart_s, p.ckpt_interval_s, p.ckpt_write_s, p.probe_cost_s, p.probe_interval_s, true);
  // Minimising the lost fraction of planned_ettr: d/dT [delta/T + (lf + ls) T/2] = 0 and
  // d/dP [c/P + ls P] = 0.
  r.optimal_ckpt_interval_s = lf + ls > 0 ? std::sqrt(2.0 * p.ckpt_write_s / (lf + ls)) : INFINITY;
  r.optimal_probe_interval_s = optimal_probe_interval(ls, p.probe_cost_s);
  r.optimal_ettr = planned_ettr(lf, ls, p.restart_s, r.optimal_ckpt_interval_s, p.ckpt_write_s, p.probe_cost_s,
                                ls > 0 ? r.optimal_probe_interval_s : INFINITY);

  // Monte Carlo: the event simulator with the same rates, without writing events.
  const double step_s =
      p.step_s > 0 ? p.step_s : std::clamp(std::min(p.ckpt_interval_s, p.probe_interval_s) / 5.0, 1.0, 60.0);
  SimParams s;
  s.duration_ns = to_ns(p.days * kSecondsPerDay);
  s.first_queue_ns = 0;
  s.step_ns = to_ns(step_s);
  s.step_jitter_ns = 0;
  s.gap_max_ns = 0;
  s.ckpt_every = std::max<int64_t>(1, std::llround(p.ckpt_interval_s / step_s));
  s.ckpt_write_ns = to_ns(p.ckpt_write_s);
  s.async_ckpt_prob = 0;
  s.probe_every = std::max<int64_t>(1, std::llround(p.probe_interval_s / step_s));
  s.probe_ns = to_ns(p.probe_cost_s);
  s.eval_every = 0;
  s.data_wait_prob = 0;
  s.faults_per_day = r.job_failures_per_day;
  s.sdc_per_day = nodes * p.sdc_rate;
  s.in_step_fault_prob = 1.0;
  s.hang_prob = 0;
  s.teardown_ns = to_ns(p.restart_s / 4.0);
  s.warmup_ns = to_ns(p.restart_s * 3.0 / 4.0);
  s.requeue_prob = 0;
  std::vector<double> ettr;
  for (int i = 0; i < p.trials; ++i) {
    s.seed = p.seed + static_cast<uint64_t>(i);
    ettr.push_back(simulate(s, nullptr).truth.ettr());
  }
  r.mc_trials = p.trials;
  if (!ettr.empty()) {
    double sum = 0;
    for (double e : ettr) sum += e;
    r.mc_mean = sum / static_cast<double>(ettr.size());
    std::sort(ettr.begin(), ettr.end());
    auto quantile = [&](double q) { return ettr[static_cast<size_t>(q * static_cast<double>(ettr.size() - 1) + 0.5)]; };
    r.mc_low = quantile(0.025);
    r.mc_high = quantile(0.975);
  }
  return r;
}

}  // namespace sdc::goodput
