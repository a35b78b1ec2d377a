#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "host/backend.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc::cli {

void add_devices_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* sub = app.add_subcommand("devices", "List the devices this run would test");
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print JSON");
  sub->callback([&global, &exit_code, json] {
    const auto devices = open_devices({global.backend, global.cpu_devices});
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& d : devices) {
        out.push_back(identity_to_json(d->identity()));
      }
      std::cout << out.dump(2) << "\n";
    } else {
      std::printf("%-7s %-42s %-18s %6s %-16s %s\n", "DEVICE", "UUID", "PCI_BUS_ID", "UNITS", "CAPABILITY", "NAME");
      for (const auto& d : devices) {
        const DeviceIdentity& id = d->identity();
        std::printf("%-7s %-42s %-18s %6d %-16s %s\n", id.label().c_str(), id.uuid.c_str(), id.pci_bus_id.c_str(),
                    id.compute_units, id.compute_capability.c_str(), id.name.c_str());
      }
      if (global.backend == "auto" && !cuda_backend_compiled()) {
        std::printf("(CPU backend: %s)\n", cuda_unavailable_reason().c_str());
      }
    }
    exit_code = devices.empty() ? 2 : 0;
  });
}

}  // namespace sdc::cli
