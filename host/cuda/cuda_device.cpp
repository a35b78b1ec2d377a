// The CUDA backend: one CudaDevice per GPU the runtime reports. Every operation makes its GPU
// current (DeviceGuard), enqueues on the device's own stream and synchronises before returning,
// so a result is complete, and an asynchronous error surfaces in the call that caused it. One
// thread at a time may use a given device. Opening a device reads its properties only: its
// context, stream and buffers are made on first use, so a process that opens a GPU it never uses
// (a training rank's inline probe, the parent of isolated workers) takes nothing from it.
#include <cuda_runtime_api.h>
#include <library_types.h>

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>
#include <string>

#include "host/backend.hpp"
#include "host/cuda/cuda_error.hpp"
#include "host/cuda/cuda_gemm.hpp"
#include "host/cuda/cuda_identity.hpp"
#include "host/cuda/cuda_raii.hpp"
#include "host/cuda/cuda_streams.hpp"
#include "host/device.hpp"
#include "host/error.hpp"
#include "host/nvml/nvml_conditions.hpp"
#include "host/nvml/nvml_processes.hpp"
#include "kernels/common/chains.hpp"
#include "kernels/common/sfu.hpp"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

// 8 blocks of 256 threads fill an SM's 2048 thread slots on sm_80 and sm_90.
constexpr unsigned kThreadsPerBlock = 256;
constexpr unsigned kBlocksPerSm = 8;

class CudaBuffer final : public DeviceBuffer {
 public:
  CudaBuffer(int ordinal, size_t bytes) : memory_(ordinal, bytes) {}
  void* data() override { return memory_.get(); }
  size_t bytes() const override { return memory_.bytes(); }
  int ordinal() const { return memory_.device(); }

 private:
  DeviceMemory memory_;
};

// Page-locked host memory (cudaMallocHost), freed with cudaFreeHost.
class PinnedHostBuffer final : public HostBuffer {
 public:
  PinnedHostBuffer(int ordinal, size_t bytes) : ordinal_(ordinal), bytes_(bytes) {
    if (bytes == 0) return;
    DeviceGuard guard(ordinal);
    SDC_CUDA_TRY(cudaMallocHost(&data_, bytes));
  }
  ~PinnedHostBuffer() override {
    if (data_ != nullptr) detail::release_on(ordinal_, [p = data_] { SDC_CUDA_LOG(cudaFreeHost(p)); });
  }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  int ordinal_;
  void* data_ = nullptr;
  size_t bytes_;
};

ChainKernel chain_kernel(ChainKind kind) {
  switch (kind) {
    case ChainKind::kFma32: return ChainKernel::kFma32;
    case ChainKind::kFma64: return ChainKernel::kFma64;
    case ChainKind::kInt64: return ChainKernel::kInt64;
    case ChainKind::kDivSqrt32: return ChainKernel::kDivSqrt32;
    case ChainKind::kDivSqrt64: return ChainKernel::kDivSqrt64;
  }
  throw std::invalid_argument("unknown ChainKind");
}

