#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "host/backend.hpp"
#include "host/cpu_device.hpp"
#include "host/cpu_parallel.hpp"
#include "host/parse_number.hpp"
#include "kernels/common/chains.hpp"
#include "probes/chain_probe.hpp"
#include "tests/fuzz/mutate.hpp"

namespace sdc {
namespace {

constexpr size_t kWords = 1 << 16;

class CpuDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = make_cpu_devices(1);
    buf_ = dev().allocate(kWords * 8);
  }
  Device& dev() { return *devices_[0]; }
  std::vector<std::unique_ptr<Device>> devices_;
  std::unique_ptr<DeviceBuffer> buf_;
};

TEST_F(CpuDeviceTest, EveryPatternVerifiesCleanInBothDirections) {
  for (uint32_t k = 0; k < kPatternKinds; ++k) {
    const Pattern p{static_cast<PatternKind>(k), 9, 77, false};
    dev().fill(*buf_, kWords, p);
    const auto* words = static_cast<const uint64_t*>(buf_->data());
    for (size_t i = 0; i < kWords; ++i) ASSERT_EQ(words[i], pattern_word(p, i)) << "kind " << k << " word " << i;
    const Pattern q = inverse(p);
    for (Direction dir : {Direction::kUp, Direction::kDown}) {
      const MismatchReport r = dev().verify(*buf_, kWords, p, &q, dir);
      EXPECT_EQ(r.checked, kWords);
      EXPECT_EQ(r.mismatches, 0u) << "kind " << k;
      for (size_t i = 0; i < kWords; ++i) ASSERT_EQ(words[i], pattern_word(q, i)) << "kind " << k << " word " << i;
      EXPECT_EQ(dev().verify(*buf_, kWords, q, &p, dir).mismatches, 0u);
    }
  }
}

TEST_F(CpuDeviceTest, MismatchRecordsOffsetExpectedObservedAndCore) {
  const Pattern p{PatternKind::kRandom, 0, 5, false};
  dev().fill(*buf_, kWords, p);
  auto* words = static_cast<uint64_t*>(buf_->data());
  words[1234] ^= 1ULL << 40;
  words[60000] ^= 3;
  const MismatchReport r = dev().verify(*buf_, kWords, p, nullptr, Direction::kUp);
  EXPECT_EQ(r.mismatches, 2u);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].index, 1234u);
  EXPECT_EQ(r.records[0].expected, pattern_word(p, 1234));
  EXPECT_EQ(r.records[0].syndrome(), 1ULL << 40);
  EXPECT_EQ(r.records[0].bit_positions(), std::vector<int>{40});
  EXPECT_EQ(r.records[1].index, 60000u);
  EXPECT_EQ(r.records[1].bit_positions(), (std::vector<int>{0, 1}));
  EXPECT_GE(r.records[0].unit, 0);
}

TEST_F(CpuDeviceTest, KeepsTheSixteenLowestIndices) {
  const Pattern p{PatternKind::kSolid, 0, 0, false};
  dev().fill(*buf_, kWords, p);
  auto* words = static_cast<uint64_t*>(buf_->data());
  for (size_t i = kWords; i-- > 0;) {
    if (i % 100 == 0) words[i] = 1;
  }
  const MismatchReport r = dev().verify(*buf_, kWords, p, nullptr, Direction::kDown);
  EXPECT_EQ(r.mismatches, (kWords + 99) / 100);
  ASSERT_EQ(r.records.size(), MismatchReport::kMaxRecords);
  for (size_t k = 0; k < r.records.size(); ++k) EXPECT_EQ(r.records[k].index, 100 * k);
}

TEST_F(CpuDeviceTest, InjectionHitsTheChosenElementAndBit) {
  Injector inj(parse_injection_specs("model=bitflip,bit=13,index=4242"), 1);
  dev().set_injection(&inj, "mem.test");
  const Pattern p{PatternKind::kCheckerboard, 0x5555555555555555ULL, 0, false};
  dev().fill(*buf_, kWords, p);
  const MismatchReport r = dev().verify(*buf_, kWords, p, nullptr, Direction::kUp);
  ASSERT_EQ(r.mismatches, 1u);
  EXPECT_EQ(r.records[0].index, 4242u);
  EXPECT_EQ(r.records[0].syndrome(), 1ULL << 13);
  dev().set_injection(nullptr, "");
  dev().fill(*buf_, kWords, p);
  EXPECT_EQ(dev().verify(*buf_, kWords, p, nullptr, Direction::kUp).mismatches, 0u);
}

