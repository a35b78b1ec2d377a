// The `sdcprobe` command. Exit codes: 0 pass, 1 fault found, 2 could not test or bad input.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "host/cpu_device.hpp"
#include "host/error.hpp"
#include "scheduler/version.hpp"

namespace {

// An error is one line, whatever the operator's input quoted in it holds.
std::string one_line(std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return message;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sdcprobe: finds GPUs and CPUs that compute wrong answers without reporting an error"};
  app.set_version_flag("--version", std::string("sdcprobe ") + sdc::kVersion);
  app.require_subcommand(1);
  app.fallthrough();

  sdc::cli::GlobalOptions global;
  app.add_option("--backend", global.backend,
                 "Devices to test: auto (CUDA when GPUs are on the PCI bus, else the CPU), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--cpu-devices", global.cpu_devices, "Present the CPU as N virtual devices (core groups)")
      ->check(sdc::cli::unsigned_in(1, 4096))
      ->capture_default_str();

  app.add_option("--expect-gpus", global.expect_gpus,
                 "GPUs CUDA must show (default: every NVIDIA GPU on the PCI bus); set it where fewer are visible on "
                 "purpose (CUDA_VISIBLE_DEVICES, a container's devices). A GPU missing is a fault naming its bus id")
      ->check(CLI::Range(-1, 4096));
  // An environment variable, so that the workers a command starts inherit it.
  app.add_option_function<std::string>(
         "--host-memory", [](const std::string& bytes) { ::setenv(sdc::kHostMemoryVariable, bytes.c_str(), 1); },
         "The most host memory the CPU backend's memory probes take, all virtual devices together (default: "
         "half of MemAvailable; sets SDCPROBE_HOST_MEMORY)")
      ->check(sdc::cli::byte_size(uint64_t{1} << 20, uint64_t{1} << 48, "BYTES in [1M, 2^48] (K, M, G: binary)"));
  int exit_code = 0;
  sdc::cli::add_devices_command(app, global, exit_code);
  sdc::cli::add_list_command(app, exit_code);
  sdc::cli::add_run_command(app, global, exit_code);
  sdc::cli::add_qualify_command(app, global, exit_code);
  sdc::cli::add_golden_command(app, global, exit_code);
  sdc::cli::add_coverage_command(app, global, exit_code);
  sdc::cli::add_goodput_commands(app, exit_code);
  sdc::cli::add_hang_command(app, exit_code);
  sdc::cli::add_worker_command(app, global, exit_code);
  sdc::cli::add_sweep_command(app, global, exit_code);
  sdc::cli::add_history_commands(app, exit_code);
  sdc::cli::add_idle_command(app, exit_code);
  sdc::cli::add_health_command(app, exit_code);
  CLI::App* fleet = app.add_subcommand("fleet", "Many nodes' results compared: cluster goodput and fleet SDC");
  fleet->require_subcommand(1);
  sdc::cli::add_fleet_goodput_command(*fleet, exit_code);
  sdc::cli::add_fleet_sdc_command(*fleet, exit_code);
  sdc::cli::add_fleet_import_command(*fleet, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (app.get_subcommands().empty() && !app.remaining().empty()) {
      std::cerr << "sdcprobe: error: unknown command '" << app.remaining().front() << "' (see sdcprobe --help)\n";
      sdc::cli::print_npd_could_not_test(argc, argv, "unknown command " + app.remaining().front());
      return 2;
    }
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "sdcprobe: error: " << one_line(e.what()) << " (see sdcprobe --help)\n";
    sdc::cli::print_npd_could_not_test(argc, argv, one_line(e.what()));
    return 2;
  } catch (const sdc::InputError& e) {
    std::cerr << "sdcprobe: error: " << one_line(e.what()) << "\n";
    sdc::cli::print_npd_could_not_test(argc, argv, one_line(e.what()));
    return 2;
  } catch (const std::exception& e) {
    // Anything else could not test; a DependencyError names its cause ("NCCL error: ...").
    const std::string why = one_line(sdc::describe_error(e));
    std::cerr << "sdcprobe: could not test: " << why << "\n";
    sdc::cli::print_npd_could_not_test(argc, argv, why);
    return 2;
  }
  return exit_code;
}