std::string cublas_version() {
  int major = 0, minor = 0, patch = 0;
  SDC_CUBLAS_TRY(cublasGetProperty(MAJOR_VERSION, &major));
  SDC_CUBLAS_TRY(cublasGetProperty(MINOR_VERSION, &minor));
  SDC_CUBLAS_TRY(cublasGetProperty(PATCH_LEVEL, &patch));
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

class CudaDevice final : public Device {
 public:
  CudaDevice(DeviceIdentity identity, int ordinal)
      : Device(std::move(identity)),
        ordinal_(ordinal),
        shape_{static_cast<unsigned>(std::max(1, this->identity().compute_units)) * kBlocksPerSm, kThreadsPerBlock} {}

  std::string open_error() const override { return open_error_; }

  uint64_t free_memory_bytes() const override {
    DeviceGuard guard(ordinal_);
    size_t free = 0, total = 0;
    SDC_CUDA_TRY(cudaMemGetInfo(&free, &total));
    return free;
  }

  std::unique_ptr<DeviceBuffer> allocate(size_t bytes) override {
    ready();
    return std::make_unique<CudaBuffer>(ordinal_, bytes);
  }

  std::unique_ptr<HostBuffer> allocate_host(size_t bytes) override {
    ready();
    return std::make_unique<PinnedHostBuffer>(ordinal_, bytes);
  }

  void upload(DeviceBuffer& dst, const void* src, size_t bytes) override {
    CudaBuffer& b = own(dst, bytes);
    DeviceGuard guard(ordinal_);
    SDC_CUDA_TRY(cudaMemcpyAsync(b.data(), src, bytes, cudaMemcpyHostToDevice, stream()));
    count_host_device_bytes(bytes);
    synchronize();
  }

  void download(void* dst, DeviceBuffer& src, size_t bytes) override {
    CudaBuffer& b = own(src, bytes);
    DeviceGuard guard(ordinal_);
    SDC_CUDA_TRY(cudaMemcpyAsync(dst, b.data(), bytes, cudaMemcpyDeviceToHost, stream()));
    count_host_device_bytes(bytes);
    synchronize();
  }

  void fill(DeviceBuffer& buf, size_t words, const Pattern& p) override {
    CudaBuffer& b = own(buf, words * sizeof(uint64_t));
    DeviceGuard guard(ordinal_);
    SDC_CUDA_TRY(launch_fill(static_cast<uint64_t*>(b.data()), words, p, shape_, stream()));
    synchronize();
  }

  MismatchReport verify(DeviceBuffer& buf, size_t words, const Pattern& expect, const Pattern* then_write,
                        Direction dir) override {
    CudaBuffer& b = own(buf, words * sizeof(uint64_t));
    DeviceGuard guard(ordinal_);
    inject(buf, words, 64, 1);
    SDC_CUDA_TRY(launch_verify(static_cast<uint64_t*>(b.data()), words, expect, then_write, dir == Direction::kDown,
                               log(), shape_, stream()));
    return collect(words, 64);
  }

  MismatchReport run_chains(const ChainJob& job, const std::vector<uint64_t>& goldens, Digest128* digest) override {
    // The same preconditions as the CPU backend, so a job valid on one is valid on the other.
    if (job.seeds == 0 || job.seeds % 64 != 0) throw InputError("chain seeds must be a positive multiple of 64");
    if (goldens.size() != static_cast<size_t>(job.seeds) * kChainOutputsPerCopy) {
      throw std::invalid_argument("run_chains: need kChainOutputsPerCopy goldens per seed");
    }
    if (job.copies == 0) {
      if (digest != nullptr) *digest = Digest128{};
      return MismatchReport{};
    }
    const unsigned width = chain_width_bits(job.kind);
    const uint64_t elements = job.copies * kChainOutputsPerCopy;
    DeviceGuard guard(ordinal_);
    // Scratch kept between calls: a probe runs many jobs, and cudaFree would synchronise the device.
    CudaBuffer& out = grow(chain_out_, elements * (width / 8));
    uint32_t* producers = grow(chain_producers_, job.copies * sizeof(uint32_t)).as<uint32_t>();
    DeviceMemory& device_goldens = grow(chain_goldens_, goldens.size() * sizeof(uint64_t));
    SDC_CUDA_TRY(cudaMemcpyAsync(device_goldens.get(), goldens.data(), goldens.size() * sizeof(uint64_t),
                                 cudaMemcpyHostToDevice, stream()));
    count_host_device_bytes(goldens.size() * sizeof(uint64_t));
    SDC_CUDA_TRY(launch_chains(chain_kernel(job.kind), job.seed, job.seeds, job.copies, job.iterations, out.data(),
                               producers, shape_, stream()));
    synchronize();  // a fault in the chain kernel surfaces here, not in the injector

    inject(out, elements, width, kChainOutputsPerCopy);
    SDC_CUDA_TRY(launch_check_chains(out.data(), width, job.copies, device_goldens.as<uint64_t>(), job.seeds, producers,
                                     log(), shape_, stream()));
    MismatchReport report = collect(elements, width);
    if (digest != nullptr) *digest = this->digest(out, elements * width / 64);
    return report;
  }

  void run_sfu(const SfuJob& job, DeviceBuffer& out) override {
    const uint64_t total = job.per_function * kSfuFunctions;
    CudaBuffer& b = own(out, total * sizeof(float));
    DeviceGuard guard(ordinal_);
    SDC_CUDA_TRY(launch_sfu(job.seed, job.per_function, static_cast<float*>(b.data()), shape_, stream()));
    synchronize();  // a fault in the kernel surfaces here, not in the injector
    inject(out, total, 32, 1);
  }

  Digest128 digest(DeviceBuffer& buf, size_t words) override {
    CudaBuffer& b = own(buf, words * sizeof(uint64_t));
    DeviceGuard guard(ordinal_);
    ready();
    SDC_CUDA_TRY(
        launch_digest(static_cast<const uint64_t*>(b.data()), words, digest_.as<Digest128>(), shape_, stream()));
    Digest128 d;
    SDC_CUDA_TRY(cudaMemcpyAsync(&d, digest_.get(), sizeof(d), cudaMemcpyDeviceToHost, stream()));
    count_host_device_bytes(sizeof(d));
    synchronize();
    return d;
  }

  GemmEngine* gemm() override {
    if (!gemm_) {
      gemm_ = std::make_unique<CudaGemmEngine>(
          *this, ordinal_, stream(), [this](DeviceBuffer& c, uint64_t elements, unsigned width, uint64_t group) {
            inject(c, elements, width, group);
          });
    }
    return gemm_.get();
  }

  // NVML by the GPU's UUID; loaded once per device, kept for the next burn.
  ConditionsSource burn_conditions() override {
    if (!conditions_) conditions_ = nvml_conditions(nvml_library_name(), identity().uuid);
    return *conditions_;
  }

  std::optional<int> stream_device(void* caller_stream) override {
    int device = -1;
    SDC_CUDA_TRY(cudaStreamGetDevice(static_cast<cudaStream_t>(caller_stream), &device));
    return device;
  }

  // Inline probes (host/cuda/cuda_streams.cpp). A blocking-sync event recorded on the caller's
  // stream (a null stream is the legacy default stream).
  void* mark_stream(void* caller_stream) override {
    return record_blocking_event(ordinal_, static_cast<cudaStream_t>(caller_stream));
  }
  bool stream_capturing(void* stream) const override { return stream_is_capturing(static_cast<cudaStream_t>(stream)); }
  void prepare_side_thread() override { relax_thread_capture_mode(); }

  void wait_for_marker(void* marker) override {
    if (marker == nullptr) return;
    DeviceGuard guard(ordinal_);
    auto event = static_cast<cudaEvent_t>(marker);
    const cudaError_t waited = cudaEventSynchronize(event);
    SDC_CUDA_LOG(cudaEventDestroy(event));
    SDC_CUDA_TRY(waited);
  }

 protected:
  // Returns the elements the plan targets: an upper bound on those changed (a stuck bit already at
  // its value, or two flips of one bit, change nothing). Coverage campaigns run on the CPU backend,
  // which counts exactly.
  uint64_t apply_corruption(DeviceBuffer& buf, unsigned width_bits, uint64_t elements, uint64_t group,
                            const Corruption& c) override {
    CudaBuffer& b = own(buf, elements * (width_bits / 8));
    DeviceGuard guard(ordinal_);
    std::vector<XorEntry> xors;
    xors.reserve(c.xors.size());
    for (const Corruption::Xor& x : c.xors) xors.push_back(XorEntry{x.index, x.mask});
    // Scratch kept between injections: cudaFree would wait for the whole device, the training
    // job's kernels included.
    DeviceMemory& device_xors = grow(injector_xors_, xors.size() * sizeof(XorEntry));
    if (!xors.empty()) {
      SDC_CUDA_TRY(cudaMemcpyAsync(device_xors.get(), xors.data(), xors.size() * sizeof(XorEntry),
                                   cudaMemcpyHostToDevice, stream()));
      count_host_device_bytes(xors.size() * sizeof(XorEntry));
    }
    CorruptionPlan plan;
    plan.device_xors = device_xors.as<XorEntry>();
    plan.xor_count = xors.size();
    plan.lane_mask = c.lane_mask;
    plan.group = group;
    plan.lane = c.lane;
    plan.lanes = c.lanes;
    plan.mask = c.mask;
    plan.stuck = c.stuck;
    plan.stuck_index = c.stuck_index;
    plan.stuck_bit = c.stuck_bit;
    plan.stuck_value = c.stuck_value;
    SDC_CUDA_TRY(launch_corruption(b.data(), width_bits, elements, plan, shape_, stream()));
    // The next injection rewrites device_xors: the kernel that reads it must have finished.
    synchronize();
    const uint64_t lane_elements = c.lane_mask ? (elements / group + c.lanes - 1 - c.lane) / c.lanes * group : 0;
    return c.xors.size() + (c.stuck ? 1 : 0) + lane_elements;
  }

 private:
  // The device's stream and fixed buffers, made on first use. Failing to make the stream (the
  // first call that needs a context) means none can be had on this GPU: every probe of it is then
  // a device_error naming the cause. A failed buffer (out of memory) may succeed later.
  void ready() {
    if (stream_.get() != nullptr) return;
    if (!open_error_.empty()) throw_open_error(open_code_);
    Stream stream;
    try {
      stream = Stream(ordinal_);
    } catch (const CudaError& e) {
      open_error_ = "could not open " + identity().label() + ": " + e.what();
      open_code_ = e.code();
      throw_open_error(open_code_);
    }
    log_ = DeviceMemory(ordinal_, sizeof(DeviceMismatchLog));
    digest_ = DeviceMemory(ordinal_, sizeof(Digest128));
    done_ = BlockingEvent(ordinal_);
    stream_ = std::move(stream);
  }
  [[noreturn]] void throw_open_error(int code) const {
    throw CudaError(code, true, "open", __FILE__, __LINE__, open_error_);
  }
  cudaStream_t stream() {
    ready();
    return stream_.get();
  }
  DeviceMismatchLog* log() {
    ready();
    return log_.as<DeviceMismatchLog>();
  }
  // Sleeps rather than spins: an inline probe must not take a core from the training job.
  void synchronize() {
    const cudaStream_t s = stream();  // makes done_ too
    wait_blocking(s, done_.get());
  }

  // The buffer as this device's own, checked to hold `bytes`.
  CudaBuffer& own(DeviceBuffer& buf, size_t bytes) const {
    auto* b = dynamic_cast<CudaBuffer*>(&buf);
    if (b == nullptr || b->ordinal() != ordinal_) {
      throw std::invalid_argument("buffer was not allocated by " + identity().label());
    }
    if (bytes > b->bytes()) {
      throw std::out_of_range("operation on " + std::to_string(bytes) + " bytes of a " + std::to_string(b->bytes()) +
                              "-byte buffer");
    }
    return *b;
  }

  // Grows a scratch allocation to at least `bytes` (contents are not kept).
  DeviceMemory& grow(DeviceMemory& mem, size_t bytes) {
    if (mem.bytes() < bytes) {
      mem = DeviceMemory();  // free first, so the old and new blocks need not fit together
      mem = DeviceMemory(ordinal_, bytes);
    }
    return mem;
  }
  CudaBuffer& grow(std::unique_ptr<CudaBuffer>& buf, size_t bytes) {
    if (!buf || buf->bytes() < bytes) {
      buf.reset();
      buf = std::make_unique<CudaBuffer>(ordinal_, bytes);
    }
    return *buf;
  }

  // Reads the mismatch log the last verification kernel wrote (after the stream has drained).
  MismatchReport collect(uint64_t checked, unsigned width_bits) {
    DeviceMismatchLog log;
    SDC_CUDA_TRY(cudaMemcpyAsync(&log, this->log(), sizeof(log), cudaMemcpyDeviceToHost, stream()));
    count_host_device_bytes(sizeof(log));
    synchronize();
    MismatchReport report;
    report.checked = checked;
    report.mismatches = log.mismatches;
    const uint64_t recorded = std::min<uint64_t>(log.mismatches, kDeviceMismatchSlots);
    for (uint64_t k = 0; k < recorded; ++k) {
      const DeviceMismatch& m = log.records[k];
      MismatchRecord r;
      r.index = m.index;
      r.expected = m.expected;
      r.observed = m.observed;
      r.width_bits = width_bits;
      r.unit = m.unit == kNoUnit || m.unit == kUnitMoved ? -1 : static_cast<int>(m.unit);
      r.lane = m.lane == kNoUnit ? -1 : static_cast<int>(m.lane);
      r.preempted = m.unit == kUnitMoved;
      report.keep(r);
    }
    return report;
  }

  int ordinal_;
  LaunchShape shape_;
  std::string open_error_;  // why no context could be made; empty while none failed
  int open_code_ = 0;
  Stream stream_;
  BlockingEvent done_;   // synchronize() waits on it
  DeviceMemory log_;     // DeviceMismatchLog
  DeviceMemory digest_;  // Digest128
  std::unique_ptr<CudaBuffer> chain_out_;
  DeviceMemory chain_producers_;
  DeviceMemory chain_goldens_;
  DeviceMemory injector_xors_;                  // apply_corruption's XorEntry list
  std::unique_ptr<GemmEngine> gemm_;            // after stream_: destroyed before the stream it uses
  std::optional<ConditionsSource> conditions_;  // gemm.burn.*: NVML, loaded on the first burn
};

DeviceIdentity identify(int ordinal, int index, const std::string& driver, const std::string& runtime) {
  cudaDeviceProp prop{};
  SDC_CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
  std::array<unsigned char, 16> uuid{};
  std::copy(std::begin(prop.uuid.bytes), std::end(prop.uuid.bytes), uuid.begin());
  DeviceIdentity id;
  id.backend = "cuda";
  id.index = index;
  id.name = prop.name;
  id.uuid = format_gpu_uuid(uuid);
  id.pci_bus_id = format_pci_bus_id(prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  id.compute_units = prop.multiProcessorCount;
  id.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  id.memory_bytes = prop.totalGlobalMem;
  id.cache_bytes = static_cast<uint64_t>(prop.l2CacheSize);  // cudaDevAttrL2CacheSize
  id.driver_version = driver;
  id.runtime_version = runtime;
  return id;
}

}  // namespace

bool cuda_backend_compiled() { return true; }

std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // Reported to the caller, and cleared so that it does not resurface in a later, unrelated check.
    (void)cudaGetLastError();
    return std::string("CUDA runtime: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }
  return count == 0 ? "no CUDA device" : "";
}

namespace {

std::string runtime_text() {
  int runtime = 0;
  SDC_CUDA_TRY(cudaRuntimeGetVersion(&runtime));
  // DeviceIdentity has no library field yet: cuBLAS's version rides with the runtime's.
  return format_cuda_version(runtime) + " (cuBLAS " + cublas_version() + ")";
}

std::string driver_text() {
  int driver = 0;
  SDC_CUDA_TRY(cudaDriverGetVersion(&driver));
  return format_cuda_version(driver);
}

// What is known of a GPU whose properties could not be read: its ordinal, and its PCI bus id when
// the runtime still gives one, so that the report names the board to pull.
DeviceIdentity unreadable_identity(int ordinal) {
  DeviceIdentity id;
  id.backend = "cuda";
  id.index = ordinal;
  id.name = "unreadable GPU";
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess) id.pci_bus_id = bus;
  (void)cudaGetLastError();
  id.uuid = "GPU-unreadable-" + std::to_string(ordinal);
  return id;
}

}  // namespace

