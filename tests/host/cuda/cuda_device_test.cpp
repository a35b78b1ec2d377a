// The CUDA backend against the CPU backend: every Device operation on the GPU must give what the
// same operation gives on the CPU, chains must match the host's scalar goldens, and every fault
// model must be detected at the injected index and bit. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <regex>
#include <vector>

#include "host/backend.hpp"
#include "host/cuda/cuda_raii.hpp"
#include "host/error.hpp"
#include "kernels/common/chains.hpp"
#include "probes/chain_probe.hpp"

namespace sdc {
namespace {

// Not a multiple of any grid stride, so that tails and the descending walk's edges are covered.
constexpr size_t kWords = (1u << 20) + 13;

class CudaDeviceTest : public testing::Test {
 protected:
  void SetUp() override {
    gpus_ = make_cuda_devices();
    if (gpus_.empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
    cpus_ = make_cpu_devices(1);
  }

  Device& gpu() { return *gpus_[0]; }
  Device& cpu() { return *cpus_[0]; }

  static std::vector<uint64_t> contents(Device& d, DeviceBuffer& buf, size_t words) {
    std::vector<uint64_t> w(words);
    d.download(w.data(), buf, words * sizeof(uint64_t));
    return w;
  }

  std::vector<std::unique_ptr<Device>> gpus_;
  std::vector<std::unique_ptr<Device>> cpus_;
};

std::vector<Pattern> every_pattern() {
  std::vector<Pattern> patterns;
  for (uint32_t k = 0; k < kPatternKinds; ++k) {
    Pattern p;
    p.kind = static_cast<PatternKind>(k);
    p.param = k == static_cast<uint32_t>(PatternKind::kRandomBlocks) ? 10 : 0x0123456789abcdefULL + k;
    p.seed = 0x5eed + k;
    patterns.push_back(p);
  }
  return patterns;
}

ChainJob chain_job(ChainKind kind, uint64_t copies) {
  ChainJob job;
  job.kind = kind;
  job.seed = 42;
  job.seeds = 1024;
  job.copies = copies;
  job.iterations = 500;
  return job;
}

TEST_F(CudaDeviceTest, IdentityIsInNvidiaSmiForm) {
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const DeviceIdentity& id = gpus_[i]->identity();
    EXPECT_EQ(id.backend, "cuda");
    EXPECT_EQ(id.index, static_cast<int>(i));
    EXPECT_FALSE(id.name.empty());
    const std::regex uuid("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
    const std::regex bus_id("[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\\.0");
    EXPECT_TRUE(std::regex_match(id.uuid, uuid)) << id.uuid;
    EXPECT_TRUE(std::regex_match(id.pci_bus_id, bus_id)) << id.pci_bus_id;
    EXPECT_GT(id.compute_units, 0);
    EXPECT_TRUE(std::regex_match(id.compute_capability, std::regex("[0-9]+\\.[0-9]+"))) << id.compute_capability;
    EXPECT_GT(id.memory_bytes, 0u);
    EXPECT_LE(gpus_[i]->free_memory_bytes(), id.memory_bytes);
    // The L2 the inline memory rotation must exceed: MiBs on every GPU the project supports.
    EXPECT_GE(id.cache_bytes, 1u << 20);
    EXPECT_LT(id.cache_bytes, id.memory_bytes);
    EXPECT_FALSE(id.driver_version.empty());
    EXPECT_NE(id.runtime_version.find("cuBLAS"), std::string::npos) << id.runtime_version;
  }
}

TEST_F(CudaDeviceTest, UploadDownloadRoundTripsAndChecksBuffers) {
  std::vector<uint64_t> words(kWords);
  std::mt19937_64 rng(7);
  for (auto& w : words) w = rng();
  auto buf = gpu().allocate(kWords * sizeof(uint64_t));
  ASSERT_EQ(buf->bytes(), kWords * sizeof(uint64_t));
  gpu().upload(*buf, words.data(), kWords * sizeof(uint64_t));
  EXPECT_EQ(contents(gpu(), *buf, kWords), words);

  EXPECT_THROW(gpu().upload(*buf, words.data(), (kWords + 1) * sizeof(uint64_t)), std::out_of_range);
  auto host_buf = cpu().allocate(64);
  EXPECT_THROW(gpu().fill(*host_buf, 8, Pattern{}), std::invalid_argument);
}

TEST_F(CudaDeviceTest, FillWritesWhatTheCpuWrites) {
  auto g = gpu().allocate(kWords * sizeof(uint64_t));
  auto c = cpu().allocate(kWords * sizeof(uint64_t));
  for (Pattern p : every_pattern()) {
    for (bool inverted : {false, true}) {
      p.inverted = inverted;
      gpu().fill(*g, kWords, p);
      cpu().fill(*c, kWords, p);
      EXPECT_EQ(contents(gpu(), *g, kWords), contents(cpu(), *c, kWords))
          << "pattern " << static_cast<int>(p.kind) << " inverted " << inverted;
    }
  }
}

TEST_F(CudaDeviceTest, MarchElementsPassCleanInBothDirections) {
  auto g = gpu().allocate(kWords * sizeof(uint64_t));
  for (const Pattern& p : every_pattern()) {
    for (Direction dir : {Direction::kUp, Direction::kDown}) {
      const Pattern next = inverse(p);
      gpu().fill(*g, kWords, p);
      const MismatchReport r = gpu().verify(*g, kWords, p, &next, dir);
      EXPECT_EQ(r.checked, kWords);
      EXPECT_EQ(r.mismatches, 0u) << "pattern " << static_cast<int>(p.kind);
      // Every word, the first and last included, was rewritten.
      const MismatchReport after = gpu().verify(*g, kWords, next, nullptr, dir);
      EXPECT_EQ(after.mismatches, 0u) << "pattern " << static_cast<int>(p.kind);
    }
  }
}

// A March element to another pattern of the same kind (mem.modulo20's next offset, a new seed or
// background) computes it with that kind's own code on the GPU: it must write what the CPU
// writes, inverted or not, in both directions.
TEST_F(CudaDeviceTest, MarchElementsToAnotherPatternOfTheSameKindWriteWhatTheCpuWrites) {
  auto g = gpu().allocate(kWords * sizeof(uint64_t));
  auto c = cpu().allocate(kWords * sizeof(uint64_t));
  for (const Pattern& p : every_pattern()) {
    for (bool inverted : {false, true}) {
      Pattern next = p;
      next.param = p.kind == PatternKind::kRandomBlocks ? 4 : p.param + 1;  // blocks under 2 KiB: per word
      next.seed = p.seed + 1;
      next.inverted = inverted;
      ASSERT_FALSE(is_bitwise_inverse(p, next)) << "pattern " << static_cast<int>(p.kind);
      for (Direction dir : {Direction::kUp, Direction::kDown}) {
        gpu().fill(*g, kWords, p);
        cpu().fill(*c, kWords, p);
        EXPECT_EQ(gpu().verify(*g, kWords, p, &next, dir).mismatches, 0u) << "pattern " << static_cast<int>(p.kind);
        EXPECT_EQ(cpu().verify(*c, kWords, p, &next, dir).mismatches, 0u) << "pattern " << static_cast<int>(p.kind);
        EXPECT_EQ(contents(gpu(), *g, kWords), contents(cpu(), *c, kWords))
            << "pattern " << static_cast<int>(p.kind) << " inverted " << inverted;
      }
    }
  }
}

// kRandomBlocks per word (blocks under 2 KiB), by whole block, and by 32 KiB units of larger
// blocks; a March element that writes a pattern other than the inverse; and buffers of a few
// words, where only the odd last word is not a 16-byte access.
TEST_F(CudaDeviceTest, RandomBlocksOtherRewritesAndShortBuffersMatchTheCpu) {
  auto g = gpu().allocate(kWords * sizeof(uint64_t));
  auto c = cpu().allocate(kWords * sizeof(uint64_t));
  const Pattern other{PatternKind::kRandom, 0, 3, false};
  for (uint64_t shift : {3u, 8u, 13u, 40u}) {
    const Pattern p{PatternKind::kRandomBlocks, shift, 9, false};
    for (Direction dir : {Direction::kUp, Direction::kDown}) {
      gpu().fill(*g, kWords, p);
      cpu().fill(*c, kWords, p);
      EXPECT_EQ(gpu().verify(*g, kWords, p, &other, dir).mismatches, 0u) << "shift " << shift;
      EXPECT_EQ(cpu().verify(*c, kWords, p, &other, dir).mismatches, 0u) << "shift " << shift;
      EXPECT_EQ(contents(gpu(), *g, kWords), contents(cpu(), *c, kWords)) << "shift " << shift;
    }
  }
  for (size_t words : {1u, 2u, 3u, 5u, 257u}) {
    const Pattern p{PatternKind::kOwnAddress, 0, 0, false};
    gpu().fill(*g, kWords, other);
    gpu().fill(*g, words, p);
    std::vector<uint64_t> w = contents(gpu(), *g, words + 1);
    for (size_t i = 0; i < words; ++i) EXPECT_EQ(w[i], pattern_word(p, i)) << words << " words, word " << i;
    EXPECT_EQ(w[words], pattern_word(other, words)) << "the word after " << words << " was written";
    EXPECT_EQ(gpu().verify(*g, words, p, nullptr, Direction::kDown).mismatches, 0u);
  }
}

TEST_F(CudaDeviceTest, VerifyReportsEachWrongWordWithItsPlace) {
  auto g = gpu().allocate(kWords * sizeof(uint64_t));
  Pattern p;
  p.kind = PatternKind::kCheckerboard;
  p.param = 0x5555555555555555ULL;
  for (Direction dir : {Direction::kUp, Direction::kDown}) {
    gpu().fill(*g, kWords, p);
    std::vector<uint64_t> w = contents(gpu(), *g, kWords);
    w[kWords - 1] ^= 1ULL << 63;
    w[77] ^= 0x100;
    w[0] ^= 1;
    gpu().upload(*g, w.data(), kWords * sizeof(uint64_t));
    const MismatchReport r = gpu().verify(*g, kWords, p, nullptr, dir);
    EXPECT_EQ(r.checked, kWords);
    ASSERT_EQ(r.mismatches, 3u);
    ASSERT_EQ(r.records.size(), 3u);
    const uint64_t indices[] = {0, 77, kWords - 1};
    const uint64_t syndromes[] = {1, 0x100, 1ULL << 63};
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(r.records[k].index, indices[k]);
      EXPECT_EQ(r.records[k].expected, pattern_word(p, indices[k]));
      EXPECT_EQ(r.records[k].syndrome(), syndromes[k]);
      EXPECT_EQ(r.records[k].width_bits, 64u);
      // A memory word names its address only: the reader's SM and lane are not the fault's place.
      EXPECT_EQ(r.records[k].unit, -1);
      EXPECT_EQ(r.records[k].lane, -1);
    }
  }
}

// A whole-buffer fault: one atomic per warp (device_util.cuh) keeps the count exact and the
// records within their slots.
TEST_F(CudaDeviceTest, EveryWordWrongCountsAllAndKeepsSixteenSortedRecords) {
  auto g = gpu().allocate(kWords * sizeof(uint64_t));
  Pattern zero, ones;
  ones.param = ~0ULL;
  gpu().fill(*g, kWords, zero);
  const MismatchReport r = gpu().verify(*g, kWords, ones, nullptr, Direction::kUp);
  EXPECT_EQ(r.mismatches, kWords);
  ASSERT_EQ(r.records.size(), MismatchReport::kMaxRecords);
  for (size_t k = 0; k < r.records.size(); ++k) {
    EXPECT_EQ(r.records[k].observed, 0u);
    EXPECT_EQ(r.records[k].expected, ~0ULL);
    EXPECT_EQ(r.records[k].unit, -1);
  }
  for (size_t k = 1; k < r.records.size(); ++k) EXPECT_LT(r.records[k - 1].index, r.records[k].index);
}

TEST_F(CudaDeviceTest, ChainsMatchHostGoldensForEveryKind) {
  for (ChainKind kind :
       {ChainKind::kFma32, ChainKind::kFma64, ChainKind::kInt64, ChainKind::kDivSqrt32, ChainKind::kDivSqrt64}) {
    const ChainJob job = chain_job(kind, 1024 * 64 + 96);
    const std::vector<uint64_t> goldens = chain_goldens(job);
    Digest128 digest;
    const MismatchReport g = gpu().run_chains(job, goldens, &digest);
    EXPECT_EQ(g.checked, job.copies * kChainOutputsPerCopy);
    EXPECT_EQ(digest, chain_output_digest(job, goldens)) << "kind " << static_cast<int>(kind);
    EXPECT_EQ(g.mismatches, 0u) << "kind " << static_cast<int>(kind);
    if (!g.records.empty()) {
      ADD_FAILURE() << "first mismatch at " << g.records[0].index << ": expected " << std::hex << g.records[0].expected
                    << " observed " << g.records[0].observed;
    }
    EXPECT_EQ(cpu().run_chains(job, goldens, nullptr).mismatches, 0u) << "kind " << static_cast<int>(kind);
  }
}

TEST_F(CudaDeviceTest, ChainsNameTheCopyAndLaneOfAWrongGolden) {
  const ChainJob job = chain_job(ChainKind::kInt64, 1024 * 8);
  std::vector<uint64_t> goldens = chain_goldens(job);
  goldens[5 * kChainOutputsPerCopy + 1] ^= 1ULL << 40;  // seed 5, second output
  const MismatchReport r = gpu().run_chains(job, goldens, nullptr);
  EXPECT_EQ(r.mismatches, 8u);  // every copy of seed 5
  ASSERT_FALSE(r.records.empty());
  EXPECT_EQ(r.records[0].index, 5 * kChainOutputsPerCopy + 1);
  EXPECT_EQ(r.records[0].syndrome(), 1ULL << 40);
  EXPECT_EQ(r.records[0].lane, 5);  // copy c runs on lane c % 32
  EXPECT_GE(r.records[0].unit, 0);
  EXPECT_THROW(gpu().run_chains(chain_job(ChainKind::kInt64, 64), {}, nullptr), std::invalid_argument);
}

TEST_F(CudaDeviceTest, DigestEqualsTheCpuDigestAndTheHostSum) {
  auto g = gpu().allocate(kWords * sizeof(uint64_t));
  auto c = cpu().allocate(kWords * sizeof(uint64_t));
  Pattern p;
  p.kind = PatternKind::kRandom;
  p.seed = 99;
  gpu().fill(*g, kWords, p);
  cpu().fill(*c, kWords, p);
  Digest128 host;
  for (size_t i = 0; i < kWords; ++i) digest_add(host, pattern_word(p, i), i);
  const Digest128 d = gpu().digest(*g, kWords);
  EXPECT_EQ(d, cpu().digest(*c, kWords));
  EXPECT_EQ(d, host);

  std::vector<uint64_t> w = contents(gpu(), *g, kWords);
  w[12345] ^= 1ULL << 17;
  gpu().upload(*g, w.data(), kWords * sizeof(uint64_t));
  const Digest128 changed = gpu().digest(*g, kWords);
  EXPECT_NE(changed.lo, d.lo);
  EXPECT_NE(changed.hi, d.hi);
}

// Runs one fill + verify with `spec` injected, on `device`.
MismatchReport verify_injected(Device& device, const std::string& spec, const Pattern& p, Direction dir) {
  Injector injector(parse_injection_specs(spec), 1234);
  device.set_injection(&injector, "mem.test");
  auto buf = device.allocate(kWords * sizeof(uint64_t));
  device.fill(*buf, kWords, p);
  MismatchReport r = device.verify(*buf, kWords, p, nullptr, dir);
  device.set_injection(nullptr, "");
  return r;
}

void expect_same_records(const MismatchReport& gpu, const MismatchReport& cpu) {
  ASSERT_EQ(gpu.mismatches, cpu.mismatches);
  ASSERT_EQ(gpu.records.size(), cpu.records.size());
  for (size_t k = 0; k < gpu.records.size(); ++k) {
    EXPECT_EQ(gpu.records[k].index, cpu.records[k].index);
    EXPECT_EQ(gpu.records[k].expected, cpu.records[k].expected);
    EXPECT_EQ(gpu.records[k].observed, cpu.records[k].observed);
  }
}

TEST_F(CudaDeviceTest, MemoryFaultModelsAreDetectedWhereInjected) {
  Pattern zero;  // solid 0: a stuck-at-1 shows
  struct Case {
    const char* spec;
    uint64_t index;
    uint64_t syndrome;  // 0: any non-zero syndrome
  };
  const Case cases[] = {
      {"model=bitflip,bit=7,index=5", 5, 1ULL << 7},
      {"model=multibit,bit=4,bits=3,index=9", 9, 0x70},
      {"model=random,index=3", 3, 0},
      {"model=stuck,bit=2,value=1,index=11", 11, 1ULL << 2},
  };
  for (const Case& c : cases) {
    for (Direction dir : {Direction::kUp, Direction::kDown}) {
      const MismatchReport g = verify_injected(gpu(), c.spec, zero, dir);
      ASSERT_EQ(g.mismatches, 1u) << c.spec;
      ASSERT_EQ(g.records.size(), 1u) << c.spec;
      EXPECT_EQ(g.records[0].index, c.index) << c.spec;
      if (c.syndrome != 0) {
        EXPECT_EQ(g.records[0].syndrome(), c.syndrome) << c.spec;
      }
      EXPECT_NE(g.records[0].syndrome(), 0u) << c.spec;
      // Same seed, same plan: the CPU backend sees the same fault.
      expect_same_records(g, verify_injected(cpu(), c.spec, zero, dir));
    }
  }
}

TEST_F(CudaDeviceTest, LaneMaskCorruptsEveryOutputOfOneLane) {
  // 512 copies: lane 3 computes copies 3, 35, ..., 16 copies of 2 outputs, all within the slots.
  const ChainJob job = chain_job(ChainKind::kFma32, 512);
  const std::vector<uint64_t> goldens = chain_goldens(job);
  MismatchReport reports[2];
  Device* devices[2] = {&gpu(), &cpu()};
  for (int d = 0; d < 2; ++d) {
    Injector injector(parse_injection_specs("model=lane,lane=3,lanes=32,mask=0x10"), 1);
    devices[d]->set_injection(&injector, "alu.fma32");
    reports[d] = devices[d]->run_chains(job, goldens, nullptr);
    devices[d]->set_injection(nullptr, "");
  }
  const MismatchReport& g = reports[0];
  EXPECT_EQ(g.mismatches, 32u);
  ASSERT_EQ(g.records.size(), MismatchReport::kMaxRecords);
  EXPECT_EQ(g.records[0].index, 6u);
  EXPECT_EQ(g.records[1].index, 7u);
  EXPECT_EQ(g.records[2].index, 70u);
  for (const MismatchRecord& r : g.records) {
    EXPECT_EQ(r.syndrome(), 0x10u);
    EXPECT_EQ(r.width_bits, 32u);
    EXPECT_EQ(r.lane, 3);
  }
  expect_same_records(g, reports[1]);
}

TEST_F(CudaDeviceTest, ChainBitflipNamesTheElementAndTransientFiresOnce) {
  const ChainJob job = chain_job(ChainKind::kFma64, 1024 * 4);
  const std::vector<uint64_t> goldens = chain_goldens(job);
  Injector injector(parse_injection_specs("model=bitflip,bit=52,index=5,mode=transient"), 1);
  gpu().set_injection(&injector, "alu.fma64");
  const MismatchReport first = gpu().run_chains(job, goldens, nullptr);
  const MismatchReport second = gpu().run_chains(job, goldens, nullptr);
  gpu().set_injection(nullptr, "");
  ASSERT_EQ(first.mismatches, 1u);
  EXPECT_EQ(first.records[0].index, 5u);
  EXPECT_EQ(first.records[0].syndrome(), 1ULL << 52);
  EXPECT_EQ(first.records[0].lane, 2);  // element 5 is copy 2's second output
  EXPECT_EQ(second.mismatches, 0u);
}

TEST_F(CudaDeviceTest, InjectionIsScopedToItsProbeAndDevice) {
  Pattern zero;
  Injector other_probe(parse_injection_specs("probe=alu.*,model=bitflip,bit=1,index=1"), 1);
  gpu().set_injection(&other_probe, "mem.test");
  auto buf = gpu().allocate(kWords * sizeof(uint64_t));
  gpu().fill(*buf, kWords, zero);
  EXPECT_EQ(gpu().verify(*buf, kWords, zero, nullptr, Direction::kUp).mismatches, 0u);
  Injector by_uuid(parse_injection_specs("device=" + gpu().identity().uuid + ",model=bitflip,bit=1,index=1"), 1);
  gpu().set_injection(&by_uuid, "mem.test");
  EXPECT_EQ(gpu().verify(*buf, kWords, zero, nullptr, Direction::kUp).mismatches, 1u);
  gpu().set_injection(nullptr, "");
}

TEST_F(CudaDeviceTest, RaiiOwnersMoveAndTheGuardRestoresTheDevice) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    DeviceGuard guard(count - 1);
    int current = -1;
    ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
    EXPECT_EQ(current, count - 1);
  }
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);

  Stream stream(0);
  EXPECT_NE(stream.get(), nullptr);
  Stream moved = std::move(stream);
  EXPECT_EQ(stream.get(), nullptr);  // the moved-from owner releases nothing
  EXPECT_NE(moved.get(), nullptr);
  Event event(0);
  EXPECT_NE(event.get(), nullptr);
  CublasHandle blas(0);
  EXPECT_NE(blas.get(), nullptr);
  CublasLtHandle lt(0);
  EXPECT_NE(lt.get(), nullptr);
  DeviceMemory memory(0, 4096);
  EXPECT_NE(memory.get(), nullptr);
  DeviceMemory taken = std::move(memory);
  EXPECT_EQ(memory.get(), nullptr);
  EXPECT_EQ(taken.bytes(), 4096u);
  EXPECT_EQ(DeviceMemory(0, 0).get(), nullptr);
}

}  // namespace
}  // namespace sdc
