// A Device gives probes typed operations (patterns, chains, digests) and applies fault injection
// between each operation's computation and its verification. Backends implement it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/burn_conditions.hpp"
#include "host/injection.hpp"
#include "host/mismatch.hpp"
#include "kernels/common/digest.hpp"
#include "kernels/common/patterns.hpp"

namespace sdc {

class GemmEngine;  // host/gemm.hpp

struct DeviceIdentity {
  std::string backend;             // "cpu" or "cuda"
  int index = 0;                   // position in this run's device list: a selector, never a key
  std::string name;                // GPU name or CPU model
  std::string uuid;                // GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, or CPU-… derived from host and cores
  std::string pci_bus_id;          // 00000000:3B:00.0 (8-digit domain); CPU: "cpu:" and the core list
  int compute_units = 0;           // SMs, or cores
  std::string compute_capability;  // "9.0"; CPU: the instruction set the vector paths use
  uint64_t memory_bytes = 0;
  // The last-level cache that memory tests must exceed to reach memory: a GPU's L2; a CPU device's
  // largest cache level, each cache its cores share counted once. 0: unknown.
  uint64_t cache_bytes = 0;
  std::string driver_version;
  std::string runtime_version;
  std::vector<int> cores;  // CPU only
  // Why it could not be opened (e.g. a GPU on the PCI bus that CUDA does not show); empty when it was.
  std::string open_error;

  // "cuda0", "cpu2": for tables and logs.
  std::string label() const { return backend + std::to_string(index); }
};

// Owned device memory. Only the device that allocated a buffer may be given it back.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
};

// Host memory for staging copies to and from a device.
class HostBuffer {
 public:
  virtual ~HostBuffer() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
};

// Ordinary host memory, zeroed.
std::unique_ptr<HostBuffer> make_host_buffer(size_t bytes);

enum class Direction { kUp, kDown };

enum class ChainKind { kFma32, kFma64, kInt64, kDivSqrt32, kDivSqrt64 };

// Runs `copies` chain copies; copy c uses seed index c % seeds and writes kChainOutputsPerCopy
// elements. `goldens` holds the host's expected output elements per seed, zero-extended to 64 bits.
struct ChainJob {
  ChainKind kind = ChainKind::kFma32;
  uint64_t seed = 0;
  uint32_t seeds = 1024;
  uint64_t copies = 0;
  uint32_t iterations = 0;
};

unsigned chain_width_bits(ChainKind kind);

// The digest a correct device reports for `job`, from the host's per-seed goldens: the output
// buffer's 64-bit words (two fp32 elements of one copy share a word, low element first).
Digest128 chain_output_digest(const ChainJob& job, const std::vector<uint64_t>& goldens);

// sfu.transcendental: `per_function` seeded inputs for each of the kSfuFunctions approximations
// (kernels/common/sfu.hpp), function f writing fp32 elements [f * per_function, (f + 1) * per_function).
struct SfuJob {
  uint64_t seed = 0;
  uint64_t per_function = 0;
};

// What injection did to a device's outputs, for coverage campaigns: a fault that changed no
// element (a stuck bit already at its stuck value) was masked, not missed.
struct InjectionTally {
  uint64_t points = 0;      // injection points where a corruption was applied
  uint64_t changed = 0;     // elements whose bits it changed
  unsigned width_bits = 0;  // element width at the last point
};

class Device {
 public:
  explicit Device(DeviceIdentity identity) : identity_(std::move(identity)) {}
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceIdentity& identity() const { return identity_; }

  // Why the device could not be opened (no context could be made on it, its properties were
  // unreadable); empty for a working device. The runner reports every probe of such a device as
  // device_error with this text, and tests the other devices.
  virtual std::string open_error() const { return ""; }

  // The runner scopes injection to one probe at a time; nullptr disables it.
  void set_injection(Injector* injector, std::string probe_id) {
    injector_ = injector;
    probe_id_ = std::move(probe_id);
  }
  const InjectionTally& injection_tally() const { return tally_; }
  // Called after each operation's computation (a kernel, a pass): an isolated worker's heartbeat,
  // which tells its parent the device is still making progress.
  void set_heartbeat(std::function<void()> beat) { heartbeat_ = std::move(beat); }
  // The heartbeat, for work long enough to need its own: a CPU pass beats after each bounded round of
  // it, and a probe's host-side work (goldens, references, checks) after each bounded piece. Only
  // after progress, never from a timer: a device that stops progressing must fall silent.
  void beat() {
    if (heartbeat_) heartbeat_();
  }
  // The parent's position for this device, where the worker sees it alone (CUDA_VISIBLE_DEVICES).
  void set_index(int index) { identity_.index = index; }
  void reset_injection_tally() { tally_ = InjectionTally{}; }

