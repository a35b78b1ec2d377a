#include "host/cpu_device.hpp"

#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <new>
#include <sstream>
#include <stdexcept>

#include "host/cpu_gemm.hpp"
#include "host/cpu_parallel.hpp"
#include "host/cpu_patterns.hpp"
#include "host/error.hpp"
#include "host/parse_number.hpp"
#include "host/pci_inventory.hpp"
#include "kernels/common/chains.hpp"
#include "kernels/common/corruption.hpp"

namespace sdc {
namespace {

// Words per chunk boundary: whole 64-byte lines, so no two cores write one line.
constexpr size_t kLineWords = 8;
// Buffers of at least a huge page are aligned to one and asked for huge pages: fewer page faults
// and TLB misses for the memory probes' large sequential passes.
constexpr size_t kHugePage = 2u << 20;
constexpr size_t kPage = 4096;
// The work each core does between two heartbeats, so that a watchdog of a few seconds never takes a
// healthy device, even ten times slower than a loaded sanitizer build, for a hung one: bytes of
// memory faulted in (64 MiB took under half a second at the slowest rate seen), bytes of a pattern
// pass or digest, and chain steps (copies times iterations; 2^22 fp32 steps take about 20 ms).
constexpr size_t kPrefaultRoundBytes = 8u << 20;
constexpr size_t kPassRoundWords = (16u << 20) / 8;
constexpr uint64_t kChainRoundSteps = 1u << 22;

class CpuBuffer : public DeviceBuffer {
 public:
  explicit CpuBuffer(size_t bytes) : bytes_(bytes) {
    const size_t align = bytes >= kHugePage ? kHugePage : 64;
    // Rounded up to whole lines (or huge pages), which must not wrap: a huge size is an allocation failure.
    if (bytes > std::numeric_limits<size_t>::max() - (align - 1)) throw std::bad_alloc();
    const size_t rounded = (bytes + align - 1) / align * align;
    data_ = std::aligned_alloc(align, rounded);
    if (data_ == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    // Best effort: where transparent huge pages are off, the buffer keeps small pages.
    if (align == kHugePage) ::madvise(data_, rounded, MADV_HUGEPAGE);
#endif
  }
  ~CpuBuffer() override { std::free(data_); }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
};

uint64_t* words_of(DeviceBuffer& buf) { return static_cast<uint64_t*>(buf.data()); }

void check_words(const DeviceBuffer& buf, size_t words) {
  if (words * 8 > buf.bytes()) throw std::out_of_range("pattern op beyond the end of its buffer");
}

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown CPU";
}

uint64_t read_meminfo_kib(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  uint64_t kib = 0;
  std::string unit;
  while (in >> name >> kib >> unit) {
    if (name == key) return kib;
  }
  return 0;
}

std::string instruction_set() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "x86_64-avx2-fma" : "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "generic";
#endif
}

// A stable id: the same host, model, device index and cores give the same UUID on every run.
std::string cpu_uuid(const std::string& host, const std::string& model, int index, const std::vector<int>& cores) {
  uint64_t h = mix64(0x5dc0 + static_cast<uint64_t>(index));
  auto absorb = [&](uint64_t v) { h = mix64(h ^ v); };
  for (char ch : host) absorb(static_cast<unsigned char>(ch));
  for (char ch : model) absorb(static_cast<unsigned char>(ch));
  for (int c : cores) absorb(static_cast<uint64_t>(c) + 0x100);
  const uint64_t g = mix64(h + 1);
  char text[64];
  std::snprintf(text, sizeof(text), "CPU-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(h >> 32),
                static_cast<unsigned>((h >> 16) & 0xffff), static_cast<unsigned>(h & 0xffff),
                static_cast<unsigned>(g >> 48), static_cast<unsigned long long>(g & 0xffffffffffffULL));
  return text;
}

DeviceIdentity cpu_identity(int index, const std::vector<int>& cores) {
  DeviceIdentity id;
  id.backend = "cpu";
  id.index = index;
  id.name = read_cpu_model();
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  id.uuid = cpu_uuid(host, id.name, index, cores);
  std::string list;
  for (int c : cores) list += (list.empty() ? "" : ",") + std::to_string(c);
  id.pci_bus_id = "cpu:" + list;
  id.compute_units = static_cast<int>(cores.size());
  id.compute_capability = instruction_set();
  id.memory_bytes = read_meminfo_kib("MemTotal:") * 1024;
  id.cache_bytes = cpu_cache_bytes(system_root(), cores);
  struct utsname u {};
  if (::uname(&u) == 0) id.driver_version = std::string("linux ") + u.release;
  id.runtime_version = "openmp " + std::to_string(_OPENMP);
  id.cores = cores;
  return id;
}

}  // namespace

CpuDevice::CpuDevice(int index, std::vector<int> cores, int sharing)
    : Device(cpu_identity(index, cores)), sharing_(std::max(sharing, 1)) {
  if (const char* text = std::getenv(kHostMemoryVariable)) {
    host_memory_bytes_ = parse_size(kHostMemoryVariable, text, uint64_t{1} << 20, uint64_t{1} << 48);
  }
}

