#include "scheduler/sweep/prometheus.hpp"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "host/atomic_file.hpp"
#include "scheduler/version.hpp"

namespace sdc {
namespace {

// Label values escape backslash, double quote and newline (the text exposition format).
std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string number(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

// One metric family; its samples are kept together, as the exposition format requires.
class Family {
 public:
  Family(std::string name, const char* type, const char* help)
      : name_(std::move(name)), text_("# HELP " + name_ + " " + help + "\n# TYPE " + name_ + " " + type + "\n") {}
  void sample(const std::string& labels, double value) { text_ += name_ + "{" + labels + "} " + number(value) + "\n"; }
  const std::string& text() const { return text_; }

 private:
  std::string name_;
  std::string text_;
};

}  // namespace

std::string render_prometheus(const History& history, const std::vector<DeviceIdentity>& devices,
                              const std::vector<std::string>& probe_ids, const std::string& host,
                              const QuarantinePolicy& policy, double now) {
  std::map<std::string, Health> health;
  for (const auto& st : device_statuses(history, policy, now)) health[st.device.uuid] = st.health;

  Family build("sdcprobe_build_info", "gauge", "The sdcprobe build writing these metrics; always 1.");
  Family runs("sdcprobe_probe_runs_total", "counter", "Probe runs recorded in the history (re-runs excluded).");
  Family failures("sdcprobe_probe_failures_total", "counter",
                  "Probe runs that found a wrong answer or raised a device error (re-runs excluded).");
  Family duration("sdcprobe_probe_duration_seconds", "gauge", "Duration of the probe's last run.");
  Family healthy("sdcprobe_device_healthy", "gauge", "1 when the device is neither suspect nor quarantined.");
  Family quarantined("sdcprobe_device_quarantined", "gauge", "1 while the device is quarantined.");
  Family last_run("sdcprobe_last_run_timestamp_seconds", "gauge",
                  "Unix time of the device's last recorded result; 0 when never tested.");

  build.sample("version=\"" + escape(kVersion) + "\",Hostname=\"" + escape(host) + "\"", 1);
  for (const auto& d : devices) {
    const std::string labels = "gpu=\"" + std::to_string(d.index) + "\",UUID=\"" + escape(d.uuid) + "\",pci_bus_id=\"" +
                               escape(d.pci_bus_id) + "\",Hostname=\"" + escape(host) + "\",modelName=\"" +
                               escape(d.name) + "\"";
    std::set<std::string> probes(probe_ids.begin(), probe_ids.end());
    for (const auto& p : history.probes_seen(d.uuid)) probes.insert(p);
    for (const auto& probe : probes) {
      const ProbeTotals t = history.probe_totals(d.uuid, probe);
      const std::string l = labels + ",probe=\"" + escape(probe) + "\"";
      runs.sample(l, static_cast<double>(t.runs));
      failures.sample(l, static_cast<double>(t.failures));
      duration.sample(l, t.last_duration_s);
    }
    // A device the history has never seen is reported healthy until a pass says otherwise.
    const auto h = health.find(d.uuid);
    const Health state = h == health.end() ? Health::kHealthy : h->second;
    healthy.sample(labels, state == Health::kHealthy ? 1 : 0);
    quarantined.sample(labels, state == Health::kQuarantined ? 1 : 0);
    last_run.sample(labels, history.last_result_at(d.uuid));
  }
  return build.text() + runs.text() + failures.text() + duration.text() + healthy.text() + quarantined.text() +
         last_run.text();
}

std::string render_health_prometheus(const HealthReport& health, const std::string& host) {
  if (!health.applicable) return "";
  Family read("sdcprobe_health_driver_read", "gauge",
              "1 when NVML answered the last health read; 0 when the GPUs' health could not be read.");
  Family fault("sdcprobe_gpu_health_fault", "gauge", "1 when the GPU's own health condition is a fault.");
  Family judged("sdcprobe_gpu_health_judged", "gauge",
                "1 when the condition was read and judged; 0 when not supported, not tested or unreadable.");
  Family reading("sdcprobe_gpu_health_reading", "gauge", "A figure NVML gave for the condition, as last read.");
  read.sample("Hostname=\"" + escape(host) + "\"", health.error.empty() ? 1 : 0);
  for (const GpuHealth& g : health.gpus) {
    const std::string labels = "gpu=\"" + std::to_string(g.index) + "\",UUID=\"" + escape(g.uuid) + "\",pci_bus_id=\"" +
                               escape(g.pci_bus_id) + "\",Hostname=\"" + escape(host) + "\",modelName=\"" +
                               escape(g.name) + "\"";
    for (const HealthCondition& c : g.conditions) {
      const std::string l = labels + ",field=\"" + escape(c.field) + "\"";
      fault.sample(l, c.state == ConditionState::kFault ? 1 : 0);
      judged.sample(l, c.state == ConditionState::kFault || c.state == ConditionState::kHealthy ? 1 : 0);
      for (const auto& [name, value] : c.readings) {
        reading.sample(l + ",reading=\"" + escape(name) + "\"", static_cast<double>(value));
      }
    }
  }
  return read.text() + fault.text() + judged.text() + reading.text();
}

void write_prometheus(const std::string& dir, const std::string& text) {
  namespace fs = std::filesystem;
  const std::string prefix = std::string(kPromFile) + ".tmp.";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
  write_file_atomically((fs::path(dir) / kPromFile).string(), text, 0644);
}

}  // namespace sdc
