// The CPU's counterpart of the SFU kernel: the host's libm (sinf, cosf, expf, log2f) and IEEE
// 1 / sqrtf and x / y in place of the hardware approximations, on the device's cores. A libm is
// deterministic for a given library and instruction set, both in the equivalence class, so devices
// of one class must agree bit for bit.
#include <cmath>
#include <stdexcept>
#include <string>

#if defined(__GLIBC__)
#include <gnu/libc-version.h>
#endif

#include "host/cpu_device.hpp"
#include "host/cpu_parallel.hpp"
#include "kernels/common/sfu.hpp"

namespace sdc {
namespace {

float libm_sfu(SfuFunction f, SfuArgs a) {
  switch (f) {
    case SfuFunction::kSin: return std::sin(a.x);
    case SfuFunction::kCos: return std::cos(a.x);
    case SfuFunction::kExp: return std::exp(a.x);
    case SfuFunction::kLog2: return std::log2(a.x);
    case SfuFunction::kRsqrt: return 1.0f / std::sqrt(a.x);
    case SfuFunction::kDivide: return a.x / a.y;
  }
  return 0.0f;
}

}  // namespace

void CpuDevice::run_sfu(const SfuJob& job, DeviceBuffer& out) {
  const uint64_t total = job.per_function * kSfuFunctions;
  if (total * sizeof(float) > out.bytes()) throw std::out_of_range("run_sfu beyond the end of its buffer");
  auto* o = static_cast<float*>(out.data());
  // Chunks of whole 64-byte lines (16 floats), so no two cores write one line; a heartbeat after
  // each 2^16 elements per core (a few milliseconds of libm).
  for_each_core_in_rounds(
      cores(), total, 16, 1u << 16, false, [this] { beat(); },
      [&](size_t, size_t lo, size_t hi, int) {
        for (uint64_t i = lo; i < hi; ++i) {
          const SfuFunction f = sfu_function_of(i, job.per_function);
          o[i] = libm_sfu(f, sfu_input(job.seed, f, i % job.per_function));
        }
      });
  inject(out, total, 32, 1);
}

std::string CpuDevice::math_library() const {
#if defined(__GLIBC__)
  return std::string("glibc ") + gnu_get_libc_version();
#else
  return "libm of unknown version";
#endif
}

}  // namespace sdc
