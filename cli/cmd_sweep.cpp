#include <algorithm>
#include <memory>

#include "cli/probe_run.hpp"
#include "cli/validators.hpp"
#include "fleet/store_writer.hpp"
#include "host/backend.hpp"
#include "host/error.hpp"
#include "scheduler/qualify/busy_gpus.hpp"
#include "scheduler/sweep/sweep.hpp"

namespace sdc::cli {

void add_sweep_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* sub = app.add_subcommand(
      "sweep", "Test idle nodes in passes: history, quarantine and Prometheus metrics (a daemon, or --once)");
  struct Args {
    SweepOptions sweep;
    std::string every = "1h";
    std::string budget = "10m";
    std::string window = "7d";
    std::string level = "standard";
    double probe_timeout_s = 0;  // by level
    ProbeRunArgs run;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--every", args->every, "Start a pass this often, e.g. 1h or 30m")->capture_default_str();
  sub->add_option("--budget", args->budget, "The most one pass may take; a probe still running then is stopped")
      ->capture_default_str();
  sub->add_option("--level", args->level, "The catalogue to spread across passes: quick, standard or long")
      ->check(CLI::IsMember({"quick", "standard", "long"}))
      ->capture_default_str();
  sub->add_option("--idle-check", args->sweep.idle_check,
                  "Shell command run before each pass; a non-zero exit means the node is busy and the pass is skipped");
  sub->add_option("--idle-check-timeout", args->sweep.idle_check_timeout_s,
                  "Seconds the idle check may take; longer counts as busy")
      ->check(finite_in(0.1, 3600.0))
      ->capture_default_str();
  sub->add_flag("--once", args->sweep.once, "Run one pass and exit (for a systemd timer): 0 no fault, 1 a fault");
  sub->add_option("--state-dir", args->sweep.state_dir, "Where the history database lives")->capture_default_str();
  sub->add_option("--prom-dir", args->sweep.prom_dir,
                  "Write sdcprobe.prom here after each pass (node_exporter's textfile collector directory)");
  sub->add_option("--transient-limit", args->sweep.policy.transient_limit,
                  "Quarantine a device after this many transient faults within --window")
      ->check(unsigned_in(1, 1000000))
      ->capture_default_str();
  sub->add_option("--window", args->window, "The window transient faults are counted in")->capture_default_str();
  sub->add_option("--clean-sweeps", args->sweep.policy.clean_sweeps,
                  "Clean passes a quarantined device needs before `sdcprobe release` accepts it")
      ->check(unsigned_in(0, 1000000))
      ->capture_default_str();
  add_seed_option(sub, args->run, "Use this seed for every pass (each pass otherwise draws a new one)");
  sub->add_option("--spool-dir", args->sweep.spool_dir,
                  "Write each pass's JSON report here, for `sdcprobe fleet sdc` (a directory a site collects)");
  sub->add_option("--inject", args->run.inject, "Inject faults, for drills and tests (docs/injection.md)")
      ->check(injection_spec());
  sub->add_option("--size", args->run.size_bytes, "Buffer bytes for memory probes (suffixes K, M, G are binary)")
      ->transform(buffer_size());
  sub->add_option("--iterations", args->run.iterations, "Passes for memory probes, chain length for ALU probes")
      ->check(unsigned_in(1, kMaxIterations));
  add_watchdog_option(sub, args->probe_timeout_s);
  add_store_option(sub, args->run.store_dir);
  sub->callback([&global, &exit_code, args] {
    SweepOptions options = args->sweep;
    options.every_s = parse_duration("--every", args->every);
    options.budget_s = parse_duration("--budget", args->budget);
    options.policy.window_s = parse_duration("--window", args->window);
    options.level = parse_level(args->level);
    options.probe_timeout_s = watchdog_seconds(args->probe_timeout_s, options.level);
    options.seed = args->run.seed;
    options.fleet_period = args->run.fleet_period;
    if (options.fleet_period) options.fleet_secret = read_fleet_secret(site_defaults_path());
    options.size_bytes = args->run.size_bytes;
    options.iterations = args->run.iterations;
    options.inject = args->run.inject;
    if (!args->run.store_dir.empty()) {
      prepare_store(args->run.store_dir);
      options.on_report = [dir = args->run.store_dir](const RunReport& report) {
        publish_store_files(dir, store_files(report));
      };
    }
    const WorkerSetup setup{
        this_executable(), {global.backend, global.cpu_devices, global.expect_gpus}, options.inject, true};
    // Listed by a child: this daemon holds no device context while its workers run.
    const auto devices = list_devices_in_child(setup.executable, setup.backend);
    const auto catalogue = level_catalogue(options.level, devices);
    if (devices.empty()) throw InputError("sweep: no device to test");
    if (options.size_bytes) check_size_bytes(*options.size_bytes, "--size", devices);
    // A bad spec, or one that matches nothing, fails before any pass.
    if (!options.inject.empty()) check_injections(parse_injection_specs(options.inject), catalogue, devices, false);
    // The idle check decides about other processes before each pass; MIG is refused at the start.
    if (std::any_of(devices.begin(), devices.end(), [](const auto& d) { return d.backend == "cuda"; })) {
      const std::string mig = mig_refusal(devices, nvml_gpu_processes(nvml_library_name()));
      if (!mig.empty()) throw std::runtime_error(mig);
    }
    exit_code = run_sweep(options, devices, catalogue,
                          [&setup](const RunOptions& run) { return make_worker_command(setup, run); });
  });
}

}  // namespace sdc::cli
