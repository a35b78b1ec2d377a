// Device identity strings in the forms nvidia-smi and dcgm-exporter print, so that reports can be
// joined with them. Pure functions: the CPU tests check them without a GPU.
#pragma once

#include <array>
#include <string>

namespace sdc {

// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lowercase hex, from cudaDeviceProp::uuid's 16 bytes.
std::string format_gpu_uuid(const std::array<unsigned char, 16>& bytes);

// 00000000:3B:00.0: 8-digit domain, uppercase hex. CUDA exposes no PCI function number; a GPU is
// function 0.
std::string format_pci_bus_id(int domain, int bus, int device);

// 12040 -> "12.4" (cudaDriverGetVersion / cudaRuntimeGetVersion encoding: 1000 * major + 10 * minor).
std::string format_cuda_version(int version);

}  // namespace sdc
