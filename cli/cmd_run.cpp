#include "cli/probe_run.hpp"

namespace sdc::cli {

void add_run_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* sub = app.add_subcommand("run", "Run chosen probes (ids or globs, e.g. 'mem.*') on chosen devices");
  auto globs = std::make_shared<std::vector<std::string>>();
  auto args = std::make_shared<ProbeRunArgs>();
  sub->add_option("probes", *globs, "Probe ids or globs")->required();
  sub->add_option("--device", args->device, "Devices: comma-separated indices, UUIDs or PCI bus ids, or all")
      ->capture_default_str();
  auto level = std::make_shared<std::string>("quick");
  sub->add_option("--level", *level, "Size preset: quick, standard or long")
      ->check(CLI::IsMember({"quick", "standard", "long"}))
      ->capture_default_str();
  add_probe_run_options(sub, *args);
  sub->callback([&global, &exit_code, globs, args, level] {
    exit_code = run_and_report(global, *args, *globs, parse_level(*level), "run");
  });
}

}  // namespace sdc::cli
