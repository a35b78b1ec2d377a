// Verdicts, tables and the JSON report of a run.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "scheduler/qualify/health_report.hpp"
#include "scheduler/qualify/runner.hpp"
#include "scheduler/version.hpp"

namespace sdc {
namespace {

std::string device_name(const DeviceIdentity& d) { return d.label() + " [" + d.uuid + ", " + d.pci_bus_id + "]"; }

// Which devices were tested: "cuda0,cuda1"; those that could not be opened are named in the verdict.
std::string tested_devices(const RunReport& report) {
  std::string labels;
  for (const auto& d : report.devices) {
    if (d.open_error.empty()) labels += (labels.empty() ? "" : ",") + d.label();
  }
  return labels.empty() ? "no device tested" : "tested " + labels;
}

std::string hex_seed(uint64_t seed) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(seed));
  return text;
}

int health_code(const RunReport& report) { return report.health ? health_exit_code(*report.health) : 0; }

}  // namespace

int exit_code_of(const RunReport& report) {
  if (report.consensus && report.consensus->implicates(report.host, report.rank)) return 1;
  if (report.collective && report.collective->implicates(report.rank)) return 1;
  // --golden with digests the file lacks: those probes were not compared as asked.
  // A GPU that CUDA does not show is a fault of the node, even with no probe to run on it.
  for (const auto& d : report.devices) {
    if (!d.open_error.empty()) return 1;
  }
  if (health_code(report) == 1) return 1;
  bool skipped = report.results.empty() || (report.consensus && !report.consensus->golden_missing.empty()) ||
                 health_code(report) == 2;
  for (const auto& r : report.results) {
    if (r.outcome == Outcome::kFail || r.outcome == Outcome::kDeviceError) return 1;
    skipped = skipped || r.outcome == Outcome::kSkipped;
  }
  return skipped ? 2 : 0;
}

std::string verdict_line(const RunReport& report) {
  const int code = exit_code_of(report);
  const std::string tail = " (seed " + hex_seed(report.seed) + ", level " + level_name(report.level) + ", " +
                           std::to_string(report.devices.size()) + " devices, " + tested_devices(report) + ", " +
                           std::to_string(report.results.size()) + " results)";
  if (code == 0) return "PASS: every probe passed on every device" + tail;
  if (code == 2) {
    if (report.devices.empty()) return "COULD NOT TEST: no device" + tail;
    size_t skipped = 0;
    for (const auto& r : report.results) skipped += r.outcome == Outcome::kSkipped;
    const size_t missing = report.consensus ? report.consensus->golden_missing.size() : 0;
    return "COULD NOT TEST: " + std::to_string(skipped) + " probe runs skipped" +
           (missing > 0 ? ", " + std::to_string(missing) + " digests missing from the golden file" : "") +
           (health_code(report) == 2 ? ", the GPUs' own health could not be read (sdcprobe health)" : "") + tail;
  }
  // Name each faulty device once, with the probes that caught it.
  std::map<int, std::string> faults;
  for (const auto& r : report.results) {
    if (r.outcome != Outcome::kFail && r.outcome != Outcome::kDeviceError) continue;
    std::string& probes = faults[r.device_index];
    probes += (probes.empty() ? "" : ",") + r.probe + (r.outcome == Outcome::kDeviceError ? "(device_error)" : "");
  }
  std::string line = "FAIL:";
  if (report.collective && !report.collective->error.empty()) {
    line += std::string(" ") + kAllreduceProbe + " device_error: " + report.collective->error + ";";
  } else if (report.collective && report.collective->any_failed) {
    line += std::string(" ") + kAllreduceProbe + " failed, failing links (sender>receiver rank): " +
            (report.collective->bad_links.empty() ? "none found" : report.collective->links_text()) + ";";
  }
  if (report.consensus) {
    for (const auto& s : report.consensus->suspects) {
      const ConsensusRecord& d = s.device;
      line += std::string(" ") + kConsensusProbe + " suspect " + d.host + " rank " + std::to_string(d.rank) + " " +
              d.uuid + " " + d.pci_bus_id + " (" + std::to_string(s.accusers) + " accusers);";
    }
    for (const auto& v : report.consensus->votes) {
      if (v.kind != VoteKind::kInconclusive) continue;
      line += std::string(" ") + kConsensusProbe + " inconclusive on " + v.probe + " among";
      for (size_t i : v.members) line += " " + report.consensus->records[i].uuid;
      line += ";";
    }
  }
  for (const auto& d : report.devices) {
    if (!d.open_error.empty()) line += " " + device_name(d) + " not tested: " + d.open_error + ";";
  }
  for (const auto& [index, probes] : faults) {
    for (const auto& d : report.devices) {
      if (d.index == index && d.open_error.empty()) line += " " + device_name(d) + " " + probes + ";";
    }
  }
  if (report.health && !health_faults(*report.health).empty()) line += " " + health_faults(*report.health) + ";";
  line.pop_back();
  return line + tail;
}

