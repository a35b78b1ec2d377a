// The stand-in NVML's health queries, for `sdcprobe health` and the level's health read. Each
// variable holds "GPU-a=SPEC;GPU-b=SPEC"; a GPU without an entry answers healthy. SPEC is the values,
// comma-separated, or `unsupported` (NVML_ERROR_NOT_SUPPORTED), `error` (NVML_ERROR_UNKNOWN), `lost`
// (NVML_ERROR_GPU_IS_LOST), `reset` (NVML_ERROR_RESET_REQUIRED) or `invalid`
// (NVML_ERROR_INVALID_ARGUMENT):
//   FAKE_NVML_RECOVERY  action[,value type]         default 0 (none), as an unsigned int. The codes are
//                       the field's own (nvmlFieldValue_t's nvmlReturn; the call itself succeeds):
//                       `invalid` is what NVML answers for a field id it does not know, as drivers
//                       before R565 answer this one
//   FAKE_NVML_REMAP     correctable,uncorrectable,pending,failure
//   FAKE_NVML_ECC       volatile uncorrectable errors
//   FAKE_NVML_RETIRED   single-bit pages,double-bit pages,pending
//   FAKE_NVML_REPLAYS   counter[,step]: each read adds step (-5: takes 5)
//   FAKE_NVML_XID       XIDs (any number), each delivered once to an event set the GPU is registered on
//   FAKE_NVML_LINK      generation,max generation,width,max width   default 5,5,16,16
//   FAKE_NVML_PSTATE    the performance states successive reads answer, the last repeating   default 0
// FAKE_NVML_WAIT=lost or error makes nvmlEventSetWait_v2 fail so, once the XIDs are delivered.
// fake_nvml_event_sets_open() counts the event sets created and not freed.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "host/nvml/nvml_abi.hpp"
#include "tests/host/nvml/fake_nvml.hpp"

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kInsufficientSize = 7, kTimeout = 10,
              kGpuIsLost = 15, kResetRequired = 16, kUnknown = 999;

struct Spec {
  int rc = kSuccess;
  std::vector<unsigned long long> values;
};

// The spec of `variable` for the GPU of `device`, or `defaults`.
Spec spec(const char* variable, void* device, std::vector<unsigned long long> defaults) {
  const std::vector<fake_nvml::FakeGpu> all = fake_nvml::gpus();
  const size_t index = reinterpret_cast<size_t>(device) - 1;
  if (index >= all.size()) return {kInvalidArgument, {}};
  const char* text = std::getenv(variable);
  std::istringstream entries(text != nullptr ? text : "");
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || entry.substr(0, eq) != all[index].uuid) continue;
    const std::string value = entry.substr(eq + 1);
    if (value == "unsupported") return {kNotSupported, {}};
    if (value == "error") return {kUnknown, {}};
    if (value == "lost") return {kGpuIsLost, {}};
    if (value == "reset") return {kResetRequired, {}};
    if (value == "invalid") return {kInvalidArgument, {}};
    Spec s;
    std::istringstream numbers(value);
    std::string n;
    while (std::getline(numbers, n, ',')) s.values.push_back(std::stoull(n));
    for (size_t i = s.values.size(); i < defaults.size(); ++i) s.values.push_back(defaults[i]);
    return s;
  }
  return {kSuccess, defaults};
}

std::map<size_t, unsigned> g_replay_reads;  // device -> reads so far
std::map<size_t, unsigned> g_pstate_reads;  // device -> reads so far
std::deque<sdc::NvmlEventData> g_events;    // the registered GPUs' XIDs not yet delivered
int g_event_set = 0;
int g_event_sets_open = 0;

int get(const char* variable, void* device, std::vector<unsigned long long> defaults, Spec& out) {
  out = spec(variable, device, std::move(defaults));
  return out.rc;
}

}  // namespace