uint64_t cpu_cache_bytes(const std::string& root, const std::vector<int>& cores) {
  namespace fs = std::filesystem;
  std::map<std::string, uint64_t> caches;  // by the list of cores that share each
  for (int core : cores) {
    const fs::path dir = fs::path(root) / "sys/devices/system/cpu" / ("cpu" + std::to_string(core)) / "cache";
    uint64_t level = 0, size = 0;
    std::string shared;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().rfind("index", 0) != 0) continue;
      const std::optional<uint64_t> l = parse_unsigned(read_sysfs_value(it->path() / "level"));
      uint64_t s = 0;
      try {
        s = parse_size("cache size", read_sysfs_value(it->path() / "size"), 1, uint64_t{1} << 40);
      } catch (const InputError&) {
        return 0;
      }
      if (!l) return 0;
      if (*l > level || (*l == level && s > size)) {
        level = *l;
        size = s;
        shared = read_sysfs_value(it->path() / "shared_cpu_list");
      }
    }
    if (size == 0) return 0;
    caches[shared.empty() ? std::to_string(core) : shared] = size;
  }
  uint64_t total = 0;
  for (const auto& [cores_sharing, bytes] : caches) total += bytes;
  return total;
}

uint64_t CpuDevice::free_memory_bytes() const { return read_meminfo_kib("MemAvailable:") * 1024; }

uint64_t CpuDevice::spare_memory_bytes() const {
  // Host memory is the node's: the job, the page cache and the other devices' probes share it.
  const uint64_t available = free_memory_bytes() + scratch_bytes();
  const uint64_t node = host_memory_bytes_ ? std::min(*host_memory_bytes_, available) : available / 2;
  return node / static_cast<uint64_t>(sharing_);
}

std::unique_ptr<DeviceBuffer> CpuDevice::allocate(size_t bytes) {
  auto buf = std::make_unique<CpuBuffer>(bytes);
  // Pre-faulted here, outside any pass, by the cores that will test it with the split every pass
  // uses (fill and verify over bytes / 8 words), so each page lands on its tester's NUMA node by
  // first touch and no probe pays the faults of a fresh buffer in its timed passes.
  // It goes in rounds, each core faulting the next kPrefaultRoundBytes of its own words, with a
  // heartbeat after each: faulting gigabytes of host memory can take longer than the watchdog.
  const uintptr_t base = reinterpret_cast<uintptr_t>(buf->data());
  for_each_core_in_rounds(
      cores(), (bytes + 7) / 8, kLineWords, kPrefaultRoundBytes / 8, false, [this] { beat(); },
      [&](size_t, size_t lo, size_t hi, int) {
        // Each page that starts in this piece; the first piece also the page the buffer starts in.
        const uintptr_t begin = base + lo * 8, end = base + hi * 8;
        if (lo == 0) *reinterpret_cast<volatile unsigned char*>(begin) = 0;
        for (uintptr_t a = (begin + kPage - 1) / kPage * kPage; a < end; a += kPage) {
          *reinterpret_cast<volatile unsigned char*>(a) = 0;
        }
      });
  return buf;
}

void CpuDevice::upload(DeviceBuffer& dst, const void* src, size_t bytes) {
  if (bytes > dst.bytes()) throw std::out_of_range("upload beyond the end of its buffer");
  std::memcpy(dst.data(), src, bytes);
}

void CpuDevice::download(void* dst, DeviceBuffer& src, size_t bytes) {
  if (bytes > src.bytes()) throw std::out_of_range("download beyond the end of its buffer");
  std::memcpy(dst, src.data(), bytes);
}

void CpuDevice::fill(DeviceBuffer& buf, size_t words, const Pattern& p) {
  check_words(buf, words);
  uint64_t* data = words_of(buf);
  for_each_core_in_rounds(
      cores(), words, kLineWords, kPassRoundWords, false, [this] { beat(); },
      [&](size_t, size_t lo, size_t hi, int) { cpu_fill_words(data, lo, hi, p); });
}

MismatchReport CpuDevice::verify(DeviceBuffer& buf, size_t words, const Pattern& expect, const Pattern* then_write,
                                 Direction dir) {
  check_words(buf, words);
  inject(buf, words, 64, 1);
  uint64_t* data = words_of(buf);
  std::vector<MismatchReport> parts(cores().size());
  for_each_core_in_rounds(
      cores(), words, kLineWords, kPassRoundWords, dir == Direction::kDown, [this] { beat(); },
      [&](size_t chunk, size_t lo, size_t hi, int core) {
        parts[chunk].checked += hi - lo;
        cpu_verify_words(data, lo, hi, expect, then_write, dir, core, parts[chunk]);
      });
  MismatchReport total;
  for (const auto& r : parts) total.merge(r);
  return total;
}