TEST_F(CpuDeviceTest, StuckBitShowsOnlyWhenWrittenTheOtherWay) {
  Injector inj(parse_injection_specs("model=stuck,bit=2,value=1,index=10"), 1);
  dev().set_injection(&inj, "mem.test");
  const Pattern ones{PatternKind::kSolid, ~0ULL, 0, false};
  dev().fill(*buf_, kWords, ones);
  EXPECT_EQ(dev().verify(*buf_, kWords, ones, nullptr, Direction::kUp).mismatches, 0u);
  dev().fill(*buf_, kWords, inverse(ones));
  const MismatchReport r = dev().verify(*buf_, kWords, inverse(ones), nullptr, Direction::kUp);
  ASSERT_EQ(r.mismatches, 1u);
  EXPECT_EQ(r.records[0].index, 10u);
  EXPECT_EQ(r.records[0].observed, 4u);
}

TEST_F(CpuDeviceTest, VectorChainsMatchScalarGoldens) {
  for (ChainKind kind :
       {ChainKind::kFma32, ChainKind::kFma64, ChainKind::kInt64, ChainKind::kDivSqrt32, ChainKind::kDivSqrt64}) {
    ChainJob job;
    job.kind = kind;
    job.seed = 11;
    job.seeds = 128;
    job.copies = 1000;  // not a multiple of the vector block: exercises the tail
    job.iterations = 300;
    Digest128 digest;
    const MismatchReport r = dev().run_chains(job, chain_goldens(job), &digest);
    EXPECT_EQ(r.checked, 2000u);
    EXPECT_EQ(r.mismatches, 0u) << static_cast<int>(kind);
    EXPECT_EQ(digest, chain_output_digest(job, chain_goldens(job))) << static_cast<int>(kind);
  }
}

TEST_F(CpuDeviceTest, ChainFaultNamesElementBitAndLane) {
  ChainJob job;
  job.kind = ChainKind::kFma32;
  job.seed = 3;
  job.seeds = 64;
  job.copies = 4096;
  job.iterations = 100;
  Injector inj(parse_injection_specs("model=bitflip,bit=22,index=777"), 1);
  dev().set_injection(&inj, "alu.fma32");
  Digest128 digest;
  const MismatchReport r = dev().run_chains(job, chain_goldens(job), &digest);
  EXPECT_NE(digest, chain_output_digest(job, chain_goldens(job)));  // the digest is of the corrupted output
  ASSERT_EQ(r.mismatches, 1u);
  EXPECT_EQ(r.records[0].index, 777u);
  EXPECT_EQ(r.records[0].width_bits, 32u);
  EXPECT_EQ(r.records[0].syndrome(), 1u << 22);
  EXPECT_EQ(r.records[0].lane, static_cast<int>((777 / 2) % cpu_simd_lanes(32)));
}

TEST_F(CpuDeviceTest, LaneMaskCorruptsExactlyOneLane) {
  ChainJob job;
  job.kind = ChainKind::kInt64;
  job.seed = 3;
  job.seeds = 64;
  job.copies = 640;
  job.iterations = 10;
  Injector inj(parse_injection_specs("model=lane,lane=3,lanes=32,mask=0x100"), 1);
  dev().set_injection(&inj, "alu.int64");
  const MismatchReport r = dev().run_chains(job, chain_goldens(job), nullptr);
  EXPECT_EQ(r.mismatches, 640u / 32 * 2);  // copies 3, 35, 67, ...: both outputs of each
  for (const auto& rec : r.records) {
    EXPECT_EQ(rec.index / 2 % 32, 3u);
    EXPECT_EQ(rec.syndrome(), 0x100u);
  }
}

TEST_F(CpuDeviceTest, DigestMatchesScalarDigest) {
  const Pattern p{PatternKind::kRandom, 0, 8, false};
  dev().fill(*buf_, kWords, p);
  Digest128 expected;
  for (uint64_t i = 0; i < kWords; ++i) digest_add(expected, pattern_word(p, i), i);
  EXPECT_TRUE(dev().digest(*buf_, kWords) == expected);
}

