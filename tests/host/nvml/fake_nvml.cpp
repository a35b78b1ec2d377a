// A stand-in for libnvidia-ml.so.1 with NVML's C ABI, for the loader's test on machines without the
// driver. Its GPUs and their compute processes come from FAKE_NVML ("GPU-a=11,12;GPU-b="), graphics
// processes from FAKE_NVML_GRAPHICS (same form, or "unsupported" for NVML_ERROR_NOT_SUPPORTED);
// FAKE_NVML_MIG lists the GPUs in MIG mode ("GPU-a,GPU-c"; the others have MIG disabled; unset:
// no GPU supports MIG); FAKE_NVML_DENIED lists NVML indices ("1,3") whose handle answers
// NVML_ERROR_NO_PERMISSION, as for a GPU a cgroup denies the process, while nvmlDeviceGetCount_v2
// still counts them; FAKE_NVML_INIT=fail makes nvmlInit_v2 fail. The health queries are in
// fake_nvml_health.cpp.
#include "tests/host/nvml/fake_nvml.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "host/nvml/nvml_abi.hpp"

namespace fake_nvml {
namespace {

std::vector<FakeGpu> gpus_from(const char* variable, std::vector<FakeGpu> gpus, bool graphics) {
  const char* text = std::getenv(variable);
  std::istringstream entries(text != nullptr ? text : "");
  std::string entry;
  size_t index = 0;
  while (std::getline(entries, entry, ';')) {
    const size_t eq = entry.find('=');
    if (index == gpus.size()) gpus.push_back({entry.substr(0, eq), {}, {}});
    std::istringstream pids(eq == std::string::npos ? "" : entry.substr(eq + 1));
    std::string pid;
    while (std::getline(pids, pid, ',')) {
      (graphics ? gpus[index].graphics : gpus[index].compute).push_back(std::stoul(pid));
    }
    ++index;
  }
  return gpus;
}

}  // namespace

std::vector<FakeGpu> gpus() {
  const char* graphics = std::getenv("FAKE_NVML_GRAPHICS");
  std::vector<FakeGpu> all = gpus_from("FAKE_NVML", {}, false);
  if (graphics != nullptr && std::strcmp(graphics, "unsupported") == 0) return all;
  return gpus_from("FAKE_NVML_GRAPHICS", all, true);
}

}  // namespace fake_nvml

namespace {

using fake_nvml::FakeGpu;
using fake_nvml::gpus;

using sdc::NvmlProcessInfoV1;

int list(void* device, unsigned* count, NvmlProcessInfoV1* infos, bool graphics) {
  const char* graphics_list = std::getenv("FAKE_NVML_GRAPHICS");
  if (graphics && graphics_list != nullptr && std::strcmp(graphics_list, "unsupported") == 0) return 3;
  const std::vector<FakeGpu> all = gpus();
  const size_t index = reinterpret_cast<size_t>(device) - 1;
  if (index >= all.size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  const std::vector<unsigned>& pids = graphics ? all[index].graphics : all[index].compute;
  if (*count < pids.size()) {
    *count = static_cast<unsigned>(pids.size());
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  *count = static_cast<unsigned>(pids.size());
  for (size_t i = 0; i < pids.size(); ++i) infos[i] = {pids[i], 1u << 20};
  return 0;
}

}  // namespace

extern "C" {
int nvmlInit_v2() {
  const char* init = std::getenv("FAKE_NVML_INIT");
  return init != nullptr && std::strcmp(init, "fail") == 0 ? 9 : 0;  // NVML_ERROR_DRIVER_NOT_LOADED
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int rc) { return rc == 9 ? "Driver Not Loaded" : "fake NVML error"; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = static_cast<unsigned>(gpus().size());
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  const char* denied = std::getenv("FAKE_NVML_DENIED");
  std::istringstream indices(denied != nullptr ? denied : "");
  std::string i;
  while (std::getline(indices, i, ',')) {
    if (std::stoul(i) == index) return 4;  // NVML_ERROR_NO_PERMISSION
  }
  *device = reinterpret_cast<void*>(static_cast<size_t>(index) + 1);
  return 0;
}
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  const std::vector<FakeGpu> all = gpus();
  const size_t index = reinterpret_cast<size_t>(device) - 1;
  if (index >= all.size() || all[index].uuid.size() + 1 > length) return 2;
  std::strcpy(uuid, all[index].uuid.c_str());
  return 0;
}
int nvmlDeviceGetMigMode(void* device, unsigned* current, unsigned* pending) {
  const char* mig = std::getenv("FAKE_NVML_MIG");
  if (mig == nullptr) return 3;  // NVML_ERROR_NOT_SUPPORTED
  const std::vector<FakeGpu> all = gpus();
  const size_t index = reinterpret_cast<size_t>(device) - 1;
  if (index >= all.size()) return 2;
  std::istringstream enabled(mig);
  std::string uuid;
  *current = 0;  // NVML_DEVICE_MIG_DISABLE
  while (std::getline(enabled, uuid, ',')) {
    if (uuid == all[index].uuid) *current = 1;  // NVML_DEVICE_MIG_ENABLE
  }
  *pending = *current;
  return 0;
}
int nvmlDeviceGetComputeRunningProcesses(void* device, unsigned* count, NvmlProcessInfoV1* infos) {
  return list(device, count, infos, false);
}
int nvmlDeviceGetGraphicsRunningProcesses(void* device, unsigned* count, NvmlProcessInfoV1* infos) {
  return list(device, count, infos, true);
}
}
