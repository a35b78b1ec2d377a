// The runner: runs probes on devices within one process, turns API failures into `skipped` and
// sticky device errors into `device_error`, and builds the report every mode prints.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/device.hpp"
#include "host/injection.hpp"
#include "host/nvml/nvml_health.hpp"
#include "probes/probe.hpp"
#include "scheduler/consensus/collective.hpp"
#include "scheduler/consensus/consensus.hpp"

namespace sdc {

struct RunOptions {
  uint64_t seed = 0;
  Level level = Level::kQuick;
  std::optional<uint64_t> size_bytes;     // mem.* probes only (--size)
  std::optional<uint64_t> compute_bytes;  // GEMM and SFU probes: no CLI option (docs/probes.md)
  std::optional<uint32_t> iterations;
  std::optional<uint32_t> gemm_n;  // GEMM probes: as ProbeContext (coverage only)
  bool gemm_cuda_model = false;
  std::optional<double> burn_s;                     // gemm.burn.*: as ProbeContext (--burn)
  std::optional<ConditionsSource> burn_conditions;  // gemm.burn.*: as ProbeContext (tests)
  Injector* injector = nullptr;
  int rank = 0;  // this process's rank under MPI (0 otherwise)
  // Called before each probe starts: (done, total, device, probe id).
  std::function<void(size_t, size_t, const DeviceIdentity&, const std::string&)> on_start;
};

struct RunReport {
  std::string mode;  // "qualify", "run" or "sweep"
  std::string host;
  uint64_t seed = 0;
  // Where the seed came from: given, random, golden, or fleet:day:DATE / fleet:hour:DATE (the
  // fleet seed); empty where the caller does not say.
  std::string seed_origin;
  Level level = Level::kQuick;
  // --size and --iterations where given (the digests depend on them); none: the level's defaults.
  std::optional<uint64_t> size_bytes;
  std::optional<uint32_t> iterations;
  std::string started_at;  // RFC 3339, UTC
  double duration_s = 0;
  double budget_s = 0;  // the probes' time budget (an isolated qualify's); 0: none
  std::vector<DeviceIdentity> devices;
  std::vector<ProbeResult> results;
  std::vector<std::string> injections;  // the active --inject clauses, so a report is never mistaken for a real fault
  int rank = 0;
  std::optional<ConsensusOutcome> consensus;   // qualify --consensus
  std::optional<CollectiveResult> collective;  // qualify --consensus: coll.allreduce_exact
  // The tested GPUs' own health, read before and after the probes (level_health); a fault fails
  // the run even when every probe passed.
  std::optional<HealthReport> health;
};

// The seed a probe uses: a pure function of the run seed and the probe id, the same on every device.
uint64_t probe_seed(uint64_t run_seed, const std::string& probe_id);

// A report with the run's mode, host, seed, level, start time and injections, and no results yet.
RunReport new_report(const RunOptions& options, const std::string& mode);

// Runs one probe on one device. Never throws for device or API failures; rethrows InputError. A
// result that checked 0 elements is `skipped`, never a pass.
ProbeResult run_probe(const Probe& probe, Device& device, const RunOptions& options);

// Runs `probes` on every device, in order. After a device_error the device's remaining probes are
// skipped: its context is unusable and it must be retested in a fresh process.
RunReport run_probes(const std::vector<const Probe*>& probes, const std::vector<std::unique_ptr<Device>>& devices,
                     const RunOptions& options, const std::string& mode);

// 0 pass; 1 a fault found (fail or device_error, a GPU's own health, or consensus names a device of
// this host and rank or cannot decide a vote it took part in); 2 could not test (no device, a probe
// skipped, or the GPUs' health unreadable).
int exit_code_of(const RunReport& report);
// One line: PASS / FAIL / COULD NOT TEST, naming each faulty device by label, UUID and bus id (a GPU
// CUDA does not show with why), and the devices tested.
std::string verdict_line(const RunReport& report);
// node-problem-detector's verdict, at most kNpdVerdictMax characters: "OK: …", "SDC: UUID probe…"
// (also the Slurm drain reason) or "UNKNOWN: could not test …".
inline constexpr size_t kNpdVerdictMax = 80;
std::string npd_verdict(const RunReport& report);
// The same verdict when no report could be made (bad input, no device, no CUDA): "UNKNOWN: could not
// test: <why>", one line, at most kNpdVerdictMax characters.
std::string npd_could_not_test(const std::string& why);
// The rate column: GB/s moved for memory probes (mem.*), GFLOP/s (TFLOP/s from 1000 GFLOP/s on)
// computed for the others, over the probe's own time (duration_s - setup_s: without allocating and
// pre-faulting its buffer); "-" when the probe took no time or reported no work.
std::string rate_text(const ProbeResult& r);
// What a run covered of one device: the largest share of its memory a mem.* probe tested (none
// without a memory probe), and the share of the budget its probes took (none without a budget).
struct DeviceCoverage {
  std::optional<double> memory_fraction;
  std::optional<double> budget_fraction;
};
DeviceCoverage device_coverage(const RunReport& report, const DeviceIdentity& device);
// One row per device and probe, then a line per device with its coverage.
std::string results_table(const RunReport& report);
nlohmann::json report_json(const RunReport& report);

// Device selection for `run --device`: comma-separated indices, UUIDs or PCI bus ids, or "all".
std::vector<std::unique_ptr<Device>> select_devices(std::vector<std::unique_ptr<Device>> devices,
                                                    const std::string& selector);
std::vector<DeviceIdentity> select_identities(const std::vector<DeviceIdentity>& devices, const std::string& selector);

// A device's identity as `sdcprobe devices --json` and the report print it, and back.
nlohmann::json identity_to_json(const DeviceIdentity& device);
DeviceIdentity identity_from_json(const nlohmann::json& j);

}  // namespace sdc
