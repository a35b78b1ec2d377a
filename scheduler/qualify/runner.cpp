#include "scheduler/qualify/runner.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <new>

#include "host/error.hpp"
#include "kernels/common/random.hpp"
#include "scheduler/version.hpp"

namespace sdc {
namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

uint64_t probe_seed(uint64_t run_seed, const std::string& probe_id) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the id
  for (char c : probe_id) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return mix64(run_seed ^ h);
}

ProbeResult run_probe(const Probe& probe, Device& device, const RunOptions& options) {
  ProbeResult result;
  result.probe = probe.id();
  result.device_index = device.identity().index;
  result.device_uuid = device.identity().uuid;
  result.seed = probe_seed(options.seed, probe.id());
  if (!device.open_error().empty()) {
    result.outcome = Outcome::kDeviceError;
    result.reason = device.open_error();
    return result;
  }
  ProbeContext ctx{device,
                   result.seed,
                   options.level,
                   options.size_bytes,
                   options.compute_bytes,
                   options.iterations,
                   options.gemm_n,
                   options.gemm_cuda_model,
                   options.burn_s,
                   options.burn_conditions};
  device.set_injection(options.injector, probe.id());
  const auto start = std::chrono::steady_clock::now();
  const uint64_t copied_before = device.host_device_bytes();
  try {
    probe.run(ctx, result);
    if (result.digest && options.injector != nullptr) {
      options.injector->corrupt_digest(probe.id(), device.identity().index, device.identity().uuid, *result.digest);
    }
    result.settle();
    // A probe that compared nothing tested nothing (iterations 0, an empty buffer): never a pass.
    if (result.outcome == Outcome::kPass && result.report.checked == 0) {
      result.outcome = Outcome::kSkipped;
      result.reason = "checked 0 elements: nothing was tested";
    }
  } catch (const InputError&) {
    device.set_injection(nullptr, "");
    throw;
  } catch (const CudaError& e) {
    result.outcome = e.sticky() ? Outcome::kDeviceError : Outcome::kSkipped;
    result.reason = e.what();
  } catch (const std::bad_alloc&) {
    result.outcome = Outcome::kSkipped;
    result.reason = "out of memory";
  } catch (const std::exception& e) {
    result.outcome = Outcome::kSkipped;
    result.reason = describe_error(e);
  }
  device.set_injection(nullptr, "");
  result.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.host_device_bytes = device.host_device_bytes() - copied_before;
  return result;
}

RunReport new_report(const RunOptions& options, const std::string& mode) {
  RunReport report;
  report.mode = mode;
  report.host = host_name();
  report.seed = options.seed;
  report.level = options.level;
  report.size_bytes = options.size_bytes;
  report.iterations = options.iterations;
  report.started_at = utc_now();
  report.rank = options.rank;
  if (options.injector != nullptr) {
    for (const auto& s : options.injector->specs()) report.injections.push_back(s.text);
  }
  return report;
}

RunReport run_probes(const std::vector<const Probe*>& probes, const std::vector<std::unique_ptr<Device>>& devices,
                     const RunOptions& options, const std::string& mode) {
  RunReport report = new_report(options, mode);
  const auto start = std::chrono::steady_clock::now();
  const size_t total = probes.size() * devices.size();
  size_t done = 0;
  for (const auto& device : devices) {
    report.devices.push_back(device->identity());
    bool device_broken = false;
    for (const Probe* probe : probes) {
      if (options.on_start) options.on_start(done, total, device->identity(), probe->id());
      ++done;
      // A device that failed to open reports its cause on every probe (run_probe), not "skipped".
      if (device_broken && device->open_error().empty()) {
        ProbeResult skipped;
        skipped.probe = probe->id();
        skipped.device_index = device->identity().index;
        skipped.device_uuid = device->identity().uuid;
        skipped.outcome = Outcome::kSkipped;
        skipped.reason = "device in an error state after an earlier probe";
        report.results.push_back(std::move(skipped));
        continue;
      }
      report.results.push_back(run_probe(*probe, *device, options));
      device_broken = report.results.back().outcome == Outcome::kDeviceError;
    }
  }
  report.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

namespace {

// Which of `devices` the selector keeps.
std::vector<bool> selected(const std::vector<DeviceIdentity>& devices, const std::string& selector) {
  std::vector<bool> keep(devices.size(), selector.empty() || selector == "all");
  if (selector.empty() || selector == "all") return keep;
  size_t start = 0;
  while (start <= selector.size()) {
    const size_t end = std::min(selector.find(',', start), selector.size());
    const std::string item = selector.substr(start, end - start);
    bool found = false;
    for (size_t i = 0; i < devices.size(); ++i) {
      const DeviceIdentity& id = devices[i];
      if (item == std::to_string(id.index) || item == id.uuid || item == id.pci_bus_id) keep[i] = found = true;
    }
    if (!found) throw InputError("--device '" + item + "' matches no device (see `sdcprobe devices`)");
    start = end + 1;
  }
  return keep;
}

}  // namespace

std::vector<std::unique_ptr<Device>> select_devices(std::vector<std::unique_ptr<Device>> devices,
                                                    const std::string& selector) {
  std::vector<DeviceIdentity> ids;
  for (const auto& d : devices) ids.push_back(d->identity());
  const std::vector<bool> keep = selected(ids, selector);
  std::vector<std::unique_ptr<Device>> chosen;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (keep[i]) chosen.push_back(std::move(devices[i]));
  }
  return chosen;
}

std::vector<DeviceIdentity> select_identities(const std::vector<DeviceIdentity>& devices, const std::string& selector) {
  const std::vector<bool> keep = selected(devices, selector);
  std::vector<DeviceIdentity> chosen;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (keep[i]) chosen.push_back(devices[i]);
  }
  return chosen;
}

nlohmann::json identity_to_json(const DeviceIdentity& d) {
  nlohmann::json j = {{"index", d.index},
                      {"backend", d.backend},
                      {"uuid", d.uuid},
                      {"pci_bus_id", d.pci_bus_id},
                      {"name", d.name},
                      {"compute_units", d.compute_units},
                      {"compute_capability", d.compute_capability},
                      {"memory_bytes", d.memory_bytes},
                      {"cache_bytes", d.cache_bytes},
                      {"driver_version", d.driver_version},
                      {"runtime_version", d.runtime_version}};
  if (!d.cores.empty()) j["cores"] = d.cores;
  if (!d.open_error.empty()) j["open_error"] = d.open_error;
  return j;
}

DeviceIdentity identity_from_json(const nlohmann::json& j) {
  DeviceIdentity d;
  d.index = j.at("index").get<int>();
  d.backend = j.at("backend").get<std::string>();
  d.uuid = j.at("uuid").get<std::string>();
  d.pci_bus_id = j.at("pci_bus_id").get<std::string>();
  d.name = j.at("name").get<std::string>();
  d.compute_units = j.at("compute_units").get<int>();
  d.compute_capability = j.at("compute_capability").get<std::string>();
  d.memory_bytes = j.at("memory_bytes").get<uint64_t>();
  d.cache_bytes = j.value("cache_bytes", uint64_t{0});  // absent from reports before it was added
  d.driver_version = j.at("driver_version").get<std::string>();
  d.runtime_version = j.at("runtime_version").get<std::string>();
  if (j.contains("cores")) d.cores = j.at("cores").get<std::vector<int>>();
  d.open_error = j.value("open_error", "");
  return d;
}

}  // namespace sdc
