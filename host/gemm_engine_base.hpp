// The loop of a GemmEngine whose C is verified on the host (the CPU backend): generate the seeded
// inputs on the host, load them, compute their checks' reference (both kept while the next run asks
// for the same inputs), multiply (repeats times), offer C to the device's injector, fetch C to the
// host and verify it there with verify_gemm against the reference (one pass over C), digest it,
// and compare the repeats' digests.
// Backends supply the multiplication and the transfers. (The CUDA engine generates and verifies on
// the device instead, with the same SDC_HD element code.)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "host/gemm.hpp"
#include "host/gemm_checks.hpp"
#include "host/gemm_inputs.hpp"

namespace sdc {

class HostVerifiedGemmEngine : public GemmEngine {
 public:
  GemmRun run(const GemmSpec& spec) override;

 protected:
  HostVerifiedGemmEngine(Device& device, GemmInjectFn inject) : device_(device), inject_(std::move(inject)) {}

  // Host threads for generation and verification.
  virtual int threads() const = 0;
  // Threads for this run: one for small GEMMs, where waking a team (and OpenBLAS's own pool on
  // shared cores) costs more than the work.
  int active_threads() const { return active_threads_; }
  // Makes the inputs available to multiply().
  virtual void load(const GemmHostInputs& in) = 0;
  // C = A B into `c` (allocated by the device), complete on return.
  virtual void multiply(const GemmHostInputs& in, DeviceBuffer& c) = 0;
  // A host view of C's first `bytes` bytes, valid until the next call.
  virtual const void* fetch(DeviceBuffer& c, size_t bytes) = 0;
  // What computed it, for the equivalence class (e.g. the pinned cuBLASLt algorithm).
  virtual std::string algorithm(const GemmSpec& spec) const = 0;
  virtual std::string library_version() const = 0;

  Device& device_;
  GemmInjectFn inject_;
  int active_threads_ = 1;
  // The inputs, kept from run to run while the spec asks for the same ones (gemm_same_inputs), and
  // their checks' reference while the accumulation model stays too.
  GemmHostInputs inputs_;
  bool loaded_ = false;  // inputs_ holds complete inputs, loaded
  std::optional<GemmReference> reference_;
  std::unique_ptr<DeviceBuffer> c_;  // likewise the output
};

}  // namespace sdc
