// `sdcprobe goodput`, `plan` and `simulate`: argument parsing only; the work is in
// goodput/commands.cpp.
#include <ctime>
#include <iostream>
#include <sstream>
#include <memory>

#include "cli/commands.hpp"
#include "fleet/store_jobs.hpp"
#include "fleet/store_writer.hpp"
#include "cli/validators.hpp"
#include "goodput/commands.hpp"

namespace sdc::cli {
namespace {

// Options shared by plan and simulate: the rates and costs of a run.
void add_rate_options(CLI::App& cmd, goodput::PlanParams& p) {
  cmd.add_option("--nodes", p.nodes, "Nodes in the job")->check(unsigned_in(1, 10'000'000))->capture_default_str();
  cmd.add_option("--gpus-per-node", p.gpus_per_node, "GPUs per node")
      ->check(unsigned_in(1, 1024))
      ->capture_default_str();
  cmd.add_option("--failure-rate", p.failure_rate, "Job-stopping failures per node-day (default: Llama 3's 54-day run)")
      ->check(finite_in(0.0, 1e12))
      ->capture_default_str();
  cmd.add_option("--sdc-rate", p.sdc_rate, "Detected silent data corruptions per node-day")
      ->check(finite_in(0.0, 1e12))
      ->capture_default_str();
  cmd.add_option("--restart", p.restart_s, "Seconds from a failure to training again (teardown, restart, warm-up)")
      ->check(finite_in(0.0, 1e12))
      ->capture_default_str();
  cmd.add_option("--ckpt-write", p.ckpt_write_s, "Seconds a checkpoint save blocks training")
      ->check(finite_in(0.0, 1e12))
      ->capture_default_str();
  cmd.add_option("--ckpt-interval", p.ckpt_interval_s, "Seconds between checkpoints")
      ->check(finite_in(1e-9, 1e12))
      ->capture_default_str();
  cmd.add_option("--probe-cost", p.probe_cost_s, "Seconds one in-loop probe blocks training")
      ->check(finite_in(0.0, 1e12))
      ->capture_default_str();
  cmd.add_option("--probe-interval", p.probe_interval_s, "Seconds between in-loop probes")
      ->check(finite_in(1e-9, 1e12))
      ->capture_default_str();
  cmd.add_option("--days", p.days, "Length of the simulated run in days")
      ->check(finite_in(1e-9, 1e12))
      ->capture_default_str();
  cmd.add_option("--seed", p.seed, "Random seed (runs replay exactly)")
      ->check(unsigned_in(0, UINT64_MAX))
      ->capture_default_str();
}

}  // namespace

void add_goodput_commands(CLI::App& app, int& exit_code) {
  auto goodput = std::make_shared<goodput::GoodputOptions>();
  double gap_s = static_cast<double>(goodput->ledger.gap_threshold_ns) / 1e9;
  auto* g =
      app.add_subcommand("goodput", "Effective training time of a run and where the rest went, from its event log");
  g->add_option("events", goodput->events_paths,
                "Event logs, JSON Lines (- for standard input), or glob patterns such as 'events.rank*.jsonl'; "
                "several are merged: rank 0's timeline with the other ranks' faults")
      ->required();
  g->add_option("--sacct", goodput->sacct_path,
                "Slurm's accounting for the job (sacct -j JOBID --duplicates --json): its eligible, start and end "
                "times give the queue");
  g->add_flag("--json", goodput->json, "Print JSON instead of the table");
  g->add_option("--svg", goodput->svg_path, "Also draw the breakdown as an SVG file");
  g->add_option("--job-id", goodput->job_id, "Slurm's job id, written into the JSON (for `fleet goodput`)")
      ->check(unsigned_in(0, INT64_MAX));
  auto store = std::make_shared<std::string>();
  g->add_option("--store", *store,
                "Also store the summary (--json --job-id) as its job's row in a fleet store, for `fleet goodput "
                "--store` (docs/fleet.md)")
      ->type_name("DIR")
      ->needs(g->get_option("--json"))
      ->needs(g->get_option("--job-id"));
  g->add_flag("--lenient", goodput->lenient, "Skip and count bad lines instead of stopping at the first");
  g->add_option("--keep-checkpoints", goodput->ledger.keep_checkpoints,
                "Committed checkpoints kept as possible restore targets")
      ->check(unsigned_in(1, 1'000'000))
      ->capture_default_str();
  auto* gap = g->add_option("--gap-threshold", gap_s, "Seconds of silence between events counted as a gap")
                  ->check(finite_in(1e-3, 1e9))
                  ->capture_default_str();
  g->callback([goodput, gap, store, &exit_code]() {
    goodput::GoodputOptions o = *goodput;
    o.ledger.gap_threshold_ns = static_cast<int64_t>(gap->as<double>() * 1e9);
    if (store->empty()) {
      exit_code = goodput::goodput_command(o, std::cout);
      return;
    }
    prepare_store(*store);  // a store that cannot be written fails before the logs are read
    std::ostringstream summary;
    exit_code = goodput::goodput_command(o, summary);
    std::cout << summary.str();
    publish_job_summary(*store, "the summary of job " + std::to_string(o.job_id), summary.str(),
                        static_cast<double>(std::time(nullptr)));
  });

  auto plan = std::make_shared<goodput::PlanParams>();
  auto plan_json = std::make_shared<bool>(false);
  auto* p =
      app.add_subcommand("plan", "Predict ETTR from failure and SDC rates; optimal checkpoint and probe intervals");
  add_rate_options(*p, *plan);
  p->add_option("--trials", plan->trials, "Monte Carlo runs")->check(unsigned_in(0, 100'000))->capture_default_str();
  p->add_option("--step", plan->step_s, "Simulated step time in seconds (0: from the intervals)")
      ->check(finite_in(0.0, 1e12))
      ->capture_default_str();
  p->add_flag("--json", *plan_json, "Print JSON");
  p->callback([plan, plan_json, &exit_code]() { exit_code = goodput::plan_command(*plan, *plan_json, std::cout); });

  auto sim = std::make_shared<goodput::SimulateOptions>();
  auto* s = app.add_subcommand("simulate", "Write a synthetic event log and its ground-truth breakdown");
  s->add_option("--out", sim->out_path, "Event log to write (JSON Lines)")->required();
  s->add_option("--truth", sim->truth_path, "Also write the ground-truth breakdown as JSON");
  add_rate_options(*s, sim->plan);
  s->add_option("--step", sim->step_s, "Mean step time in seconds")
      ->check(finite_in(1e-9, 1e12))
      ->capture_default_str();
  s->add_option("--rfc3339", sim->rfc3339_fraction, "Fraction of times written as RFC 3339 strings")
      ->check(finite_in(0.0, 1.0))
      ->capture_default_str();
  s->add_flag("--json", sim->json, "Print the ground truth as JSON");
  s->callback([sim, &exit_code]() { exit_code = goodput::simulate_command(*sim, std::cout); });
}

}  // namespace sdc::cli
