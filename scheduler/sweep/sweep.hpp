// The sweep: a daemon (or a timer's one-shot) that tests idle nodes in passes. Before each pass it
// runs the idle check; a pass runs a slice of the level's catalogue that fits the budget, each
// device in a watched worker, records every result in the history, applies the quarantine policy
// and writes the Prometheus textfile. SIGTERM or SIGINT stops it within a second, recording the pass
// as interrupted.
//
// Spreading the catalogue: the sweep keeps a cursor into the catalogue (in the history). A pass runs
// the probes from the cursor on, in catalogue order, while the sum of their estimated times (the
// last recorded duration on each device; 0 when unknown) fits the budget, and always at least one;
// the cursor moves past the probes that ran on every device. So every probe runs within N passes
// for a catalogue of N probes, and within ceil(N / k) passes when every pass fits at least k probes.
// Every device's worker runs at once, so a hung device never keeps another from its turn. The budget
// is a hard limit: a worker still running at its end is killed. Its probe in flight is a hang
// (device_error) when the worker had gone silent (scheduler/qualify/isolation.hpp), and otherwise skipped
// ("could not test: still progressing when the sweep budget ran out"), with the time it had, so the
// next estimate knows better.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/time.hpp"
#include "scheduler/consensus/fleet_seed.hpp"
#include "scheduler/qualify/isolation.hpp"
#include "scheduler/qualify/runner.hpp"
#include "scheduler/sweep/quarantine.hpp"

namespace sdc {

struct PassPlan {
  std::vector<size_t> probes;  // catalogue indices, in the order they run
};

// The probes a pass runs: from `cursor` on, wrapping, while the estimates fit `budget_s`; at least one.
PassPlan plan_pass(const std::vector<double>& estimates_s, size_t cursor, double budget_s);

struct SweepOptions {
  double every_s = 3600;
  double budget_s = 600;
  Level level = Level::kStandard;
  std::string idle_check;  // shell command; exit 0 means idle
  double idle_check_timeout_s = 60;
  bool once = false;
  std::string state_dir = kDefaultStateDir;
  std::string prom_dir;          // empty: no metrics
  double probe_timeout_s = 300;  // the watchdog of each probe
  QuarantinePolicy policy;
  std::optional<uint64_t> seed;  // every pass's seed; otherwise a new random one per pass
  // --seed fleet: each pass's seed from its UTC day or hour and the site secret (fleet_seed.hpp).
  std::optional<SeedPeriod> fleet_period;
  std::string fleet_secret;
  // Each pass's JSON report is written here (atomically), for `sdcprobe fleet sdc`; empty: none.
  std::string spool_dir;
  std::optional<uint64_t> size_bytes;
  std::optional<uint32_t> iterations;
  std::string inject;  // fault injection clauses, for tests and drills
  // Called with each pass's report once its results are in, before the pass is recorded complete
  // (the CLI's fleet store writer: scheduler/ never includes fleet/). It may throw, as the spool does.
  std::function<void(const RunReport&)> on_report;
};

// The worker command of a pass with these run options (its seed, level, sizes).
using WorkerCommandFactory = std::function<WorkerCommand(const RunOptions&)>;

// Runs the sweep until stopped (or one pass with `once`). Returns 0 (stopped, or a pass without
// fault), or 1 when a `once` pass found a fault. Throws InputError for unusable state or prom dirs,
// or when another sweep holds the state dir.
int run_sweep(const SweepOptions& options, const std::vector<DeviceIdentity>& devices,
              const std::vector<const Probe*>& catalogue, const WorkerCommandFactory& worker);

}  // namespace sdc
