// What a GPU says about its own health, read through NVML (loaded at run time, like the process
// lists): the recovery action the driver asks for, row remapping, uncorrectable ECC errors, retired
// pages, the PCIe link and its replays, and critical XID events. Each condition is judged on its
// own (docs/probes.md, "What the GPU says about itself"); an answer NVML could not give is never
// taken for a healthy one.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sdc {

enum class ConditionState {
  kHealthy,
  kFault,
  kNotSupported,  // this GPU or driver lacks the counter
  kNotTested,     // this read cannot judge it: no window to watch, or an idle link's generation
  kCouldNotTest,  // the driver answered with an error or with values that cannot be
  kNotPermitted,  // a GPU this process may not open (a cgroup gives it to another job): not its
};
const char* condition_state_name(ConditionState state);

struct HealthCondition {
  std::string field;  // recovery_action, row_remap, ecc_uncorrectable, retired_pages, pcie_replays, xid,
                      // pcie_link_width, pcie_link_gen; gpu for a GPU NVML gives no handle to
  ConditionState state = ConditionState::kCouldNotTest;
  std::string detail;                                                // one line; a fault says what to do
  std::vector<std::pair<std::string, unsigned long long>> readings;  // the figures read
};

struct GpuHealth {
  unsigned index = 0;  // NVML's
  std::string uuid;
  std::string pci_bus_id;
  std::string name;
  std::vector<HealthCondition> conditions;
  // Not permitted for a GPU this process may not open; else a fault when any condition is one; else
  // could not test when any is, or when none was judged healthy; else healthy (conditions not
  // supported or not tested are named in the report, never counted as healthy).
  ConditionState verdict() const;
};

struct HealthReport {
  bool applicable = true;  // false: no NVIDIA GPU here (the CPU backend, or no driver and none on the bus)
  bool watched = false;    // read before and after a window (a level, or `health --watch`)
  std::string error;       // why the driver could not be read; `gpus` then holds what was read before
  std::vector<GpuHealth> gpus;
};

// 0 healthy (or not applicable), 1 a fault on any GPU, 2 could not test (the driver, a condition,
// a GPU with nothing judged, or no GPU this process may open). GPUs it may not open are not judged.
int health_exit_code(const HealthReport& report);
// The GPUs of `report` this process may open: those whose verdict is not "not permitted".
size_t permitted_gpus(const HealthReport& report);
// "healthy", "fault", "could_not_test" or "not_applicable".
const char* health_verdict_name(const HealthReport& report);

// Reads the health of the GPUs `select` names (UUIDs, PCI bus ids or NVML indices; empty: every
// GPU, those this process may not open named as not permitted) through NVML at `library`, before and
// after `window` runs, watching for critical XIDs in between; without a window, once. `window` runs exactly once
// whatever NVML does, so a level's results are never lost to a driver that does not answer. No NVML library: not
// applicable when no NVIDIA GPU is on the PCI bus, else could not test. The PCIe replays a healthy link may make in
// `seconds`, as DCGM allows them: a bit error rate of 1e-12 at generation `gen`'s transfer rate on `width` lanes, over
// at least a minute (DCGM's window), rounded up. A generation past Gen6 has Gen6's rate.
unsigned long long pcie_replay_allowance(unsigned gen, unsigned width, double seconds);

HealthReport read_gpu_health(const std::string& library, const std::vector<std::string>& select,
                             const std::function<void()>& window);

}  // namespace sdc
