// The PCI inventory's parsers of what sysfs and the NVIDIA driver hold: a device's directory name (its
// bus address), its hex attributes (vendor, class, device) and the driver's information file. The input
// is such texts separated by "\n--\n"; each goes through all three parsers, as any of them may hold
// anything. Properties, as the seeded PciInventoryFuzz test: a bus id accepted is one CUDA could print
// and normalizes to itself; a hex attribute reads as the reference grammar says; a UUID taken from the
// information file starts with "GPU-". The parsers refuse by returning nothing, never by throwing.
// Seeds (corpus/pci_inventory/): the six devices of a CPU-only VM's /sys/bus/pci/devices, one a file:
// its directory name, then its vendor, class and device files as read, separated by "\n--\n":
//   for d in /sys/bus/pci/devices/*; do n=$(basename $d); { printf '%s\n--\n' $n; cat $d/vendor;
//     printf '\n--\n'; cat $d/class; printf '\n--\n'; cat $d/device; } > device-${n//:/-}; done
// No NVIDIA driver there, so no information file: one recorded on a GPU node would be a good seed.
#include <cstdint>
#include <string>

#include "host/pci_inventory.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"
#include "tests/fuzz/properties.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  const std::string text = fuzz::as_text(data, size);
  const std::string separator = "\n--\n";
  size_t start = 0;
  for (;;) {
    const size_t at = text.find(separator, start);
    const std::string part = text.substr(start, at == std::string::npos ? at : at - start);
    if (const auto id = normalize_pci_bus_id(part)) {
      SDC_FUZZ_CHECK(fuzz::canonical_pci_bus_id(*id), *id);
      SDC_FUZZ_CHECK(normalize_pci_bus_id(*id) == id, *id);
    }
    SDC_FUZZ_CHECK(parse_sysfs_hex(part) == fuzz::reference_sysfs_hex(part), part);
    PciGpu gpu;
    parse_nvidia_information(part, gpu);
    SDC_FUZZ_CHECK(gpu.uuid.empty() || gpu.uuid.rfind("GPU-", 0) == 0, gpu.uuid);
    if (at == std::string::npos) break;
    start = at + separator.size();
  }
  return 0;
}