MismatchReport CpuDevice::run_chains(const ChainJob& job, const std::vector<uint64_t>& goldens, Digest128* digest) {
  if (job.seeds == 0 || job.seeds % 64 != 0) throw InputError("chain seeds must be a positive multiple of 64");
  if (goldens.size() != static_cast<size_t>(job.seeds) * kChainOutputsPerCopy) {
    throw std::invalid_argument("run_chains: need kChainOutputsPerCopy goldens per seed");
  }
  const unsigned width = chain_width_bits(job.kind);
  const uint64_t elements = job.copies * kChainOutputsPerCopy;
  auto out = allocate(elements * width / 8);
  // Compute and verify with the same split, so a mismatch names the core that computed it.
  const uint64_t round_copies = kChainRoundSteps / std::max<uint64_t>(job.iterations, 1);
  for_each_core_in_rounds(
      cores(), job.copies, 64, round_copies, false, [this] { beat(); },
      [&](size_t, size_t lo, size_t hi, int) { cpu_compute_chains(job, lo, hi, out->data()); });
  inject(*out, elements, width, kChainOutputsPerCopy);
  const unsigned lanes = cpu_simd_lanes(width == 32 ? 32 : 64);
  std::vector<MismatchReport> parts(cores().size());
  for_each_core(cores(), job.copies, 64, [&](size_t chunk, size_t lo, size_t hi, int core) {
    MismatchReport& r = parts[chunk];
    r.checked = (hi - lo) * kChainOutputsPerCopy;
    for (uint64_t e = lo * kChainOutputsPerCopy; e < hi * kChainOutputsPerCopy; ++e) {
      const uint64_t copy = e / kChainOutputsPerCopy;
      const uint64_t expected = goldens[(copy % job.seeds) * kChainOutputsPerCopy + e % kChainOutputsPerCopy];
      const uint64_t observed = load_element(out->data(), e, width);
      if (__builtin_expect(observed != expected, 0)) {
        ++r.mismatches;
        MismatchRecord rec;
        rec.index = e;
        rec.expected = expected;
        rec.observed = observed;
        rec.width_bits = width;
        rec.unit = core;
        rec.lane = static_cast<int>(copy % lanes);
        r.keep(rec);
      }
    }
  });
  MismatchReport total;
  for (const auto& r : parts) total.merge(r);
  if (digest != nullptr) *digest = this->digest(*out, elements * width / 64);
  return total;
}

Digest128 CpuDevice::digest(DeviceBuffer& buf, size_t words) {
  check_words(buf, words);
  const uint64_t* w = words_of(buf);
  std::vector<Digest128> parts(cores().size());
  for_each_core_in_rounds(
      cores(), words, kLineWords, kPassRoundWords, false, [this] { beat(); },
      [&](size_t chunk, size_t lo, size_t hi, int) {
        Digest128 d;
        for (size_t i = lo; i < hi; ++i) digest_add(d, w[i], i);
        digest_merge(parts[chunk], d);
      });
  Digest128 total;
  for (const auto& d : parts) digest_merge(total, d);
  return total;
}

std::optional<int> CpuDevice::stream_device(void* stream) {
  if (stream == nullptr) return std::nullopt;
  return static_cast<int>(reinterpret_cast<uintptr_t>(stream) - 1);
}

GemmEngine* CpuDevice::gemm() {
  if (!gemm_) {
    gemm_ = std::make_unique<CpuGemmEngine>(*this, cores(),
                                            [this](DeviceBuffer& c, uint64_t elements, unsigned width, uint64_t group) {
                                              inject(c, elements, width, group);
                                            });
  }
  return gemm_.get();
}

uint64_t CpuDevice::apply_corruption(DeviceBuffer& buf, unsigned width_bits, uint64_t elements, uint64_t group,
                                     const Corruption& c) {
  void* data = buf.data();
  // Keep the original of every element touched, so the count is of elements that really changed
  // (two flips of one bit cancel; a stuck bit may already hold its value).
  std::map<uint64_t, uint64_t> original;
  auto touch = [&](uint64_t i, uint64_t value) {
    const uint64_t old = load_element(data, i, width_bits);
    original.emplace(i, old);
    store_element(data, i, width_bits, value);
  };
  for (const auto& x : c.xors) touch(x.index, load_element(data, x.index, width_bits) ^ x.mask);
  if (c.stuck)
    touch(c.stuck_index, stuck_bit(load_element(data, c.stuck_index, width_bits), c.stuck_bit, c.stuck_value));
  uint64_t changed = 0;
  if (c.lane_mask) {
    for (uint64_t i = 0; i < elements; ++i) {
      if (lane_of(i, group, c.lanes) != c.lane) continue;
      const uint64_t old = load_element(data, i, width_bits);
      store_element(data, i, width_bits, old ^ c.mask);
      if (original.count(i) == 0) changed += load_element(data, i, width_bits) != old;
    }
  }
  for (const auto& [i, old] : original) changed += load_element(data, i, width_bits) != old;
  return changed;
}

}  // namespace sdc