std::unique_ptr<Device> open_cuda_device(int ordinal) {
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess) {
    (void)cudaGetLastError();
    throw NoDeviceError("CUDA device " + std::to_string(ordinal) + ": " + cudaGetErrorName(counted) + ": " +
                        cudaGetErrorString(counted));
  }
  if (ordinal < 0 || ordinal >= count) {
    throw NoDeviceError("CUDA device " + std::to_string(ordinal) + " does not exist (" + std::to_string(count) +
                        " visible)");
  }
  return std::make_unique<CudaDevice>(identify(ordinal, ordinal, driver_text(), runtime_text()), ordinal);
}

std::vector<std::unique_ptr<Device>> make_cuda_devices() {
  std::vector<std::unique_ptr<Device>> devices;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // No driver or no device: the CPU backend takes over; cuda_unavailable_reason() says why.
    (void)cudaGetLastError();
    return devices;
  }
  const std::string driver = driver_text();
  const std::string runtime = runtime_text();
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    // A GPU that cannot be read is reported (device_error on every probe), never a reason to test
    // none of the others.
    try {
      devices.push_back(std::make_unique<CudaDevice>(identify(ordinal, ordinal, driver, runtime), ordinal));
    } catch (const CudaError& e) {
      (void)cudaGetLastError();
      devices.push_back(make_failed_device(unreadable_identity(ordinal), e.what()));
    }
  }
  return devices;
}

}  // namespace sdc
