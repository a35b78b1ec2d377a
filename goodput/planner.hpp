// The planner: effective training time ratio (ETTR) predicted from rates, by closed forms and by
// Monte Carlo over the simulator, and the checkpoint and probe intervals that maximise it.
#pragma once

#include <cstdint>
#include <string>

namespace sdc::goodput {

struct PlanParams {
  int64_t nodes = 2048;
  int64_t gpus_per_node = 8;
  // Llama 3's 54-day snapshot on 16,384 H100s: 419 unexpected interruptions (Dubey et al. 2024,
  // "The Llama 3 Herd of Models", section 3.3.4) = 419 / (54 days x 2,048 nodes).
  double failure_rate = 419.0 / (54.0 * 2048.0);  // failures per node-day
  double sdc_rate = 1e-4;                         // detected SDC events per node-day
  double restart_s = 600;                         // teardown + restart + warm-up per failure
  double ckpt_write_s = 30;                       // blocking part of one save
  double ckpt_interval_s = 1800;
  double probe_cost_s = 1;  // wall time of one in-loop probe
  double probe_interval_s = 600;
  // Monte Carlo
  double days = 54;
  int trials = 200;
  uint64_t seed = 1;
  double step_s = 0;  // simulated step time; 0 picks one from the intervals
};

struct PlanResult {
  double job_failures_per_day = 0;
  double mttf_s = 0;  // whole job, failures only
  double young_interval_s = 0;
  double daly_interval_s = 0;
  double meta_ettr = 0;     // Kokolis et al.'s model at the given checkpoint interval (failures only)
  double poisson_ettr = 0;  // the exact form for Poisson failures (failures only)
  double planned_ettr = 0;  // the same model with SDC rework and probe cost, at the given intervals
  // Rework per SDC beyond the restart: an unbound cadence, and checks bound to the checkpoint.
  double sdc_rework_unbound_s = 0;
  double sdc_rework_bound_s = 0;
  double bound_ettr = 0;  // planned_ettr with check before commit
  double optimal_ckpt_interval_s = 0;
  double optimal_probe_interval_s = 0;  // 0 when the SDC rate is 0 (probing only costs)
  double optimal_ettr = 0;              // planned ETTR at both optima
  double mc_mean = 0;
  double mc_low = 0;   // 2.5th percentile of the trials
  double mc_high = 0;  // 97.5th percentile
  int mc_trials = 0;
};

// Young (1974), "A first order approximation to the optimum checkpoint interval": sqrt(2 delta M).
double young_interval(double write_s, double mttf_s);
// Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps":
// sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9] - delta for delta < 2M, else M.
double daly_interval(double write_s, double mttf_s);
// Kokolis et al. (2024), "Revisiting Reliability in Large-Scale ML Research Clusters": with N nodes
// failing at r_f per node-day, each failure costs the restart overhead u0 plus on average half a
// checkpoint interval of lost work; blocking saves take delta of every interval + delta.
// E[ETTR] ~= 1 - N r_f (u0 + interval / 2) - delta / (interval + delta), clamped to [0, 1].
double meta_ettr(double job_failures_per_s, double restart_s, double interval_s, double write_s);
// Exact for Poisson failures at rate lambda during running time (none during restarts): a segment of
// interval + delta running time takes (1/lambda + u0)(e^(lambda (interval + delta)) - 1) of wall time
// on average and yields `interval` of training.
double poisson_ettr(double job_failures_per_s, double restart_s, double interval_s, double write_s);
// The rework of one SDC beyond the restart, with checks every P and saves every T (interval_s).
// Unbound: the rollback passes the last clean probe to the checkpoint before it: P (detection
// latency ~P/2 on each side of the onset) + T/2. Bound (check before commit): every commit was
// verified, so the rollback goes to the newest commit only, and the SDC is found at the next check
// after its onset, at the latest the next save's: T/2 + min(P, T)/2.
double sdc_rework_s(double interval_s, double probe_interval_s, bool check_before_commit);
// Adds SDC: probes cost c every P; each SDC costs u0 + sdc_rework_s. Bound to the checkpoint, a
// check also runs before every commit (c per save) unless the cadence already falls on the saves
// (T a whole multiple of P).
double planned_ettr(double failures_per_s, double sdc_per_s, double restart_s, double interval_s, double write_s,
                    double probe_cost_s, double probe_interval_s, bool check_before_commit = false);

// The probe interval that maximises planned_ettr: d/dP [c/P + sdc_per_s P] = 0 gives sqrt(c / rate).
// 0 when the SDC rate is 0 (probing then only costs). The inline probe's "auto" cadence uses it.
double optimal_probe_interval(double sdc_per_s, double probe_cost_s);

PlanResult plan(const PlanParams& params);

}  // namespace sdc::goodput