extern "C" {
int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  const size_t index = reinterpret_cast<size_t>(device) - 1;
  std::snprintf(name, length, "Fake GPU %zu", index);
  return kSuccess;
}
int nvmlDeviceGetPciInfo_v3(void* device, sdc::NvmlPciInfo* pci) {
  const size_t index = reinterpret_cast<size_t>(device) - 1;
  *pci = {};
  std::snprintf(pci->bus_id, sizeof pci->bus_id, "00000000:%02zX:00.0", 0x10 + index);
  return kSuccess;
}
int nvmlDeviceGetFieldValues(void* device, int count, sdc::NvmlFieldValue* values) {
  for (int i = 0; i < count; ++i) {
    Spec s;
    values[i].rc = values[i].field_id == 230 ? get("FAKE_NVML_RECOVERY", device, {0, 1}, s) : kInvalidArgument;
    if (values[i].rc != kSuccess) continue;
    values[i].value_type = static_cast<int>(s.values[1]);
    values[i].value.ull = 0;
    values[i].value.ui = static_cast<unsigned>(s.values[0]);
  }
  return kSuccess;
}
int nvmlDeviceGetRemappedRows(void* device, unsigned* corrected, unsigned* uncorrected, unsigned* pending,
                              unsigned* failure) {
  Spec s;
  if (get("FAKE_NVML_REMAP", device, {0, 0, 0, 0}, s) != kSuccess) return s.rc;
  *corrected = static_cast<unsigned>(s.values[0]);
  *uncorrected = static_cast<unsigned>(s.values[1]);
  *pending = static_cast<unsigned>(s.values[2]);
  *failure = static_cast<unsigned>(s.values[3]);
  return kSuccess;
}
int nvmlDeviceGetTotalEccErrors(void* device, unsigned type, unsigned counter, unsigned long long* count) {
  if (type != 1 || counter != 0) return kInvalidArgument;  // only volatile uncorrectable is asked for
  Spec s;
  if (get("FAKE_NVML_ECC", device, {0}, s) != kSuccess) return s.rc;
  *count = s.values[0];
  return kSuccess;
}
int nvmlDeviceGetRetiredPages(void* device, unsigned cause, unsigned* count, unsigned long long* addresses) {
  Spec s;
  if (cause > 1 || get("FAKE_NVML_RETIRED", device, {0, 0, 0}, s) != kSuccess) return cause > 1 ? 2 : s.rc;
  const unsigned pages = static_cast<unsigned>(s.values[cause]);
  const bool fits = *count >= pages;
  if (fits && addresses != nullptr) {
    for (unsigned i = 0; i < pages; ++i) addresses[i] = 0x1000ull * (i + 1);
  }
  *count = pages;
  return fits ? kSuccess : kInsufficientSize;
}
int nvmlDeviceGetRetiredPagesPendingStatus(void* device, unsigned* pending) {
  Spec s;
  if (get("FAKE_NVML_RETIRED", device, {0, 0, 0}, s) != kSuccess) return s.rc;
  *pending = static_cast<unsigned>(s.values[2]);
  return kSuccess;
}
int nvmlDeviceGetPcieReplayCounter(void* device, unsigned* value) {
  Spec s;
  if (get("FAKE_NVML_REPLAYS", device, {0, 0}, s) != kSuccess) return s.rc;
  const unsigned reads = g_replay_reads[reinterpret_cast<size_t>(device)]++;
  *value = static_cast<unsigned>(s.values[0] + reads * s.values[1]);
  return kSuccess;
}
int link_value(void* device, size_t which, unsigned* value) {
  Spec s;
  if (get("FAKE_NVML_LINK", device, {5, 5, 16, 16}, s) != kSuccess) return s.rc;
  *value = static_cast<unsigned>(s.values[which]);
  return kSuccess;
}
int nvmlDeviceGetCurrPcieLinkGeneration(void* device, unsigned* v) { return link_value(device, 0, v); }
int nvmlDeviceGetMaxPcieLinkGeneration(void* device, unsigned* v) { return link_value(device, 1, v); }
int nvmlDeviceGetCurrPcieLinkWidth(void* device, unsigned* v) { return link_value(device, 2, v); }
int nvmlDeviceGetMaxPcieLinkWidth(void* device, unsigned* v) { return link_value(device, 3, v); }
int nvmlDeviceGetPerformanceState(void* device, unsigned* v) {
  Spec s;
  if (get("FAKE_NVML_PSTATE", device, {0}, s) != kSuccess) return s.rc;
  const unsigned reads = g_pstate_reads[reinterpret_cast<size_t>(device)]++;
  *v = static_cast<unsigned>(s.values[std::min<size_t>(reads, s.values.size() - 1)]);
  return kSuccess;
}
int nvmlEventSetCreate(void** set) {
  *set = &g_event_set;
  ++g_event_sets_open;
  return kSuccess;
}
int nvmlDeviceRegisterEvents(void* device, unsigned long long types, void* set) {
  if (set != &g_event_set || types != 0x8) return kInvalidArgument;  // critical XIDs only
  Spec s;
  if (get("FAKE_NVML_XID", device, {}, s) != kSuccess) return s.rc;
  for (unsigned long long xid : s.values) g_events.push_back({device, 0x8, xid, 0, 0});
  return kSuccess;
}
int nvmlEventSetWait_v2(void* set, sdc::NvmlEventData* data, unsigned) {
  if (set != &g_event_set) return kInvalidArgument;
  if (g_events.empty()) {
    const char* wait = std::getenv("FAKE_NVML_WAIT");
    const std::string fails = wait != nullptr ? wait : "";
    return fails == "lost" ? kGpuIsLost : fails == "error" ? kUnknown : kTimeout;
  }
  *data = g_events.front();
  g_events.pop_front();
  return kSuccess;
}
int nvmlEventSetFree(void* set) {
  if (set != &g_event_set) return kInvalidArgument;
  --g_event_sets_open;
  return kSuccess;
}
int fake_nvml_event_sets_open() { return g_event_sets_open; }
}
