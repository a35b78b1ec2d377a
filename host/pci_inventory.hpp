// The GPUs on the node, read from the PCI bus (sysfs) and the NVIDIA driver's /proc files, with no
// CUDA or NVML call: what CUDA shows is checked against it, so a GPU that fell off the bus or a
// broken driver is a fault of the node rather than a reason to test the CPU instead.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/device.hpp"

namespace sdc {

inline constexpr unsigned kNvidiaPciVendor = 0x10de;

struct PciGpu {
  std::string pci_bus_id;   // 00000000:3B:00.0, as CUDA and nvidia-smi print it
  std::string model;        // from /proc/driver/nvidia/gpus/<bus id>/information; empty without the driver
  std::string uuid;         // likewise ("GPU UUID:")
  unsigned pci_device = 0;  // the PCI device id (sysfs `device`), 0 when only /proc lists it
};

// The root that holds sys/ and proc/: $SDCPROBE_SYSFS_ROOT (a test seam), "/" by default.
std::string system_root();
// A sysfs attribute's text without surrounding whitespace; empty when it cannot be read.
std::string read_sysfs_value(const std::string& path);

// Every NVIDIA display or 3D controller (PCI class 0x03xxxx) under root/sys/bus/pci/devices, and
// every GPU under root/proc/driver/nvidia/gpus, once each, sorted by bus id. NVSwitches and the GPUs'
// audio functions are other classes and are left out.
std::vector<PciGpu> gpus_on_bus(const std::string& root);

// A sysfs bus address ("0000:3b:00.0") as CUDA writes it ("00000000:3B:00.0"); nothing when it is
// not one.
std::optional<std::string> normalize_pci_bus_id(std::string_view address);
// A sysfs attribute holding one hex number ("0x10de\n"); nothing when it does not.
std::optional<unsigned> parse_sysfs_hex(std::string_view text);
// The "Model:" and "GPU UUID:" fields of the driver's information file.
void parse_nvidia_information(std::string_view text, PciGpu& gpu);

// The GPUs of `on_bus` whose bus id no device of `seen` carries.
std::vector<PciGpu> gpus_not_seen(const std::vector<PciGpu>& on_bus, const std::vector<DeviceIdentity>& seen);

}  // namespace sdc