TEST(CpuDevices, VirtualDevicesHaveDistinctStableIdentities) {
  const auto a = make_cpu_devices(4);
  const auto b = make_cpu_devices(4);
  ASSERT_EQ(a.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]->identity().index, static_cast<int>(i));
    EXPECT_EQ(a[i]->identity().uuid, b[i]->identity().uuid);
    EXPECT_EQ(a[i]->identity().uuid.rfind("CPU-", 0), 0u);
    EXPECT_EQ(a[i]->identity().uuid.size(), 40u);
    EXPECT_FALSE(a[i]->identity().cores.empty());
    EXPECT_EQ(a[i]->identity().label(), "cpu" + std::to_string(i));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = i + 1; j < a.size(); ++j) EXPECT_NE(a[i]->identity().uuid, a[j]->identity().uuid);
  }
}

// Pages of [data, data + bytes) that are resident now.
size_t resident_pages(const void* data, size_t bytes, size_t& pages) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
  pages = (end - begin + page - 1) / page;
  std::vector<unsigned char> in(pages);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, in.data()) != 0) return 0;
  size_t resident = 0;
  for (unsigned char v : in) resident += v & 1;
  return resident;
}

// A memory probe's first pass must not pay the page faults of a fresh buffer: allocate() hands it
// over faulted in, a large one aligned for huge pages.
TEST(CpuDevices, BuffersComeFaultedInAndLargeOnesHugePageAligned) {
  auto devices = make_cpu_devices(1);
  for (size_t bytes : {size_t{10000}, (size_t{8} << 20) + 100}) {
    auto buf = devices[0]->allocate(bytes);
    EXPECT_EQ(buf->bytes(), bytes);
    const uintptr_t address = reinterpret_cast<uintptr_t>(buf->data());
    EXPECT_EQ(address % (bytes >= (2u << 20) ? (2u << 20) : 64), 0u) << bytes;
    size_t pages = 0;
    EXPECT_EQ(resident_pages(buf->data(), bytes, pages), pages) << bytes;
  }
}

// Faulting in a large buffer beats the heartbeat as it goes, so the watchdog never takes a slow
// allocation for a hang: at least once per 8 MiB of each core's share, every page faulted in.
TEST(CpuDevices, PreFaultingALargeBufferBeatsTheHeartbeat) {
  for (int count : {1, 3}) {
    auto devices = make_cpu_devices(count);
    Device& device = *devices.back();
    size_t beats = 0;
    device.set_heartbeat([&] { ++beats; });
    const size_t bytes = (size_t{200} << 20) + 4096 * 3 + 8;
    auto buf = device.allocate(bytes);
    const size_t cores = device.identity().cores.size();
    const size_t share = (bytes / 8 / cores + 8) * 8;  // each core's words, whole lines
    EXPECT_GE(beats, (share + (8u << 20) - 1) / (8u << 20)) << count;
    size_t pages = 0;
    EXPECT_EQ(resident_pages(buf->data(), bytes, pages), pages) << count;
  }
}

// A pass over a large buffer, and a long chain run, beat as they go, not only once done: a pass at
// least once per 16 MiB of each core's share, chains at least once per 2^22 steps of each core's
// copies (and once for faulting in their output, once when they are injected).
TEST(CpuDevices, LongPassesAndChainsBeatTheHeartbeatAsTheyGo) {
  auto devices = make_cpu_devices(1);
  Device& device = *devices.front();
  const size_t cores = device.identity().cores.size();
  const size_t words = (size_t{96} << 20) / 8;
  auto buf = device.allocate(words * 8);
  size_t beats = 0;
  device.set_heartbeat([&] { ++beats; });
  const Pattern p{PatternKind::kRandom, 0, 7, false};
  device.fill(*buf, words, p);
  const size_t rounds = ((words + cores - 1) / cores * 8 + (16u << 20) - 1) / (16u << 20);
  EXPECT_GE(beats, rounds);
  beats = 0;
  EXPECT_EQ(device.verify(*buf, words, p, nullptr, Direction::kDown).mismatches, 0u);
  EXPECT_GE(beats, 1 + rounds);  // injection, then each round
  beats = 0;
  ChainJob job;
  job.kind = ChainKind::kFma32;
  job.seed = 3;
  job.seeds = 64;
  job.copies = 8 * 64 * cores;
  job.iterations = 1u << 16;  // 64 copies of 2^16 steps a round: 8 rounds
  EXPECT_EQ(device.run_chains(job, chain_goldens(job), nullptr).mismatches, 0u);
  EXPECT_GE(beats, 1 + 8u + 1);
}

