#include "host/nvml/nvml_health.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <set>

#include "host/error.hpp"
#include "host/nvml/nvml_abi.hpp"
#include "host/nvml/nvml_library.hpp"
#include "host/pci_inventory.hpp"

namespace sdc {
namespace {

constexpr NvmlReturn kNonsense = -1;    // ours: NVML said success, but the values cannot be
constexpr NvmlReturn kWaitFailed = -2;  // ours: the event set's wait failed, for all its GPUs alike
// The fault limits of DCGM's software test: retired pages, uncorrectable-error row remaps.
constexpr unsigned long long kRetiredPagesLimit = 63;
constexpr unsigned long long kUncorrectableRemapsLimit = 512;
constexpr unsigned kEventDrainMs = 100;  // an XID of the window's last moment still arrives
// The XIDs a job's own error raises, which NVIDIA's Kubernetes device plugin skips: an illegal
// memory access (13, 31), a stopped or timed-out context (43, 109), a video decoder's exception (68),
// and 45, the driver's cleanup of a process that ended with work in flight, as a level's watchdog
// ends a hung worker. They say nothing of the GPU.
const std::set<unsigned long long> kApplicationXids = {13, 31, 43, 45, 68, 109};
// DCGM's allowance of PCIe replays: a bit error rate of 1e-12, over a window of at least a minute.
constexpr double kPcieBitsPerError = 1e12;
constexpr double kPcieReplayWindowMinS = 60;
// Each generation's transfer rate per lane, in GT/s: Gen1 to Gen6.
constexpr double kPcieLaneGtPerS[] = {2.5, 5, 8, 16, 32, 64};

// One query's answer: its status and, when it succeeded, the values. Until asked, none.
struct Answer {
  NvmlReturn rc = kNonsense;
  std::string error = "not read";
  std::vector<unsigned long long> values;
};

// What one read of one GPU returned.
struct Read {
  std::chrono::steady_clock::time_point at;
  Answer recovery;  // action
  Answer remap;     // correctable rows, uncorrectable rows, pending, failure
  Answer ecc;       // volatile uncorrectable errors
  Answer retired;   // pages retired for single-bit errors, for double-bit errors, pending
  Answer replays;   // PCIe replay counter
  Answer link;      // generation, max generation, width, max width, performance state before and after
};

struct Gpu {
  NvmlDevice device = nullptr;
  GpuHealth health;  // identity, then conditions
  Answer identity;   // a GPU whose handle or UUID NVML cannot give
  Read before;
  Answer events;                                          // registration for critical XIDs, then the wait
  std::map<unsigned long long, unsigned long long> xids;  // XID -> events
  bool named = false;                                     // selected by a --device token, not as one of all
};

class Nvml {
 public:
  explicit Nvml(const std::string& library) : nvml_(library), devices_(nvml_) {
    nvml_.check(nvml_.init(), "nvmlInit_v2");
  }
  ~Nvml() {
    if (set_ != nullptr) free_(set_);  // a window that threw before collect()
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  std::vector<Gpu> gpus() {
    unsigned count = 0;
    nvml_.check(devices_.count(&count), "nvmlDeviceGetCount_v2");
    std::vector<Gpu> gpus(count);
    for (unsigned i = 0; i < count; ++i) {
      Gpu& g = gpus[i];
      g.health.index = i;
      if (!ok(g.identity, devices_.handle(i, &g.device), "nvmlDeviceGetHandleByIndex_v2") ||
          !ok(g.identity, devices_.uuid(g.device, g.health.uuid), "nvmlDeviceGetUUID")) {
        continue;
      }
      NvmlPciInfo pci{};
      if (call(kNvmlDeviceGetPciInfo, g.device, &pci) == kNvmlSuccess) {
        g.health.pci_bus_id = std::string(pci.bus_id, strnlen(pci.bus_id, sizeof pci.bus_id));
      }
      char name[kNvmlNameBytes] = {};
      if (call(kNvmlDeviceGetName, g.device, name, kNvmlNameBytes) == kNvmlSuccess) {
        g.health.name = std::string(name, strnlen(name, sizeof name));
      }
    }
    return gpus;
  }

  Read read(NvmlDevice device) {
    Read r;
    r.at = std::chrono::steady_clock::now();
    NvmlFieldValue field{};
    field.field_id = kNvmlFieldRecoveryAction;
    // NVML answers a field id it does not know, as drivers before R565 this one, in the field's own
    // code: that driver does not support the field, as DCGM takes it.
    if (ok(r.recovery, call(kNvmlDeviceGetFieldValues, device, 1, &field), "nvmlDeviceGetFieldValues") &&
        ok(r.recovery, field.rc == kNvmlInvalidArgument ? kNvmlNotSupported : field.rc,
           "nvmlDeviceGetFieldValues (recovery action)")) {
      if (field.value_type == kNvmlValueUnsignedInt) {
        r.recovery.values = {field.value.ui};
      } else if (field.value_type == kNvmlValueUnsignedLong) {
        r.recovery.values = {field.value.ul};
      } else if (field.value_type == kNvmlValueUnsignedLongLong) {
        r.recovery.values = {field.value.ull};
      } else {
        nonsense(r.recovery, "nvmlDeviceGetFieldValues: the recovery action came as value type " +
                                 std::to_string(field.value_type));
      }
    }
    unsigned corrected = 0, uncorrected = 0, pending = 0, failure = 0;
    if (ok(r.remap, call(kNvmlDeviceGetRemappedRows, device, &corrected, &uncorrected, &pending, &failure),
           "nvmlDeviceGetRemappedRows")) {
      r.remap.values = {corrected, uncorrected, pending, failure};
    }
    unsigned long long ecc = 0;
    if (ok(r.ecc, call(kNvmlDeviceGetTotalEccErrors, device, kNvmlMemoryErrorUncorrected, kNvmlVolatileEcc, &ecc),
           "nvmlDeviceGetTotalEccErrors")) {
      r.ecc.values = {ecc};
    }
    r.retired = retired_pages(device);
    unsigned replays = 0;
    if (ok(r.replays, call(kNvmlDeviceGetPcieReplayCounter, device, &replays), "nvmlDeviceGetPcieReplayCounter")) {
      r.replays.values = {replays};
    }
    r.link = link(device);
    return r;
  }

  // Registers every GPU of `gpus` for critical XIDs on one event set.
  void watch(std::vector<Gpu*>& gpus) {
    create_ = nvml_.optional(kNvmlEventSetCreate);
    register_ = nvml_.optional(kNvmlDeviceRegisterEvents);
    wait_ = nvml_.optional(kNvmlEventSetWait);
    free_ = nvml_.optional(kNvmlEventSetFree);
    Answer created;
    if (create_ == nullptr || register_ == nullptr || wait_ == nullptr || free_ == nullptr) {
      created.rc = kNvmlNotSupported;
    } else {
      ok(created, create_(&set_), "nvmlEventSetCreate");
    }
    for (Gpu* g : gpus) {
      g->events = created;
      if (created.rc == kNvmlSuccess) {
        ok(g->events, register_(g->device, kNvmlEventXidCritical, set_), "nvmlDeviceRegisterEvents");
      }
    }
  }

  // The critical XIDs delivered since watch(), each counted on its GPU.
  void collect(std::vector<Gpu*>& gpus) {
    if (set_ == nullptr) return;
    for (;;) {
      NvmlEventData event{};
      const NvmlReturn rc = wait_(set_, &event, kEventDrainMs);
      if (rc == kNvmlTimeout) break;
      if (rc != kNvmlSuccess) {
        // The wait answers for the set, not for one GPU: its error (even "GPU is lost") leaves every
        // GPU's XIDs untested; a lost GPU is named by its own reads.
        for (Gpu* g : gpus) {
          if (g->events.rc != kNvmlSuccess) continue;
          g->events.rc = kWaitFailed;
          g->events.error = nvml_.error("nvmlEventSetWait_v2", rc);
        }
        break;
      }
      for (Gpu* g : gpus) {
        if (g->device == event.device && (event.type & kNvmlEventXidCritical) != 0) {
          ++g->xids[event.data];
        }
      }
    }
    free_(set_);
    set_ = nullptr;
  }

 private:
  // An entry point older drivers lack answers "not supported".
  template <typename F, typename... Args>
  NvmlReturn call(NvmlEntry<F> entry, Args... args) {
    const F f = nvml_.optional(entry);
    return f == nullptr ? kNvmlNotSupported : f(args...);
  }
  bool ok(Answer& a, NvmlReturn rc, const std::string& what) {
    a.rc = rc;
    if (rc != kNvmlSuccess && rc != kNvmlNotSupported) a.error = nvml_.error(what, rc);
    return rc == kNvmlSuccess;
  }
  static void nonsense(Answer& a, const std::string& why) {
    a.rc = kNonsense;
    a.error = why;
    a.values.clear();
  }

  Answer retired_pages(NvmlDevice device) {
    Answer a;
    for (unsigned cause : {kNvmlRetiredMultipleSingleBit, kNvmlRetiredDoubleBit}) {
      unsigned count = 0;  // 0: the count alone; more pages than that answer "insufficient size"
      NvmlReturn rc = call(kNvmlDeviceGetRetiredPages, device, cause, &count, nullptr);
      if (rc == kNvmlInsufficientSize) rc = kNvmlSuccess;
      if (!ok(a, rc, "nvmlDeviceGetRetiredPages")) return a;
      a.values.push_back(count);
    }
    unsigned pending = 0;  // nvmlEnableState_t
    if (!ok(a, call(kNvmlDeviceGetRetiredPagesPendingStatus, device, &pending),
            "nvmlDeviceGetRetiredPagesPendingStatus")) {
      a.values.clear();
      return a;
    }
    a.values.push_back(pending);
    return a;
  }

  Answer link(NvmlDevice device) {
    Answer a;
    const unsigned before = pstate(device);
    for (const auto& entry : {kNvmlDeviceGetCurrPcieLinkGeneration, kNvmlDeviceGetMaxPcieLinkGeneration,
                              kNvmlDeviceGetCurrPcieLinkWidth, kNvmlDeviceGetMaxPcieLinkWidth}) {
      unsigned v = 0;
      if (!ok(a, call(entry, device, &v), entry.symbol)) {
        a.values.clear();
        return a;
      }
      a.values.push_back(v);
    }
    a.values.push_back(before);
    a.values.push_back(pstate(device));
    return a;
  }
  // The link is judged only at P0: its performance state is read before and after its values.
  unsigned pstate(NvmlDevice device) {
    unsigned p = kNvmlPstateUnknown;
    return call(kNvmlDeviceGetPerformanceState, device, &p) == kNvmlSuccess ? p : kNvmlPstateUnknown;
  }

  NvmlLibrary nvml_;
  NvmlDevices devices_;
  NvmlReturn (*create_)(NvmlEventSet*) = nullptr;
  NvmlReturn (*register_)(NvmlDevice, unsigned long long, NvmlEventSet) = nullptr;
  NvmlReturn (*wait_)(NvmlEventSet, NvmlEventData*, unsigned) = nullptr;
  NvmlReturn (*free_)(NvmlEventSet) = nullptr;
  NvmlEventSet set_ = nullptr;
};

// --- Judging: one condition from what was read ------------------------------------------------

HealthCondition condition(const char* field) { return HealthCondition{field, ConditionState::kHealthy, "", {}}; }

// False when the query gave no values; the condition then says why.
bool answered(const Answer& a, HealthCondition& c) {
  if (a.rc == kNvmlSuccess) return true;
  if (a.rc == kNvmlNotSupported) {
    c.state = ConditionState::kNotSupported;
    c.detail = "not supported by this GPU or driver";
  } else if (a.rc == kNvmlGpuIsLost) {
    c.state = ConditionState::kFault;
    c.detail = "NVML reports the GPU lost (fallen off the bus): reboot the node, replace the GPU if it recurs";
  } else if (a.rc == kNvmlResetRequired) {
    c.state = ConditionState::kFault;
    c.detail = "NVML answers that the GPU needs a reset: reset it (nvidia-smi -r) before it runs work again";
  } else {
    c.state = ConditionState::kCouldNotTest;
    c.detail = "could not test: " + a.error;
  }
  return false;
}

void fault(HealthCondition& c, const std::string& detail) {
  c.state = ConditionState::kFault;
  c.detail = detail;
}

void nonsense(HealthCondition& c, const std::string& detail) {
  c.state = ConditionState::kCouldNotTest;
  c.detail = "could not test: NVML answered " + detail;
}

HealthCondition recovery_action(const Read& r) {
  HealthCondition c = condition("recovery_action");
  if (!answered(r.recovery, c)) {
    if (c.state == ConditionState::kNotSupported) {
      c.detail = "not supported by this GPU or driver (the field came with R565)";
    }
    return c;
  }
  const unsigned long long action = r.recovery.values[0];
  c.readings = {{"action", action}};
  switch (action) {
    case kNvmlRecoveryNone: c.detail = "none"; break;
    case kNvmlRecoveryGpuReset:
      fault(c, "reset: the driver asks for a GPU reset (nvidia-smi -r) before the GPU runs work again");
      break;
    case kNvmlRecoveryNodeReboot:
      fault(c, "reboot: the driver asks for a node reboot; a GPU reset is not enough");
      break;
    case kNvmlRecoveryDrainP2p:
      fault(c, "drain_p2p: stop peer-to-peer (NVLink) traffic on the GPU, then read its health again");
      break;
    case kNvmlRecoveryDrainAndReset:
      fault(c, "drain_and_reset: the GPU runs at reduced capacity: drain its work, then reset it");
      break;
    case kNvmlRecoveryRecoverImexDomain:
      fault(c,
            "recover_imex_domain: the driver asks for the GPU's IMEX domain (memory shared over multi-node "
            "NVLink) to be recovered");
      break;
    case kNvmlRecoveryBusReset: fault(c, "bus_reset: the driver asks for a reset of the GPU's PCIe bus"); break;
    case kNvmlRecoverySystemReboot: fault(c, "system_reboot: the driver asks for a system reboot"); break;
    default: fault(c, "action " + std::to_string(action) + " (unknown to this sdcprobe; see nvidia-smi -q)");
  }
  return c;
}

HealthCondition row_remap(const Read& r) {
  HealthCondition c = condition("row_remap");
  if (!answered(r.remap, c)) return c;
  const auto& v = r.remap.values;
  if (v[2] > 1 || v[3] > 1) {
    nonsense(c, "pending " + std::to_string(v[2]) + " and failure " + std::to_string(v[3]) + " (each 0 or 1)");
    return c;
  }
  c.readings = {{"correctable_rows", v[0]}, {"uncorrectable_rows", v[1]}, {"pending", v[2]}, {"failure", v[3]}};
  const std::string rows = std::to_string(v[0]) + " correctable, " + std::to_string(v[1]) + " uncorrectable";
  if (v[3] != 0) {
    fault(c, "a row remap failed (" + rows + " rows remapped): the memory cannot be repaired: replace the GPU");
  } else if (v[2] != 0) {
    fault(c, "a row remap is pending (" + rows + " rows remapped): the GPU needs a reset to apply it");
  } else if (v[1] >= kUncorrectableRemapsLimit) {
    fault(c, rows + " rows remapped: " + std::to_string(kUncorrectableRemapsLimit) +
                 " or more uncorrectable-error remaps: replace the GPU");
  } else {
    c.detail = rows + " rows remapped";
  }
  return c;
}

HealthCondition ecc_uncorrectable(const Read& r, const Read* before) {
  HealthCondition c = condition("ecc_uncorrectable");
  if (!answered(r.ecc, c)) {
    if (c.state == ConditionState::kNotSupported) c.detail = "not supported: ECC is off or absent";
    return c;
  }
  const unsigned long long now = r.ecc.values[0];
  c.readings = {{"volatile", now}};
  std::string during;
  if (before != nullptr && before->ecc.rc == kNvmlSuccess && now >= before->ecc.values[0]) {
    c.readings.push_back({"during_window", now - before->ecc.values[0]});
    during = ", " + std::to_string(now - before->ecc.values[0]) + " during the run";
  }
  if (now > 0) {
    fault(c, std::to_string(now) + " uncorrectable ECC errors since the driver loaded" + during +
                 ": data in the GPU's memory was lost; reset the GPU, replace it if they recur");
  } else {
    c.detail = "none since the driver loaded";
  }
  return c;
}

HealthCondition retired_pages(const Read& r) {
  HealthCondition c = condition("retired_pages");
  if (!answered(r.retired, c)) {
    if (c.state == ConditionState::kNotSupported) c.detail = "not supported (a GPU that remaps rows instead)";
    return c;
  }
  const auto& v = r.retired.values;
  if (v[2] > 1) {
    nonsense(c, "pending status " + std::to_string(v[2]) + " (0 or 1)");
    return c;
  }
  const unsigned long long total = v[0] + v[1];
  c.readings = {{"single_bit", v[0]}, {"double_bit", v[1]}, {"pending", v[2]}};
  if (v[2] != 0) {
    fault(c, std::to_string(total) + " pages retired, more pending: reset the GPU (or reboot) to retire them");
  } else if (total >= kRetiredPagesLimit) {
    fault(c, std::to_string(total) + " pages retired (" + std::to_string(kRetiredPagesLimit) +
                 " or more): replace the GPU");
  } else {
    c.detail = std::to_string(total) + " pages retired";
  }
  return c;
}

bool link_width(unsigned long long w) { return w == 1 || w == 2 || w == 4 || w == 8 || w == 12 || w == 16 || w == 32; }

// Replays are judged against what a healthy link makes over the window, at the link's maximum speed
// and width: the counter spans every speed the link ran at, and the maximum allows the most.
HealthCondition pcie_replays(const Read& r, const Read* before) {
  HealthCondition c = condition("pcie_replays");
  if (!answered(r.replays, c)) return c;
  const unsigned long long now = r.replays.values[0];
  c.readings = {{"counter", now}};
  if (before == nullptr) {
    c.state = ConditionState::kNotTested;
    c.detail = "counter " + std::to_string(now) + "; climbing is judged over a window (a level, or --watch)";
    return c;
  }
  HealthCondition was = condition("pcie_replays");
  if (!answered(before->replays, was)) return was;
  const unsigned long long then = before->replays.values[0];
  if (now < then) {
    nonsense(c, "a replay counter that went back from " + std::to_string(then) + " to " + std::to_string(now));
    return c;
  }
  const unsigned long long during = now - then;
  c.readings.push_back({"during_window", during});
  if (during == 0) {
    c.detail = "counter " + std::to_string(now) + ", no replay during the run";
    return c;
  }
  HealthCondition link = condition("pcie_replays");
  if (!answered(r.link, link)) {
    c.state = link.state;
    c.detail = std::to_string(during) + " replays during the run, not judged: the allowance needs the link's speed " +
               "and width (" + link.detail + ")";
    return c;
  }
  const unsigned long long gen = r.link.values[1], width = r.link.values[3];
  if (gen < 1 || gen > 16 || !link_width(width)) {
    nonsense(c, "a link of at most Gen" + std::to_string(gen) + " x" + std::to_string(width));
    return c;
  }
  const double seconds = std::chrono::duration<double>(r.at - before->at).count();
  const unsigned long long allowed =
      pcie_replay_allowance(static_cast<unsigned>(gen), static_cast<unsigned>(width), seconds);
  c.readings.push_back({"allowed", allowed});
  const std::string link_text = " allowed at Gen" + std::to_string(gen) + " x" + std::to_string(width);
  if (during > allowed) {
    fault(c, "PCIe replays climbed from " + std::to_string(then) + " to " + std::to_string(now) +
                 " during the run, more than the " + std::to_string(allowed) + link_text +
                 " (a bit error rate of 1e-12): the link retransmits; reseat the GPU, check its riser or cable");
  } else {
    c.detail = std::to_string(during) + " replays during the run, within the " + std::to_string(allowed) + link_text;
  }
  return c;
}

std::string xid_text(unsigned long long xid) {
  static const std::map<unsigned long long, const char*> kKnown = {{13, "graphics engine exception"},
                                                                   {31, "GPU memory page fault"},
                                                                   {43, "GPU stopped processing"},
                                                                   {45, "preemptive cleanup"},
                                                                   {48, "double-bit ECC error"},
                                                                   {63, "row remapping event"},
                                                                   {64, "row remapping failure"},
                                                                   {68, "video processor exception"},
                                                                   {74, "NVLink error"},
                                                                   {79, "fallen off the bus"},
                                                                   {92, "high single-bit ECC error rate"},
                                                                   {94, "contained ECC error"},
                                                                   {95, "uncontained ECC error"},
                                                                   {109, "context switch timeout"},
                                                                   {119, "GSP timeout"},
                                                                   {120, "GSP error"}};
  const auto k = kKnown.find(xid);
  return "XID " + std::to_string(xid) + (k == kKnown.end() ? "" : std::string(" (") + k->second + ")");
}

HealthCondition xid(const Gpu& g, bool watched) {
  HealthCondition c = condition("xid");
  if (!watched) {
    c.state = ConditionState::kNotTested;
    c.detail = "XID events are watched over a window (a level, or --watch)";
    return c;
  }
  if (!answered(g.events, c)) return c;
  std::string gpus, jobs;  // the GPU's XIDs, and those a job's own error raises
  for (const auto& [x, n] : g.xids) {
    c.readings.push_back({"xid_" + std::to_string(x), n});
    std::string& seen = kApplicationXids.count(x) != 0 ? jobs : gpus;
    seen += (seen.empty() ? "" : ", ") + xid_text(x) + (n > 1 ? " x" + std::to_string(n) : "");
  }
  const std::string own = jobs.empty() ? "" : "; a job's own: " + jobs;
  if (!gpus.empty()) {
    fault(c, "critical " + gpus + " during the run: look the XID up in NVIDIA's XID catalogue for what to do" + own);
  } else {
    c.detail = (jobs.empty() ? "no critical XID during the run" : "no critical XID of the GPU's during the run") + own;
  }
  return c;
}

std::string pstate_name(unsigned long long p) {
  return p == kNvmlPstateUnknown ? "an unknown performance state" : "P" + std::to_string(p);
}

// An idle GPU lowers its link's generation, and may narrow it, to save power: both are judged only at
// P0 before and after the link is read, as DCGM judges them during its PCIe test's load.
std::vector<HealthCondition> pcie_link(const Read& r) {
  HealthCondition width = condition("pcie_link_width");
  HealthCondition gen = condition("pcie_link_gen");
  const bool read = answered(r.link, width);
  answered(r.link, gen);
  if (!read) return {width, gen};
  const auto& v = r.link.values;  // gen, max gen, width, max width, pstate before, pstate after
  const bool at_p0 = v[4] == 0 && v[5] == 0;
  const std::string at =
      " at " + pstate_name(v[4]) + (v[4] == v[5] ? "" : ", then " + pstate_name(v[5]) + " while it was read");
  const std::vector<std::pair<std::string, unsigned long long>> pstates = {{"pstate_before", v[4]},
                                                                           {"pstate_after", v[5]}};
  const std::string degraded = " under load (P0): a degraded PCIe link; reseat the GPU, check its slot, riser or cable";
  if (!link_width(v[2]) || !link_width(v[3]) || v[2] > v[3]) {
    nonsense(width, "link width x" + std::to_string(v[2]) + " of a maximum x" + std::to_string(v[3]));
  } else {
    width.readings = {{"current", v[2]}, {"max", v[3]}};
    width.readings.insert(width.readings.end(), pstates.begin(), pstates.end());
    const std::string text = "x" + std::to_string(v[2]) + " of x" + std::to_string(v[3]);
    if (v[2] == v[3]) {
      width.detail = "x" + std::to_string(v[2]);
    } else if (at_p0) {
      fault(width, text + degraded);
    } else {
      width.state = ConditionState::kNotTested;
      width.detail = text + at + ": an idle GPU may narrow its link; judged at P0 only";
    }
  }
  if (v[0] < 1 || v[0] > 16 || v[1] < 1 || v[1] > 16 || v[0] > v[1]) {
    nonsense(gen, "link generation " + std::to_string(v[0]) + " of a maximum " + std::to_string(v[1]));
    return {width, gen};
  }
  gen.readings = {{"current", v[0]}, {"max", v[1]}};
  gen.readings.insert(gen.readings.end(), pstates.begin(), pstates.end());
  const std::string text = "Gen" + std::to_string(v[0]) + " of Gen" + std::to_string(v[1]);
  if (v[0] == v[1]) {
    gen.detail = "Gen" + std::to_string(v[0]);
  } else if (at_p0) {
    fault(gen, text + degraded);
  } else {
    gen.state = ConditionState::kNotTested;
    gen.detail = text + at + ": an idle GPU lowers its link generation; judged at P0 only";
  }
  return {width, gen};
}

void judge(Gpu& g, const Read& after, const Read* before, bool watched) {
  if (g.identity.rc == kNvmlNoPermission && !g.named) {
    g.health.conditions = {{"gpu",
                            ConditionState::kNotPermitted,
                            "not this process's: NVML denies it the GPU (no permission: a cgroup, as Slurm's "
                            "ConstrainDevices or a container's, gives it to another job)",
                            {}}};
    return;
  }
  if (g.identity.rc != kNvmlSuccess) {
    HealthCondition c = condition("gpu");
    answered(g.identity, c);
    g.health.conditions = {c};
    return;
  }
  g.health.conditions = {recovery_action(after),           row_remap(after),
                         ecc_uncorrectable(after, before), retired_pages(after),
                         pcie_replays(after, before),      xid(g, watched)};
  for (HealthCondition& c : pcie_link(after)) g.health.conditions.push_back(std::move(c));
}

bool selected(const GpuHealth& g, const std::string& token) {
  const auto bus_id = normalize_pci_bus_id(token);
  return token == g.uuid || token == std::to_string(g.index) ||
         (bus_id && bus_id == normalize_pci_bus_id(g.pci_bus_id));
}

GpuHealth unlisted(const std::string& token) {
  GpuHealth g;
  g.uuid = token;
  g.conditions = {{"gpu", ConditionState::kCouldNotTest, "could not test: NVML lists no GPU " + token, {}}};
  return g;
}

}  // namespace

const char* condition_state_name(ConditionState state) {
  switch (state) {
    case ConditionState::kHealthy: return "healthy";
    case ConditionState::kFault: return "fault";
    case ConditionState::kNotSupported: return "not_supported";
    case ConditionState::kNotTested: return "not_tested";
    case ConditionState::kCouldNotTest: return "could_not_test";
    case ConditionState::kNotPermitted: return "not_permitted";
  }
  return "could_not_test";
}

ConditionState GpuHealth::verdict() const {
  if (std::any_of(conditions.begin(), conditions.end(),
                  [](const HealthCondition& c) { return c.state == ConditionState::kNotPermitted; })) {
    return ConditionState::kNotPermitted;
  }
  bool could_not_test = false, judged = false;
  for (const HealthCondition& c : conditions) {
    if (c.state == ConditionState::kFault) return ConditionState::kFault;
    could_not_test = could_not_test || c.state == ConditionState::kCouldNotTest;
    judged = judged || c.state == ConditionState::kHealthy;
  }
  return could_not_test || !judged ? ConditionState::kCouldNotTest : ConditionState::kHealthy;
}

size_t permitted_gpus(const HealthReport& report) {
  return static_cast<size_t>(std::count_if(report.gpus.begin(), report.gpus.end(), [](const GpuHealth& g) {
    return g.verdict() != ConditionState::kNotPermitted;
  }));
}

int health_exit_code(const HealthReport& report) {
  if (!report.applicable) return 0;
  bool could_not_test = !report.error.empty() || permitted_gpus(report) == 0;
  for (const GpuHealth& g : report.gpus) {
    if (g.verdict() == ConditionState::kFault) return 1;
    could_not_test = could_not_test || g.verdict() == ConditionState::kCouldNotTest;
  }
  return could_not_test ? 2 : 0;
}

unsigned long long pcie_replay_allowance(unsigned gen, unsigned width, double seconds) {
  const double gt_per_s = kPcieLaneGtPerS[std::clamp<size_t>(gen, 1, std::size(kPcieLaneGtPerS)) - 1];
  const double bits = gt_per_s * 1e9 * width * std::max(seconds, kPcieReplayWindowMinS);
  return static_cast<unsigned long long>(std::ceil(bits / kPcieBitsPerError));
}

const char* health_verdict_name(const HealthReport& report) {
  if (!report.applicable) return "not_applicable";
  const int code = health_exit_code(report);
  return code == 0 ? "healthy" : code == 1 ? "fault" : "could_not_test";
}

HealthReport read_gpu_health(const std::string& library, const std::vector<std::string>& select,
                             const std::function<void()>& window) {
  HealthReport report;
  report.watched = static_cast<bool>(window);
  std::unique_ptr<Nvml> nvml;
  std::vector<Gpu> gpus;
  std::vector<Gpu*> chosen;
  try {
    try {
      nvml = std::make_unique<Nvml>(library);
    } catch (const NvmlLoadError& e) {
      const size_t on_bus = gpus_on_bus(system_root()).size();
      // No driver and no NVIDIA GPU: nothing to read. GPUs without NVML: nobody can tell.
      if (e.not_installed() && on_bus == 0) {
        report.applicable = false;
      } else {
        report.error =
            e.what() + (on_bus > 0 ? " (" + std::to_string(on_bus) + " NVIDIA GPUs on the PCI bus)" : std::string());
      }
    }
    if (nvml != nullptr) {
      gpus = nvml->gpus();
      for (Gpu& g : gpus) {
        const bool wanted = select.empty() || std::any_of(select.begin(), select.end(),
                                                          [&](const std::string& t) { return selected(g.health, t); });
        if (wanted) chosen.push_back(&g);
        g.named = !select.empty();
      }
      if (window) {
        for (Gpu* g : chosen) {
          if (g->identity.rc == kNvmlSuccess) g->before = nvml->read(g->device);
        }
        nvml->watch(chosen);
      }
    }
  } catch (const std::exception& e) {
    report.error = describe_error(e);
  }
  if (window) window();
  if (nvml == nullptr) return report;
  try {
    if (window) nvml->collect(chosen);
    for (Gpu* g : chosen) {
      const Read after = g->identity.rc == kNvmlSuccess ? nvml->read(g->device) : Read{};
      judge(*g, after, window ? &g->before : nullptr, report.watched);
      report.gpus.push_back(g->health);
    }
  } catch (const std::exception& e) {
    report.error = describe_error(e);
  }
  for (const std::string& token : select) {
    if (report.error.empty() &&
        std::none_of(gpus.begin(), gpus.end(), [&](const Gpu& g) { return selected(g.health, token); })) {
      report.gpus.push_back(unlisted(token));
    }
  }
  return report;
}

}  // namespace sdc
