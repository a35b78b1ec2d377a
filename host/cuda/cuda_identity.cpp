#include "host/cuda/cuda_identity.hpp"

#include <cstdio>

namespace sdc {

std::string format_gpu_uuid(const std::array<unsigned char, 16>& b) {
  char text[64];
  std::snprintf(text, sizeof(text), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

std::string format_pci_bus_id(int domain, int bus, int device) {
  char text[32];
  std::snprintf(text, sizeof(text), "%08X:%02X:%02X.0", static_cast<unsigned>(domain), static_cast<unsigned>(bus),
                static_cast<unsigned>(device));
  return text;
}

std::string format_cuda_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace sdc