// However slow the work, the heartbeat comes about every kRoundTarget: a round sized for full speed
// (here a second of work) is cut into pieces that each take about that long.
TEST(CpuParallel, RoundsOfSlowWorkStillBeatEveryFewTenthsOfASecond) {
  const std::vector<int> one = {available_cores().front()};
  const size_t n = 1200000;  // a microsecond each: 1.2 s of work in one round at its full size
  auto last = std::chrono::steady_clock::now();
  double longest_gap_s = 0;
  size_t covered = 0;
  for_each_core_in_rounds(
      one, n, 1, n, false,
      [&] {
        const auto now = std::chrono::steady_clock::now();
        longest_gap_s = std::max(longest_gap_s, std::chrono::duration<double>(now - last).count());
        last = now;
      },
      [&](size_t, size_t lo, size_t hi, int) {
        EXPECT_EQ(lo, covered);
        covered = hi;
        std::this_thread::sleep_for(std::chrono::microseconds(hi - lo));
      });
  EXPECT_EQ(covered, n);
  EXPECT_LT(longest_gap_s, 0.6);
}

// The rounds hand each core exactly its for_each_core chunk, in pieces no larger than a round, in
// order (or in reverse), with `between` after each round.
TEST(CpuParallel, RoundsCoverEachCoresChunkInOrder) {
  const std::vector<int> cores = available_cores();
  for (const bool descending : {false, true}) {
    for (const size_t n : {size_t{0}, size_t{5}, size_t{1000}, size_t{4099}}) {
      std::vector<std::pair<size_t, size_t>> whole(cores.size(), {0, 0});
      for_each_core(cores, n, 8, [&](size_t chunk, size_t lo, size_t hi, int) { whole[chunk] = {lo, hi}; });
      std::vector<std::vector<std::pair<size_t, size_t>>> pieces(cores.size());
      size_t rounds = 0;
      for_each_core_in_rounds(
          cores, n, 8, 100, descending, [&] { ++rounds; },
          [&](size_t chunk, size_t lo, size_t hi, int core) {
            EXPECT_EQ(core, cores[chunk]);
            pieces[chunk].emplace_back(lo, hi);
          });
      size_t longest = 0;
      for (size_t c = 0; c < cores.size(); ++c) {
        longest = std::max(longest, whole[c].second - whole[c].first);
        size_t at = descending ? whole[c].second : whole[c].first;
        for (const auto& [lo, hi] : pieces[c]) {
          EXPECT_LE(hi - lo, 96u);  // the round, rounded down to the alignment
          EXPECT_EQ(descending ? hi : lo, at);
          at = descending ? lo : hi;
        }
        EXPECT_EQ(at, descending ? whole[c].first : whole[c].second) << n;
      }
      // Every round takes a piece from each chunk with work left.
      for (size_t c = 0; c < cores.size(); ++c) {
        if (whole[c].second - whole[c].first == longest) {
          EXPECT_EQ(pieces[c].size(), rounds) << n;
        }
      }
      EXPECT_GE(rounds, (longest + 95) / 96) << n;
    }
  }
}

TEST(CpuDevices, RejectsZeroDevices) { EXPECT_THROW(make_cpu_devices(0), std::exception); }