std::string npd_verdict(const RunReport& report) {
  const int code = exit_code_of(report);
  std::string line;
  if (code == 0) {
    line = "OK: " + std::to_string(report.results.size()) + " probe runs passed on " +
           std::to_string(report.devices.size()) + " devices";
  } else if (code == 2) {
    const bool missing = report.consensus && !report.consensus->golden_missing.empty();
    size_t skipped = 0;
    for (const auto& r : report.results) skipped += r.outcome == Outcome::kSkipped;
    line = report.devices.empty()                     ? "UNKNOWN: could not test: no device"
           : missing                                  ? "UNKNOWN: could not test: digests missing from the golden file"
           : skipped == 0 && health_code(report) == 2 ? "UNKNOWN: could not test: GPU health unreadable"
                                                      : "UNKNOWN: could not test: probes skipped";
  } else {
    // The first fault names its device by UUID (never the ordinal) and the probe, or a GPU CUDA does
    // not show by its bus id; the rest are counted.
    size_t faults = 0;
    for (const auto& d : report.devices) {
      if (d.open_error.empty()) continue;
      if (faults++ == 0) line = "SDC: GPU " + d.pci_bus_id + " not seen by CUDA";
    }
    for (const auto& r : report.results) {
      const bool unseen = std::any_of(report.devices.begin(), report.devices.end(), [&](const DeviceIdentity& d) {
        return d.index == r.device_index && !d.open_error.empty();
      });
      if (unseen) continue;
      if (r.outcome != Outcome::kFail && r.outcome != Outcome::kDeviceError) continue;
      if (faults++ == 0) {
        line = "SDC: " + r.device_uuid + " " + r.probe + (r.outcome == Outcome::kDeviceError ? " device_error" : "");
      }
    }
    if (report.health) {
      for (const GpuHealth& g : report.health->gpus) {
        for (const HealthCondition& c : g.conditions) {
          if (c.state == ConditionState::kFault && faults++ == 0) line = "SDC: " + g.uuid + " health " + c.field;
        }
      }
    }
    if (faults > 1) line += " +" + std::to_string(faults - 1) + " more";
    if (faults == 0 && report.consensus) {
      // Only consensus found it: name this rank's first suspect, or the vote it could not decide.
      for (const auto& s : report.consensus->suspects) {
        if (line.empty() && s.device.host == report.host && s.device.rank == report.rank) {
          line = "SDC: " + s.device.uuid + " " + s.probes.front() + " consensus";
        }
      }
      if (line.empty() && report.collective && report.collective->any_failed) {
        line = std::string("SDC: ") + kAllreduceProbe + " links " + report.collective->links_text();
      }
      if (line.empty()) line = "SDC: consensus inconclusive";
    }
  }
  if (line.size() > kNpdVerdictMax) line.resize(kNpdVerdictMax);
  return line;
}

std::string npd_could_not_test(const std::string& why) {
  std::string line = "UNKNOWN: could not test: " + why;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (line.size() > kNpdVerdictMax) line.resize(kNpdVerdictMax);
  return line;
}

std::string rate_text(const ProbeResult& r) {
  char text[32];
  const bool memory = r.probe.rfind("mem.", 0) == 0;
  const double work = memory ? static_cast<double>(r.bytes) : r.flops;
  const double seconds = r.duration_s - r.setup_s;
  if (seconds <= 0 || work <= 0) return "-";
  const double giga = work / seconds / 1e9;
  if (memory) {
    std::snprintf(text, sizeof(text), "%.2f GB/s", giga);
  } else if (giga < 1000) {
    std::snprintf(text, sizeof(text), "%.2f GFLOP/s", giga);
  } else {
    std::snprintf(text, sizeof(text), "%.2f TFLOP/s", giga / 1000);
  }
  return text;
}

DeviceCoverage device_coverage(const RunReport& report, const DeviceIdentity& device) {
  DeviceCoverage c;
  double busy_s = 0;
  for (const auto& r : report.results) {
    if (r.device_index != device.index) continue;
    busy_s += r.duration_s;
    const auto fraction = r.params.find("memory_fraction");
    if (is_memory_probe(r.probe) && r.outcome != Outcome::kSkipped && fraction != r.params.end() &&
        fraction->is_number()) {
      c.memory_fraction = std::max(c.memory_fraction.value_or(0), fraction->get<double>());
    }
  }
  if (report.budget_s > 0) c.budget_fraction = busy_s / report.budget_s;
  return c;
}

