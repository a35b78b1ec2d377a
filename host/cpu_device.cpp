#include "host/cpu_device.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>
#include <sstream>
#include <type_traits>

#include "host/cpu_parallel.hpp"
#include "host/error.hpp"
#include "kernels/common/chains.hpp"
#include "kernels/common/corruption.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sdc {
namespace {

// Words per chunk boundary: whole 64-byte lines, so no two cores write one line.
constexpr size_t kLineWords = 8;

class CpuBuffer : public DeviceBuffer {
 public:
  explicit CpuBuffer(size_t bytes) : bytes_(bytes) {
    data_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (data_ == nullptr) throw std::bad_alloc();
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

// Calls f with the pattern kind as a compile-time constant, so the inner loops carry no switch.
template <typename F>
void with_pattern_kind(PatternKind kind, F&& f) {
  switch (kind) {
    case PatternKind::kOwnAddress: f(std::integral_constant<PatternKind, PatternKind::kOwnAddress>{}); break;
    case PatternKind::kWalkingOnes: f(std::integral_constant<PatternKind, PatternKind::kWalkingOnes>{}); break;
    case PatternKind::kWalkingZeros: f(std::integral_constant<PatternKind, PatternKind::kWalkingZeros>{}); break;
    case PatternKind::kSolid: f(std::integral_constant<PatternKind, PatternKind::kSolid>{}); break;
    case PatternKind::kCheckerboard: f(std::integral_constant<PatternKind, PatternKind::kCheckerboard>{}); break;
    case PatternKind::kWalking8: f(std::integral_constant<PatternKind, PatternKind::kWalking8>{}); break;
    case PatternKind::kModulo20: f(std::integral_constant<PatternKind, PatternKind::kModulo20>{}); break;
    case PatternKind::kRandom: f(std::integral_constant<PatternKind, PatternKind::kRandom>{}); break;
    case PatternKind::kRandomBlocks: f(std::integral_constant<PatternKind, PatternKind::kRandomBlocks>{}); break;
  }
}

// Calls f(kind, pattern, lo, hi) over [lo, hi) in runs of one plain pattern kind, `kind` being a
// compile-time constant: one run for a plain pattern, one per block for kRandomBlocks.
template <typename F>
void for_each_run(const Pattern& p, size_t lo, size_t hi, Direction dir, F&& f) {
  if (p.kind != PatternKind::kRandomBlocks) {
    with_pattern_kind(p.kind, [&](auto kind) { f(kind, p, lo, hi); });
    return;
  }
  const unsigned shift = p.param & 63u;
  const size_t first = lo >> shift, last = (hi - 1) >> shift;
  for (size_t k = 0; k <= last - first; ++k) {
    const size_t block = dir == Direction::kUp ? first + k : last - k;
    const Pattern sub = random_block_pattern(p, block);
    const size_t run_lo = std::max(lo, block << shift), run_hi = std::min(hi, (block + 1) << shift);
    with_pattern_kind(sub.kind, [&](auto kind) { f(kind, sub, run_lo, run_hi); });
  }
}

// Non-temporal stores: a fill is never read back soon, so it should not evict the cache or pay
// for reading the lines it overwrites.
inline void stream_store(uint64_t* p, uint64_t v) {
#if defined(__x86_64__)
  _mm_stream_si64(reinterpret_cast<long long*>(p), static_cast<long long>(v));
#else
  *p = v;
#endif
}

inline void stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
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
  struct utsname u {};
  if (::uname(&u) == 0) id.driver_version = std::string("linux ") + u.release;
  id.runtime_version = "openmp " + std::to_string(_OPENMP);
  id.cores = cores;
  return id;
}

}  // namespace

CpuDevice::CpuDevice(int index, std::vector<int> cores) : Device(cpu_identity(index, cores)) {}

uint64_t CpuDevice::free_memory_bytes() const { return read_meminfo_kib("MemAvailable:") * 1024; }

std::unique_ptr<DeviceBuffer> CpuDevice::allocate(size_t bytes) {
  // Pages are placed by first touch: the first fill runs on the device's own cores, with the same
  // split as every later pass.
  return std::make_unique<CpuBuffer>(bytes);
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
  uint64_t* const data = words_of(buf);
  for_each_core(cores(), words, kLineWords, [&](size_t, size_t lo, size_t hi, int) {
    for_each_run(p, lo, hi, Direction::kUp, [&](auto kind, const Pattern& run, size_t run_lo, size_t run_hi) {
      // Locals, not references: the stores could alias the pattern and force reloads per word.
      const Pattern pat = run;
      const uint64_t invert = pat.inverted ? ~0ULL : 0;
      uint64_t* const out = data;
      for (size_t i = run_lo; i < run_hi; ++i) stream_store(out + i, pattern_word_of<decltype(kind)::value>(pat, i) ^ invert);
    });
    stream_fence();
  });
}

MismatchReport CpuDevice::verify(DeviceBuffer& buf, size_t words, const Pattern& expect, const Pattern* then_write,
                                 Direction dir) {
  check_words(buf, words);
  inject(buf, words, 64, 1);
  uint64_t* const data = words_of(buf);
  std::vector<MismatchReport> parts(cores().size());
  for_each_core(cores(), words, kLineWords, [&](size_t chunk, size_t lo, size_t hi, int core) {
    MismatchReport& r = parts[chunk];
    r.checked = hi - lo;
    auto note = [&](size_t i, uint64_t e, uint64_t v) {
      ++r.mismatches;
      MismatchRecord rec;
      rec.index = i;
      rec.expected = e;
      rec.observed = v;
      rec.unit = core;
      r.keep(rec);
    };
    for_each_run(expect, lo, hi, dir, [&](auto kind, const Pattern& run, size_t run_lo, size_t run_hi) {
      const Pattern pat = run;
      const uint64_t invert = pat.inverted ? ~0ULL : 0;
      uint64_t* const w = data;
      if (then_write == nullptr) {
        for (size_t i = run_lo; i < run_hi; ++i) {
          const uint64_t e = pattern_word_of<decltype(kind)::value>(pat, i) ^ invert;
          if (__builtin_expect(w[i] != e, 0)) note(i, e, w[i]);
        }
        return;
      }
      // A March element: read, check, and write each word before moving to the next.
      const Pattern next = *then_write;
      for (size_t k = 0; k < run_hi - run_lo; ++k) {
        const size_t i = dir == Direction::kUp ? run_lo + k : run_hi - 1 - k;
        const uint64_t e = pattern_word_of<decltype(kind)::value>(pat, i) ^ invert;
        const uint64_t v = w[i];
        if (__builtin_expect(v != e, 0)) note(i, e, v);
        w[i] = pattern_word(next, i);
      }
    });
  });
  MismatchReport total;
  for (const auto& r : parts) total.merge(r);
  return total;
}

MismatchReport CpuDevice::run_chains(const ChainJob& job, const std::vector<uint64_t>& goldens) {
  if (job.seeds == 0 || job.seeds % 64 != 0) throw InputError("chain seeds must be a positive multiple of 64");
  if (goldens.size() != static_cast<size_t>(job.seeds) * kChainOutputsPerCopy) {
    throw std::invalid_argument("run_chains: need kChainOutputsPerCopy goldens per seed");
  }
  const unsigned width = chain_width_bits(job.kind);
  const uint64_t elements = job.copies * kChainOutputsPerCopy;
  auto out = allocate(elements * width / 8);
  // Compute and verify with the same split, so a mismatch names the core that computed it.
  for_each_core(cores(), job.copies, 64, [&](size_t, size_t lo, size_t hi, int) {
    cpu_compute_chains(job, lo, hi, out->data());
  });
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
  return total;
}

Digest128 CpuDevice::digest(DeviceBuffer& buf, size_t words) {
  check_words(buf, words);
  const uint64_t* w = words_of(buf);
  std::vector<Digest128> parts(cores().size());
  for_each_core(cores(), words, kLineWords, [&](size_t chunk, size_t lo, size_t hi, int) {
    Digest128 d;
    for (size_t i = lo; i < hi; ++i) digest_add(d, w[i], i);
    parts[chunk] = d;
  });
  Digest128 total;
  for (const auto& d : parts) digest_merge(total, d);
  return total;
}

void CpuDevice::apply_corruption(DeviceBuffer& buf, unsigned width_bits, uint64_t elements, uint64_t group,
                                 const Corruption& c) {
  void* data = buf.data();
  for (const auto& x : c.xors) store_element(data, x.index, width_bits, load_element(data, x.index, width_bits) ^ x.mask);
  if (c.stuck) {
    store_element(data, c.stuck_index, width_bits,
                  stuck_bit(load_element(data, c.stuck_index, width_bits), c.stuck_bit, c.stuck_value));
  }
  if (c.lane_mask) {
    for (uint64_t i = 0; i < elements; ++i) {
      if (lane_of(i, group, c.lanes) == c.lane) store_element(data, i, width_bits, load_element(data, i, width_bits) ^ c.mask);
    }
  }
}

}  // namespace sdc
