#include <iostream>

#include "cli/commands.hpp"
#include "scheduler/sweep/gpu_idle.hpp"

namespace sdc::cli {

void add_idle_command(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand(
      "idle",
      "Exit 0 when no process runs on this node's GPUs (NVML), 1 when one does, 2 when the driver does not answer "
      "or cannot show other containers' processes (outside the host's pid namespace)");
  sub->callback([&exit_code] {
    const IdleVerdict verdict = gpu_idle([] { return nvml_gpu_processes(nvml_library_name()); },
                                         process_and_ancestors(), in_host_pid_namespace());
    std::cout << (verdict.idle ? "idle: " : verdict.blind ? "cannot see: " : "busy: ") << verdict.reason << "\n";
    exit_code = verdict.idle ? 0 : verdict.blind ? 2 : 1;
  });
}

}  // namespace sdc::cli