// A fake root/sys/devices/system/cpu tree: per core, cache entries of (level, size, shared cores).
class CpuCacheTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("sdcprobe-cpu-cache-" + std::to_string(::getpid()) + "-" +
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override {
    ::unsetenv("SDCPROBE_SYSFS_ROOT");
    std::filesystem::remove_all(root_);
  }
  void cache(int core, int index, const std::string& level, const std::string& size, const std::string& shared) {
    const auto dir =
        root_ / "sys/devices/system/cpu" / ("cpu" + std::to_string(core)) / "cache" / ("index" + std::to_string(index));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "level") << level << "\n";
    std::ofstream(dir / "size") << size << "\n";
    std::ofstream(dir / "shared_cpu_list") << shared << "\n";
  }
  // Two dies of two cores: private 32K L1 and 1M L2, a 32M L3 per die.
  void two_dies() {
    for (int core = 0; core < 4; ++core) {
      const std::string die = core < 2 ? "0-1" : "2-3";
      cache(core, 0, "1", "32K", std::to_string(core));
      cache(core, 2, "2", "1024K", std::to_string(core));
      cache(core, 3, "3", "32768K", die);
    }
  }
  std::filesystem::path root_;
};

TEST_F(CpuCacheTree, CountsEachLastLevelCacheOnceAcrossTheDevicesCores) {
  two_dies();
  EXPECT_EQ(cpu_cache_bytes(root_, {0}), 32ULL << 20);
  EXPECT_EQ(cpu_cache_bytes(root_, {0, 1}), 32ULL << 20);  // one L3 shared by both
  EXPECT_EQ(cpu_cache_bytes(root_, {1, 2}), 64ULL << 20);  // a core on each die: both L3s
  EXPECT_EQ(cpu_cache_bytes(root_, {0, 1, 2, 3}), 64ULL << 20);
}

TEST_F(CpuCacheTree, UnknownWhenAnyCoresCacheIsMissingOrUnreadable) {
  two_dies();
  EXPECT_EQ(cpu_cache_bytes(root_, {0, 7}), 0u);  // no cpu7
  cache(3, 3, "3", "32768X", "2-3");
  EXPECT_EQ(cpu_cache_bytes(root_, {2, 3}), 0u);
  cache(3, 3, "three", "32768K", "2-3");
  EXPECT_EQ(cpu_cache_bytes(root_, {3}), 0u);
  cache(3, 3, "3", "", "2-3");
  EXPECT_EQ(cpu_cache_bytes(root_, {3}), 0u);
  // Core 3's unreadable L3 never lets its L2 pass for the last level; the other die still reads.
  EXPECT_EQ(cpu_cache_bytes(root_, {0, 1}), 32ULL << 20);
}

// The identity reads the tree under SDCPROBE_SYSFS_ROOT, as the PCI inventory does.
TEST_F(CpuCacheTree, IdentityReadsTheCacheUnderTheSysfsRoot) {
  const std::vector<int> cores = available_cores();
  for (int core : cores) cache(core, 3, "3", "2048K", "0-1023");
  ::setenv("SDCPROBE_SYSFS_ROOT", root_.c_str(), 1);
  EXPECT_EQ(make_cpu_devices(1)[0]->identity().cache_bytes, 2ULL << 20);
  std::filesystem::remove_all(root_);
  EXPECT_EQ(make_cpu_devices(1)[0]->identity().cache_bytes, 0u);  // absent: unknown
}

// Seeded mutations of the level and size files: the answer is the size the files still say, or 0,
// never a crash or a number read from a malformed file.
TEST_F(CpuCacheTree, MutatedCacheFilesGiveTheirSizeOrUnknown) {
  constexpr uint64_t kSeed = 20261201;
  fuzz::Mutator mutator(kSeed);
  int read = 0, unknown = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string level = i % 2 == 0 ? mutator.mutate("3") : "3";
    const std::string size = i % 2 == 1 ? mutator.mutate("32768K", {"K", "M", "G"}) : "32768K";
    cache(0, 3, level, size, "0");
    const uint64_t got = cpu_cache_bytes(root_, {0});
    ++(got != 0 ? read : unknown);
    SCOPED_TRACE("seed " + std::to_string(kSeed) + " case " + std::to_string(i) + ": level '" + level + "' size '" +
                 size + "'");
    if (got != 0) {
      const size_t begin = size.find_first_not_of(" \t\r\n"), end = size.find_last_not_of(" \t\r\n");
      ASSERT_NE(begin, std::string::npos);
      EXPECT_EQ(got, parse_size("size", size.substr(begin, end + 1 - begin), 1, 1ULL << 40));
    }
  }
  EXPECT_GT(read, 0);  // the mutations left some files readable and broke others
  EXPECT_GT(unknown, 0);
}

}  // namespace
}  // namespace sdc
