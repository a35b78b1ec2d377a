#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "host/backend.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc::cli {
namespace {

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("devices: cannot write to fd " + std::to_string(fd));
    done += static_cast<size_t>(n);
  }
}

nlohmann::json devices_json(const std::vector<std::unique_ptr<Device>>& devices) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : devices) out.push_back(identity_to_json(d->identity()));
  return out;
}

}  // namespace

void add_devices_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* sub = app.add_subcommand(
      "devices",
      "List the devices this run would test; a GPU on the PCI bus that CUDA does not show is listed with "
      "its open_error, and makes the exit code 1");
  auto json = std::make_shared<bool>(false);
  auto protocol_fd = std::make_shared<int>(-1);
  sub->add_flag("--json", *json, "Print JSON");
  // For a parent process (qualify, sweep): {"devices": [...]} or {"error": "..."} on this fd, never stdout.
  sub->add_option("--protocol-fd", *protocol_fd)->group("");
  sub->callback([&global, &exit_code, json, protocol_fd] {
    const BackendOptions backend{global.backend, global.cpu_devices, global.expect_gpus};
    if (*protocol_fd >= 0) {
      try {
        write_all(*protocol_fd, nlohmann::json{{"devices", devices_json(open_devices(backend))}}.dump() + "\n");
        exit_code = 0;
      } catch (const std::exception& e) {
        write_all(*protocol_fd, nlohmann::json{{"error", e.what()}}.dump() + "\n");
        exit_code = 2;
      }
      return;
    }
    const auto devices = open_devices(backend);
    bool unseen = false;
    for (const auto& d : devices) unseen = unseen || !d->identity().open_error.empty();
    if (*json) {
      std::cout << devices_json(devices).dump(2) << "\n";
    } else {
      std::printf("%-7s %-42s %-18s %6s %-16s %s\n", "DEVICE", "UUID", "PCI_BUS_ID", "UNITS", "CAPABILITY", "NAME");
      for (const auto& d : devices) {
        const DeviceIdentity& id = d->identity();
        std::printf("%-7s %-42s %-18s %6d %-16s %s\n", id.label().c_str(), id.uuid.c_str(), id.pci_bus_id.c_str(),
                    id.compute_units, id.compute_capability.c_str(), id.name.c_str());
        if (!id.open_error.empty()) std::printf("        cannot be opened: %s\n", id.open_error.c_str());
      }
      if (global.backend == "auto" && !cuda_backend_compiled() && !devices.empty() &&
          devices.front()->identity().backend == "cpu") {
        std::printf("(CPU backend: %s)\n", cuda_unavailable_reason().c_str());
      }
    }
    exit_code = devices.empty() ? 2 : unseen ? 1 : 0;
  });
}

}  // namespace sdc::cli