std::string results_table(const RunReport& report) {
  std::ostringstream out;
  char row[512];
  std::snprintf(row, sizeof(row), "%-8s %-24s %-12s %14s %12s %9s %16s\n", "DEVICE", "PROBE", "OUTCOME", "CHECKED",
                "MISMATCHES", "TIME_S", "RATE");
  out << row;
  for (const auto& r : report.results) {
    std::string label = "?";
    for (const auto& d : report.devices) {
      if (d.index == r.device_index) label = d.label();
    }
    std::snprintf(row, sizeof(row), "%-8s %-24s %-12s %14llu %12llu %9.3f %16s\n", label.c_str(), r.probe.c_str(),
                  outcome_name(r.outcome), static_cast<unsigned long long>(r.report.checked),
                  static_cast<unsigned long long>(r.report.mismatches), r.duration_s, rate_text(r).c_str());
    out << row;
    if (!r.reason.empty()) out << "         reason: " << r.reason << "\n";
    // A burn that never reached the power limit or the maximum clock says so (gemm.burn.*).
    const auto note = r.params.find("load_note");
    if (note != r.params.end() && note->is_string()) out << "         note: " << note->get<std::string>() << "\n";
    for (const auto& m : r.report.records) {
      std::snprintf(row, sizeof(row), "         index %llu expected 0x%016llx observed 0x%016llx syndrome 0x%016llx",
                    static_cast<unsigned long long>(m.index), static_cast<unsigned long long>(m.expected),
                    static_cast<unsigned long long>(m.observed), static_cast<unsigned long long>(m.syndrome()));
      out << row;
      if (is_memory_probe(r.probe)) {
        std::snprintf(row, sizeof(row), " byte offset 0x%llx", static_cast<unsigned long long>(m.index * 8));
        out << row;
      } else {
        if (m.unit >= 0)
          out << (report.devices.empty() || report.devices[0].backend == "cpu" ? " core " : " sm ") << m.unit;
        if (m.preempted) out << " sm unknown (preempted: the warp moved between SMs)";
        if (m.lane >= 0) out << " lane " << m.lane;
      }
      out << "\n";
    }
  }
  for (const auto& d : report.devices) {
    const DeviceCoverage c = device_coverage(report, d);
    if (!c.memory_fraction && !c.budget_fraction) continue;
    std::string line = d.label() + ":";
    if (c.memory_fraction) {
      std::snprintf(row, sizeof(row), " memory tested %.2f%% of %.1f GiB;", 100 * *c.memory_fraction,
                    static_cast<double>(d.memory_bytes) / (1ULL << 30));
      line += row;
    }
    if (c.budget_fraction) {
      std::snprintf(row, sizeof(row), " probes took %.0f%% of the %.0f s budget;", 100 * *c.budget_fraction,
                    report.budget_s);
      line += row;
    }
    line.pop_back();
    out << line << "\n";
  }
  return out.str();
}

nlohmann::json report_json(const RunReport& report) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : report.devices) {
    nlohmann::json j = identity_to_json(d);
    const DeviceCoverage c = device_coverage(report, d);
    if (c.memory_fraction) j["memory_tested_fraction"] = *c.memory_fraction;
    if (c.budget_fraction) j["budget_used_fraction"] = *c.budget_fraction;
    devices.push_back(std::move(j));
  }
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : report.results) results.push_back(to_json(r));
  const int code = exit_code_of(report);
  nlohmann::json j = {{"tool", "sdcprobe"},
                      {"version", kVersion},
                      {"mode", report.mode},
                      {"host", report.host},
                      {"seed", report.seed},
                      {"seed_hex", hex_seed(report.seed)},
                      {"level", level_name(report.level)},
                      {"started_at", report.started_at},
                      {"duration_s", report.duration_s},
                      {"budget_s", report.budget_s},
                      {"verdict", code == 0   ? "pass"
                                  : code == 1 ? "fail"
                                              : "could_not_test"},
                      {"exit_code", code},
                      {"verdict_line", verdict_line(report)},
                      {"injections", report.injections},
                      {"devices", std::move(devices)},
                      {"results", std::move(results)}};
  if (!report.seed_origin.empty()) j["seed_origin"] = report.seed_origin;
  if (report.size_bytes) j["size_bytes"] = *report.size_bytes;
  if (report.iterations) j["iterations"] = *report.iterations;
  if (report.consensus) {
    j["rank"] = report.rank;
    j["consensus"] = to_json(*report.consensus);
  }
  if (report.collective) {
    j["rank"] = report.rank;
    j["collective"] = report.collective->to_json();
  }
  if (report.health) j["health"] = health_json(*report.health);
  return j;
}

}  // namespace sdc
