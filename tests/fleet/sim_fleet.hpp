// Simulated fleets for the fleet tests: reports as qualify and sweep write them, for hosts of
// virtual GPUs, with the digest every correct device computes and faults where a test plants them.
#pragma once

#include <algorithm>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/device.hpp"
#include "kernels/common/digest.hpp"
#include "kernels/common/random.hpp"
#include "probes/result.hpp"

namespace sdc {

inline constexpr int64_t kDay0 = 1796083200;  // 2026-12-01T00:00:00Z
inline const char* const kProbes[] = {"sfu.transcendental", "gemm.exact.fp32"};

inline std::string utc(int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

inline DeviceIdentity gpu(const std::string& host, int index, const std::string& model = "NVIDIA H100 80GB HBM3") {
  DeviceIdentity d;
  d.backend = "cuda";
  d.index = index;
  d.name = model;
  d.uuid = "GPU-" + host + "-" + std::to_string(index);
  d.pci_bus_id = "00000000:" + std::to_string(10 + index) + ":00.0";
  d.compute_units = 132;
  d.compute_capability = "9.0";
  d.driver_version = "550.54";
  d.runtime_version = "12.4";
  return d;
}

// The digest every correct device of the class computes for this probe and seed.
inline Digest128 right_digest(const std::string& probe, uint64_t seed) {
  uint64_t h = seed;
  for (char c : probe) h = mix64(h ^ static_cast<unsigned char>(c));
  return {mix64(h), mix64(h + 1)};
}

struct SimResult {
  std::string probe;
  bool failed = false;
  bool wrong_digest = false;
  bool digest = true;
  double duration_s = 60;
  nlohmann::json records = nlohmann::json::array();
  nlohmann::json params = {{"n", 256}};
};

// A report as report_json writes it: `results[d]` are device d's results.
inline std::string report(const std::string& host, int64_t at, uint64_t seed, const std::vector<DeviceIdentity>& devices,
                   const std::vector<std::vector<SimResult>>& results) {
  nlohmann::json devs = nlohmann::json::array(), res = nlohmann::json::array();
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceIdentity& d = devices[i];
    devs.push_back({{"index", d.index},
                    {"backend", d.backend},
                    {"uuid", d.uuid},
                    {"pci_bus_id", d.pci_bus_id},
                    {"name", d.name},
                    {"compute_units", d.compute_units},
                    {"compute_capability", d.compute_capability},
                    {"memory_bytes", 0},
                    {"driver_version", d.driver_version},
                    {"runtime_version", d.runtime_version}});
    for (const SimResult& r : results[i]) {
      nlohmann::json j = {{"probe", r.probe},      {"device_index", d.index},
                          {"device_uuid", d.uuid}, {"outcome", r.failed ? "fail" : "pass"},
                          {"checked", 1000},       {"mismatches", r.failed ? std::max<size_t>(1, r.records.size()) : 0},
                          {"records", r.records},  {"duration_s", r.duration_s},
                          {"setup_s", 0.0},        {"bytes", 0},
                          {"host_device_bytes", 0}, {"flops", 0},
                          {"seed", seed},          {"params", r.params}};
      if (r.digest) {
        Digest128 dg = right_digest(r.probe, seed);
        if (r.wrong_digest) dg.lo ^= 0x5a5a;
        j["digest"] = digest_hex(dg);
      }
      res.push_back(std::move(j));
    }
  }
  return nlohmann::json{{"tool", "sdcprobe"},  {"host", host},   {"mode", "sweep"},
                        {"level", "standard"}, {"seed", seed},   {"started_at", utc(at)},
                        {"devices", devs},     {"results", res}, {"injections", nlohmann::json::array()}}
      .dump();
}

inline std::vector<SimResult> deterministic(bool wrong = false) {
  std::vector<SimResult> out;
  for (const char* p : kProbes) out.push_back({p, false, wrong});
  return out;
}

}  // namespace sdc
