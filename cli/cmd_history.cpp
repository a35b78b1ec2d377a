// history, status and release: what the sweep has recorded, and the operator's side of quarantine.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "goodput/event.hpp"
#include "host/error.hpp"
#include "host/time.hpp"
#include "scheduler/sweep/history.hpp"
#include "scheduler/sweep/quarantine.hpp"
#include "scheduler/sweep/sweep.hpp"

namespace sdc::cli {
namespace {

// The history of `state_dir`; reading commands never create one, and open it read-only.
std::unique_ptr<History> open_history(const std::string& state_dir, History::Access access) {
  const std::string path = (std::filesystem::path(state_dir) / kHistoryFile).string();
  if (!std::filesystem::exists(path)) {
    throw InputError("--state-dir: no history at " + path + " (sdcprobe sweep creates it)");
  }
  return std::make_unique<History>(path, 10000, access);
}

// "24h" (that long ago), "2026-11-28" or "2026-11-28T10:00:00Z". Dates are checked as the goodput
// reader checks event times: 2026-02-31 is an error, not 2026-03-03.
double parse_since(const std::string& text) {
  const bool date_only = text.size() == 10 && text[4] == '-' && text[7] == '-';
  if (date_only || text.find('T') != std::string::npos) {
    try {
      return static_cast<double>(parse_rfc3339_ns(date_only ? text + "T00:00:00Z" : text)) / 1e9;
    } catch (const InputError&) {
      throw InputError("--since: '" + text + "' is not a valid UTC date (2026-11-28, 2026-11-28T10:00:00Z)");
    }
  }
  try {
    return unix_now() - parse_duration("--since", text);
  } catch (const InputError&) {
    throw InputError("--since: expected a duration (24h, 7d) or a UTC date (2026-11-28, 2026-11-28T10:00:00Z), got '" +
                     text + "'");
  }
}

void add_state_dir_option(CLI::App* sub, std::string& state_dir) {
  sub->add_option("--state-dir", state_dir, "Where the history database lives")->capture_default_str();
}

}  // namespace

void add_history_commands(CLI::App& app, int& exit_code) {
  {
    auto* sub = app.add_subcommand("history", "Recorded results, oldest first");
    struct Args {
      std::string state_dir = kDefaultStateDir;
      std::string device;
      std::string since;
      bool json = false;
    };
    auto args = std::make_shared<Args>();
    add_state_dir_option(sub, args->state_dir);
    sub->add_option("--device", args->device, "Only this device (UUID)");
    sub->add_option("--since", args->since, "Only results since: a duration ago (24h, 7d) or a UTC date");
    sub->add_flag("--json", args->json, "Print JSON");
    sub->callback([&exit_code, args] {
      const double since = args->since.empty() ? 0 : parse_since(args->since);
      const auto history = open_history(args->state_dir, History::Access::kReadOnly);
      const auto rows = history->results(args->device, since);
      if (args->json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rows) {
          out.push_back({{"run", r.run_id},
                         {"mode", r.mode},
                         {"time", format_utc(r.recorded_at)},
                         {"device_uuid", r.device_uuid},
                         {"probe", r.probe},
                         {"outcome", r.outcome},
                         {"attempt", r.attempt},
                         {"fault", r.fault},
                         {"checked", r.checked},
                         {"mismatches", r.mismatches},
                         {"syndrome", r.syndrome},
                         {"duration_s", r.duration_s},
                         {"seed", r.seed},
                         {"reason", r.reason}});
        }
        std::cout << out.dump(2) << "\n";
      } else {
        std::printf("%-20s %5s %-7s %-42s %-24s %-12s %10s %-12s %9s\n", "TIME", "RUN", "MODE", "DEVICE", "PROBE",
                    "OUTCOME", "MISMATCHES", "FAULT", "TIME_S");
        for (const auto& r : rows) {
          std::printf("%-20s %5lld %-7s %-42s %-24s %-12s %10llu %-12s %9.3f\n", format_utc(r.recorded_at).c_str(),
                      static_cast<long long>(r.run_id), r.mode.c_str(), r.device_uuid.c_str(),
                      (r.probe + (r.attempt > 0 ? " (re-run)" : "")).c_str(), r.outcome.c_str(),
                      static_cast<unsigned long long>(r.mismatches), r.fault.c_str(), r.duration_s);
          if (!r.reason.empty()) std::printf("%28sreason: %s\n", "", r.reason.c_str());
        }
      }
      exit_code = 0;
    });
  }
  {
    auto* sub = app.add_subcommand(
        "status", "One line per device: healthy, suspect or quarantined, and why. Exit 1 when one is quarantined");
    struct Args {
      std::string state_dir = kDefaultStateDir;
      bool json = false;
    };
    auto args = std::make_shared<Args>();
    add_state_dir_option(sub, args->state_dir);
    sub->add_flag("--json", args->json, "Print JSON");
    sub->callback([&exit_code, args] {
      const auto history = open_history(args->state_dir, History::Access::kReadOnly);
      const auto statuses = device_statuses(*history, QuarantinePolicy::stored(*history), unix_now());
      bool quarantined = false;
      nlohmann::json out = nlohmann::json::array();
      for (const auto& st : statuses) {
        quarantined = quarantined || st.health == Health::kQuarantined;
        if (args->json) {
          out.push_back({{"uuid", st.device.uuid},
                         {"pci_bus_id", st.device.pci_bus_id},
                         {"name", st.device.name},
                         {"health", health_name(st.health)},
                         {"why", st.why}});
        } else {
          std::printf("%s %s %s: %s\n", st.device.uuid.c_str(), st.device.pci_bus_id.c_str(), health_name(st.health),
                      st.why.c_str());
        }
      }
      if (args->json) std::cout << out.dump(2) << "\n";
      exit_code = quarantined ? 1 : 0;
    });
  }
  {
    auto* sub = app.add_subcommand("release", "Reinstate a quarantined device after its clean sweeps");
    struct Args {
      std::string state_dir = kDefaultStateDir;
      std::string uuid;
      bool force = false;
      std::string by;
    };
    auto args = std::make_shared<Args>();
    sub->add_option("uuid", args->uuid, "The device's UUID (see sdcprobe status)")->required();
    add_state_dir_option(sub, args->state_dir);
    sub->add_flag("--force", args->force, "Release it before the policy's clean sweeps");
    sub->add_option("--by", args->by, "Who releases it, for the record (default: $SUDO_USER or $USER)");
    sub->callback([&exit_code, args] {
      std::string by = args->by;
      for (const char* var : {"SUDO_USER", "USER"}) {
        if (by.empty() && std::getenv(var) != nullptr) by = std::getenv(var);
      }
      const auto history = open_history(args->state_dir, History::Access::kReadWrite);
      release_device(*history, QuarantinePolicy::stored(*history), args->uuid, args->force, by, unix_now());
      std::printf("released %s\n", args->uuid.c_str());
      exit_code = 0;
    });
  }
}

}  // namespace sdc::cli
