#include "host/pci_inventory.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace sdc {
namespace {

namespace fs = std::filesystem;

std::string read_small_file(const fs::path& path) {
  std::ifstream in(path);
  std::string text;
  if (!in) return text;
  char buf[4096];
  in.read(buf, sizeof(buf));
  text.assign(buf, static_cast<size_t>(in.gcount()));
  return text;
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// Hex digits only, at most `max_digits` of them.
std::optional<unsigned> parse_hex_digits(std::string_view s, size_t max_digits) {
  if (s.empty() || s.size() > max_digits) return std::nullopt;
  unsigned value = 0;
  for (char c : s) {
    unsigned digit;
    if (c >= '0' && c <= '9') {
      digit = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    value = value * 16 + digit;
  }
  return value;
}

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  return out;
}

}  // namespace

std::string system_root() {
  const char* root = std::getenv("SDCPROBE_SYSFS_ROOT");
  return root != nullptr && *root != '\0' ? root : "/";
}

std::string read_sysfs_value(const std::string& path) { return std::string(trim(read_small_file(path))); }

std::optional<unsigned> parse_sysfs_hex(std::string_view text) {
  text = trim(text);
  if (text.size() < 3 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) return std::nullopt;
  return parse_hex_digits(text.substr(2), 8);
}

std::optional<std::string> normalize_pci_bus_id(std::string_view address) {
  // domain:bus:device.function, e.g. 0000:3b:00.0 (the domain may have more digits, e.g. under VMD).
  const size_t c1 = address.find(':');
  const size_t c2 = c1 == std::string_view::npos ? c1 : address.find(':', c1 + 1);
  const size_t dot = c2 == std::string_view::npos ? c2 : address.find('.', c2 + 1);
  if (dot == std::string_view::npos) return std::nullopt;
  const auto domain = parse_hex_digits(address.substr(0, c1), 8);
  const auto bus = parse_hex_digits(address.substr(c1 + 1, c2 - c1 - 1), 2);
  const auto device = parse_hex_digits(address.substr(c2 + 1, dot - c2 - 1), 2);
  const auto function = parse_hex_digits(address.substr(dot + 1), 1);
  if (!domain || !bus || !device || !function || *device > 0x1f || *function > 7) return std::nullopt;
  char text[32];
  std::snprintf(text, sizeof(text), "%08X:%02X:%02X.%X", *domain, *bus, *device, *function);
  return std::string(text);
}

void parse_nvidia_information(std::string_view text, PciGpu& gpu) {
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string_view key = trim(std::string_view(line).substr(0, colon));
    const std::string_view value = trim(std::string_view(line).substr(colon + 1));
    if (key == "Model") gpu.model = value;
    // The driver writes "??" (or nothing) for a UUID it could not read.
    if (key == "GPU UUID" && value.rfind("GPU-", 0) == 0) gpu.uuid = value;
  }
}

std::vector<PciGpu> gpus_on_bus(const std::string& root) {
  std::map<std::string, PciGpu> gpus;
  for (const fs::path& dir : entries(fs::path(root) / "sys/bus/pci/devices")) {
    const auto vendor = parse_sysfs_hex(read_small_file(dir / "vendor"));
    const auto pci_class = parse_sysfs_hex(read_small_file(dir / "class"));
    const auto bus_id = normalize_pci_bus_id(dir.filename().string());
    if (!vendor || *vendor != kNvidiaPciVendor || !pci_class || (*pci_class >> 16) != 0x03 || !bus_id) continue;
    PciGpu& gpu = gpus[*bus_id];
    gpu.pci_bus_id = *bus_id;
    gpu.pci_device = parse_sysfs_hex(read_small_file(dir / "device")).value_or(0);
  }
  for (const fs::path& dir : entries(fs::path(root) / "proc/driver/nvidia/gpus")) {
    const auto bus_id = normalize_pci_bus_id(dir.filename().string());
    if (!bus_id) continue;
    PciGpu& gpu = gpus[*bus_id];
    gpu.pci_bus_id = *bus_id;
    parse_nvidia_information(read_small_file(dir / "information"), gpu);
  }
  std::vector<PciGpu> out;
  for (auto& [bus_id, gpu] : gpus) out.push_back(std::move(gpu));
  return out;
}

std::vector<PciGpu> gpus_not_seen(const std::vector<PciGpu>& on_bus, const std::vector<DeviceIdentity>& seen) {
  // The slot without the function: CUDA names function 0 alone, in either case and domain width.
  const auto slot = [](std::string_view id) {
    const auto n = normalize_pci_bus_id(id);
    return n ? n->substr(0, n->size() - 2) : std::string();
  };
  std::vector<PciGpu> missing;
  for (const PciGpu& gpu : on_bus) {
    const std::string mine = slot(gpu.pci_bus_id);
    const bool shown =
        std::any_of(seen.begin(), seen.end(), [&](const DeviceIdentity& d) { return slot(d.pci_bus_id) == mine; });
    if (!shown) missing.push_back(gpu);
  }
  return missing;
}

}  // namespace sdc
