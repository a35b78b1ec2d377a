// A simulated fleet for the fleet benchmarks: nodes of 8 GPUs of two models sweeping with the fleet
// seed, as JSON reports. Planted: two lemon GPUs (a failure rate 50,000 times the fleet's), and one
// GPU that hands back a consistent wrong digest on the deterministic probes while passing its own checks.
#pragma once

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>

#include "kernels/common/random.hpp"
#include "probes/result.hpp"
#include "scheduler/consensus/fleet_seed.hpp"

namespace sdc::bench {

inline constexpr int kGpusPerNode = 8;
inline constexpr int64_t kStart = 1796083200;  // 2026-12-01T00:00:00Z
inline const char* const kProbes[] = {"alu.fma32", "gemm.exact.fp32", "sfu.transcendental", "mem.march_c"};
inline constexpr double kBaseFailure = 1e-6;  // per result
inline constexpr double kLemonFailure = 0.05;

struct Planted {
  int lemon_a, lemon_b, wrong;  // GPU numbers
};

inline Planted planted(int gpus) { return {7 * kGpusPerNode + 3, (gpus / 2) * 1 + 1, 42 * kGpusPerNode + 5}; }

inline std::string uuid(int gpu) {
  char text[48];
  std::snprintf(text, sizeof text, "GPU-%08x-0000-4000-8000-%012x", gpu, gpu * 7919);
  return text;
}

// A result as report_json writes it; `wrong`: a consistent wrong digest.
inline std::string result_row(const char* probe, int index, int gpu, uint64_t seed, bool failed, bool wrong) {
  const bool deterministic = probe[0] != 'm';
  std::string digest;
  if (deterministic) {
    uint64_t h = seed;
    for (const char* c = probe; *c; ++c) h = mix64(h ^ static_cast<unsigned char>(*c));
    Digest128 d{mix64(h), mix64(h + 1)};
    if (wrong) d.lo ^= 0x1000;
    digest = ",\"digest\":\"" + digest_hex(d) + "\"";
  }
  const std::string records =
      failed ? "[{\"index\":4096,\"expected\":0,\"observed\":8,\"syndrome\":8,\"bits\":[3],\"width_bits\":64," +
                   std::string(deterministic ? "\"unit\":17,\"lane\":3}]" : "\"byte_offset\":32768}]")
             : "[]";
  char row[768];
  std::snprintf(row, sizeof row,
                "{\"probe\":\"%s\",\"device_index\":%d,\"device_uuid\":\"%s\",\"outcome\":\"%s\",\"checked\":"
                "16777216,\"mismatches\":%d,\"records\":%s,\"duration_s\":612.5,\"setup_s\":0.4,\"bytes\":"
                "68719476736,\"host_device_bytes\":0,\"flops\":1.2e14,\"seed\":%llu,\"params\":{\"algorithm\":"
                "\"cublasLt-7\",\"library_version\":\"12.4.5\"}%s}",
                probe, index, uuid(gpu).c_str(), failed ? "fail" : "pass", failed ? 1 : 0, records.c_str(),
                static_cast<unsigned long long>(seed), digest.c_str());
  return row;
}

// One node's report of one sweep, `sweep` sweeps of `period_s` after kStart (the fleet seed of its
// hour), with `probes` of kProbes on each GPU (one: the probe of the sweep and node; four: each).
inline std::string node_report(int node, int sweep, int gpus, const Planted& p, std::mt19937_64& rng, int probes = 1,
                               int64_t period_s = 3600) {
  const int64_t start = kStart + period_s * sweep;
  const uint64_t seed = fleet_seed("bench-secret", SeedPeriod::kHour, start).seed;
  const char* model = node % 2 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB";
  const std::string time = [&] {
    const std::time_t t = start + node % 600;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return std::string(text);
  }();
  std::string devices, results;
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < kGpusPerNode; ++i) {
    const int gpu = node * kGpusPerNode + i;
    if (gpu >= gpus) break;
    char row[640];
    std::snprintf(row, sizeof row,
                  "%s{\"index\":%d,\"backend\":\"cuda\",\"uuid\":\"%s\",\"pci_bus_id\":\"00000000:%02X:00.0\","
                  "\"name\":\"%s\",\"compute_units\":132,\"compute_capability\":\"9.0\",\"memory_bytes\":85899345920,"
                  "\"driver_version\":\"550.54.15\",\"runtime_version\":\"12.4\"}",
                  i ? "," : "", i, uuid(gpu).c_str(), 0x18 + i, model);
    devices += row;
    for (int k = 0; k < probes; ++k) {
      const char* probe = kProbes[(sweep + node + k) % 4];
      const bool failed = u(rng) < (gpu == p.lemon_a || gpu == p.lemon_b ? kLemonFailure : kBaseFailure);
      results += (results.empty() ? "" : ",") + result_row(probe, i, gpu, seed, failed, gpu == p.wrong);
    }
  }
  return "{\"tool\":\"sdcprobe\",\"version\":\"0.1.0\",\"mode\":\"sweep\",\"host\":\"node" + std::to_string(node) +
         "\",\"seed\":" + std::to_string(seed) +
         ",\"seed_origin\":\"fleet:hour\",\"level\":\"standard\",\"started_at\":\"" + time +
         "\",\"duration_s\":700,\"verdict\":\"pass\",\"exit_code\":0,\"injections\":[],\"devices\":[" + devices +
         "],\"results\":[" + results + "]}";
}

}  // namespace sdc::bench