  virtual uint64_t free_memory_bytes() const = 0;
  // The most a memory probe may hold on this device now, its own scratch buffer counted as free:
  // free memory less a reserve for the runtime, the libraries and the other probes' buffers
  // (GPUs: the larger of 4 GiB and 5% of the device; the CPU says its own, cpu_device.hpp).
  virtual uint64_t spare_memory_bytes() const;
  // What memory sizing measured on this device (probes/memory_test.cpp), kept for the next probe.
  struct MemoryRates {
    double allocate_bytes_per_s = 0;  // allocation, including the CPU's pre-faulting
    double fill_bytes_per_s = 0;      // a fill of a warm buffer
  };
  std::optional<MemoryRates>& memory_rates() { return memory_rates_; }
  virtual std::unique_ptr<DeviceBuffer> allocate(size_t bytes) = 0;
  // A buffer of at least `bytes` that the device keeps for the next caller, so consecutive memory
  // probes pay for one allocation (and its page faults), not one each.
  DeviceBuffer& scratch(size_t bytes);
  // Host memory this device copies fastest: pinned (cudaMallocHost) on CUDA, so that a copy never
  // waits on pageable memory; ordinary memory elsewhere. Like allocate(), it may synchronise the
  // device: allocate before concurrent work (NCCL ranks) starts.
  virtual std::unique_ptr<HostBuffer> allocate_host(size_t bytes);
  // The bytes the scratch buffer holds now (0 before the first use).
  size_t scratch_bytes() const { return scratch_ ? scratch_->bytes() : 0; }
  // Bytes this device has copied between host and device memory so far, both directions (0 on a
  // backend whose memory is the host's). The runner reports each probe's share.
  uint64_t host_device_bytes() const { return host_device_bytes_; }
  // Backends and their GEMM engines call this for every host<->device copy they make.
  void count_host_device_bytes(uint64_t bytes) { host_device_bytes_ += bytes; }
  virtual void upload(DeviceBuffer& dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, DeviceBuffer& src, size_t bytes) = 0;

  // Memory patterns over the first `words` 64-bit words of `buf`.
  virtual void fill(DeviceBuffer& buf, size_t words, const Pattern& p) = 0;
  // Checks every word against `expect` (injection applies first), visiting words in `dir` order;
  // when `then_write` is set each word is rewritten right after it is read (a March element).
  virtual MismatchReport verify(DeviceBuffer& buf, size_t words, const Pattern& expect, const Pattern* then_write,
                                Direction dir) = 0;

  // ALU chains, verified on the device against the host's goldens. When `digest` is given it
  // receives the digest of the output (after injection) as 64-bit words: chain_output_digest's
  // layout, so consensus can compare it across devices and with the host's golden digest.
  virtual MismatchReport run_chains(const ChainJob& job, const std::vector<uint64_t>& goldens, Digest128* digest) = 0;

  // The transcendental approximations of `job` into the first kSfuFunctions * job.per_function
  // floats of `out` (CUDA: the SFU intrinsics; CPU: libm's sinf, cosf, expf, log2f, 1 / sqrtf and
  // x / y), then injection. They are not correctly rounded: the caller checks them against FP64
  // within the documented bounds, and compares digests across devices.
  virtual void run_sfu(const SfuJob& job, DeviceBuffer& out) = 0;
  // The math library run_sfu's results come from where it is not the device itself ("glibc 2.36"
  // on the CPU), so that hosts with different libms are never compared; empty on CUDA, whose
  // compute capability, driver and runtime already name the SFU's behaviour.
  virtual std::string math_library() const { return ""; }

  // Order-independent digest of the first `words` 64-bit words.
  virtual Digest128 digest(DeviceBuffer& buf, size_t words) = 0;

  // Inline probes start after the caller's queued work: mark_stream returns a marker that completes
  // once `stream`'s work so far has (CUDA: a blocking-sync event recorded on it), or nullptr for a
  // backend without streams; wait_for_marker blocks, without spinning, until it completes and
  // releases it.
  virtual void* mark_stream(void* /*stream*/) { return nullptr; }
  virtual void wait_for_marker(void* /*marker*/) {}
  // Whether `stream` is being captured into a CUDA graph: nothing may then be recorded on it.
  virtual bool stream_capturing(void* /*stream*/) const { return false; }
  // Readies the calling thread to run probes beside a job that may be capturing a CUDA graph on
  // another thread (CUDA: relaxed capture mode, so the probe's allocations and waits are allowed
  // and do not invalidate the job's capture).
  virtual void prepare_side_thread() {}

  // The device (identity().index, the CUDA ordinal) that a caller's stream belongs to
  // (cudaStreamGetDevice; a null stream is the calling thread's current device), so that a probe
  // started after the caller's work can refuse a stream of another GPU. nullopt for a backend
  // without streams. The CPU has none, but there a non-null stream handle is an opaque id that
  // encodes a device index (CpuDevice::stream_device), so that tests can name one.
  virtual std::optional<int> stream_device(void* /*stream*/) { return std::nullopt; }

  // GEMM operations for the gemm.* probes; nullptr when the backend offers none.
  virtual GemmEngine* gemm() { return nullptr; }

  // The sampler of this device's temperature, clocks and power for gemm.burn.* (CUDA: NVML), or
  // why there is none.
  virtual ConditionsSource burn_conditions() { return {nullptr, "this backend reads no temperature, clock or power"}; }

 protected:
  // Applies the injector's plan for `elements` elements of `width_bits` to `buf`, then beats the
  // heartbeat. Backends call it after computing and before verifying.
  void inject(DeviceBuffer& buf, uint64_t elements, unsigned width_bits, uint64_t group);
  // Returns the number of elements whose bits changed.
  virtual uint64_t apply_corruption(DeviceBuffer& buf, unsigned width_bits, uint64_t elements, uint64_t group,
                                    const Corruption& c) = 0;

 private:
  void apply_injection(DeviceBuffer& buf, uint64_t elements, unsigned width_bits, uint64_t group);

  DeviceIdentity identity_;
  std::unique_ptr<DeviceBuffer> scratch_;
  std::optional<MemoryRates> memory_rates_;
  Injector* injector_ = nullptr;
  std::string probe_id_;
  InjectionTally tally_;
  std::function<void()> heartbeat_;
  uint64_t host_device_bytes_ = 0;
};

// A device that failed to open: it keeps the identity known of it, open_error() is `error`, and
// every operation throws a sticky CudaError carrying `error`.
std::unique_ptr<Device> make_failed_device(DeviceIdentity identity, std::string error);

}  // namespace sdc
