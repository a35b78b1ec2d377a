// The CPU backend: a real SDC detector for host CPUs (vector code on every core against the host's
// scalar goldens) and the reference every other backend is tested against.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/device.hpp"
#include "host/gemm.hpp"

namespace sdc {

class CpuDevice : public Device {
 public:
  // `sharing`: the virtual devices that share the host's memory, this one included.
  CpuDevice(int index, std::vector<int> cores, int sharing = 1);

  uint64_t free_memory_bytes() const override;
  // This device's share of what the node can spare: the host memory setting (kHostMemoryVariable),
  // else half of MemAvailable, never more than MemAvailable, divided among the sharing devices.
  uint64_t spare_memory_bytes() const override;
  std::unique_ptr<DeviceBuffer> allocate(size_t bytes) override;
  void upload(DeviceBuffer& dst, const void* src, size_t bytes) override;
  void download(void* dst, DeviceBuffer& src, size_t bytes) override;
  void fill(DeviceBuffer& buf, size_t words, const Pattern& p) override;
  MismatchReport verify(DeviceBuffer& buf, size_t words, const Pattern& expect, const Pattern* then_write,
                        Direction dir) override;
  MismatchReport run_chains(const ChainJob& job, const std::vector<uint64_t>& goldens, Digest128* digest) override;
  // libm on this device's cores (host/cpu_sfu.cpp).
  void run_sfu(const SfuJob& job, DeviceBuffer& out) override;
  std::string math_library() const override;
  Digest128 digest(DeviceBuffer& buf, size_t words) override;
  // OpenBLAS and a blocked FP32 GEMM on this device's cores (host/cpu_gemm.hpp), made on first use.
  GemmEngine* gemm() override;
  // The CPU has no streams: a stream handle given to it is an opaque id, the index of the device it
  // names plus one (NULL names none), so that tests can name another device's stream.
  std::optional<int> stream_device(void* stream) override;

  const std::vector<int>& cores() const { return identity().cores; }

 protected:
  uint64_t apply_corruption(DeviceBuffer& buf, unsigned width_bits, uint64_t elements, uint64_t group,
                            const Corruption& c) override;

 private:
  std::unique_ptr<GemmEngine> gemm_;
  int sharing_;
  std::optional<uint64_t> host_memory_bytes_;  // the setting, for all sharing devices together
};

// The setting that bounds the host memory the CPU backend's memory probes take, all virtual devices
// together: a byte count with an optional K, M or G (`--host-memory` sets it for its process and
// the workers it starts). Unset: half of MemAvailable.
inline constexpr const char* kHostMemoryVariable = "SDCPROBE_HOST_MEMORY";

// The last-level cache of `cores`, from root/sys/devices/system/cpu/cpuN/cache/index*/ (level, size,
// shared_cpu_list): each core's highest-level cache, each cache counted once however many of the
// cores share it, so that a device spanning several dies counts every die's cache. 0 (unknown) when
// any core's cache directory is missing or holds an entry that cannot be read.
uint64_t cpu_cache_bytes(const std::string& root, const std::vector<int>& cores);

// SIMD lanes the CPU chain kernels use for elements of `width_bits` (8 x fp32 on AVX2).
unsigned cpu_simd_lanes(unsigned width_bits);

// Computes chain copies [lo, hi) of `job` into `out` (2 elements per copy, of the chain's width).
// Exposed for the benchmarks, which time it against a peak-FMA loop.
void cpu_compute_chains(const ChainJob& job, uint64_t lo, uint64_t hi, void* out);

}  // namespace sdc
