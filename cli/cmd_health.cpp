#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "host/atomic_file.hpp"
#include "host/error.hpp"
#include "host/nvml/nvml_processes.hpp"
#include "scheduler/qualify/health_report.hpp"
#include "scheduler/sweep/prometheus.hpp"

namespace sdc::cli {

void add_health_command(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand(
      "health",
      "Read what the GPUs say about their own health (NVML: recovery action, row remapping, uncorrectable ECC, "
      "retired pages, PCIe link and replays, XIDs). Exit 0 healthy, 1 a fault, 2 could not test (the driver, a "
      "condition, or a GPU not found)");
  struct Args {
    std::string json;
    std::string prom;
    std::string device = "all";
    std::string format = "text";
    double watch_s = 0;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--json", args->json, "Write the JSON report to FILE (atomically; - for stdout)");
  sub->add_option("--prom", args->prom,
                  "Write the health metrics (Prometheus text format) to FILE (atomically; - for stdout)");
  sub->add_option("--device", args->device, "GPUs to read: all, or comma-separated NVML indices, UUIDs or PCI bus ids")
      ->capture_default_str();
  sub->add_option("--watch", args->watch_s,
                  "Also watch SECONDS for critical XIDs and climbing PCIe replays (0: one read, which cannot judge "
                  "them)")
      ->check(finite_in(0, 86400.0))
      ->capture_default_str();
  sub->add_option("--format", args->format,
                  "text, or npd for node-problem-detector and NHC: stdout holds only a verdict of at most 80 "
                  "characters (OK: / SDC: UUID health FIELD / UNKNOWN:); the lines go to stderr")
      ->check(CLI::IsMember({"text", "npd"}))
      ->capture_default_str();
  sub->callback([&exit_code, args] {
    const bool npd = args->format == "npd";
    if ((args->json == "-") + (args->prom == "-") + npd > 1) {
      throw InputError("--json -, --prom - and --format npd: only one may use stdout");
    }
    std::vector<std::string> select;
    if (args->device != "all") {
      std::istringstream tokens(args->device);
      std::string token;
      while (std::getline(tokens, token, ',')) {
        if (token.empty()) throw InputError("--device: an empty GPU in '" + args->device + "'");
        select.push_back(token);
      }
    }
    std::function<void()> window;
    if (args->watch_s > 0) {
      const double seconds = args->watch_s;
      window = [seconds] { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); };
    }
    const HealthReport report = read_gpu_health(nvml_library_name(), select, window);
    // Stdout holds the report or verdict asked for there; the lines then go to stderr.
    const bool stdout_taken = args->json == "-" || args->prom == "-" || npd;
    if (!args->json.empty()) write_file_atomically(args->json, health_json(report).dump(2) + "\n");
    if (!args->prom.empty()) {
      char host[256] = {};
      ::gethostname(host, sizeof(host) - 1);
      write_file_atomically(args->prom, render_health_prometheus(report, host));
    }
    // The files first: one that cannot be written is a could-not-test, whose UNKNOWN line must be
    // the only verdict on stdout.
    if (npd) std::cout << health_npd_verdict(report) << std::endl;
    (stdout_taken ? std::cerr : std::cout) << health_text(report) << std::flush;
    exit_code = health_exit_code(report);
  });
}

}  // namespace sdc::cli
