// The stand-in NVML's GPUs, shared by its process lists (fake_nvml.cpp) and its health queries
// (fake_nvml_health.cpp). A device handle is its index + 1.
#pragma once

#include <string>
#include <vector>

namespace fake_nvml {

struct FakeGpu {
  std::string uuid;
  std::vector<unsigned> compute;
  std::vector<unsigned> graphics;
};

// From FAKE_NVML and FAKE_NVML_GRAPHICS.
std::vector<FakeGpu> gpus();

}  // namespace fake_nvml
