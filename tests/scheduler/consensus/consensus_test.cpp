// Consensus: the vote as a pure function, the local communicator, and the probes' digests on four
// virtual CPU devices.
#include "scheduler/consensus/consensus.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "host/backend.hpp"
#include "host/error.hpp"
#include "scheduler/consensus/collective.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {
namespace {

ConsensusRecord rec(int device, uint64_t digest, const std::string& probe = "p", const std::string& cls = "c",
                    std::optional<uint64_t> golden = std::nullopt) {
  ConsensusRecord r;
  r.host = "h";
  r.rank = device;
  r.device_index = device;
  r.uuid = "UUID-" + std::to_string(device);
  r.pci_bus_id = "bus" + std::to_string(device);
  r.class_key = cls;
  r.probe = probe;
  r.digest = Digest128{digest, ~digest};
  if (golden) r.golden = Digest128{*golden, ~*golden};
  return r;
}

std::vector<int> suspect_devices(const ConsensusOutcome& o) {
  std::vector<int> v;
  for (const auto& s : o.suspects) v.push_back(s.device.device_index);
  return v;
}

TEST(ConsensusVote, TheMinorityOfFourIsTheSuspect) {
  const ConsensusOutcome o = vote({rec(0, 7), rec(1, 7), rec(2, 9), rec(3, 7)});
  ASSERT_EQ(o.votes.size(), 1u);
  EXPECT_EQ(o.votes[0].kind, VoteKind::kMajority);
  EXPECT_EQ(suspect_devices(o), std::vector<int>{2});
  EXPECT_EQ(o.suspects[0].accusers, 3);
  EXPECT_FALSE(o.inconclusive());
  EXPECT_TRUE(o.implicates("h", 2));
  EXPECT_FALSE(o.implicates("h", 0));
}

TEST(ConsensusVote, AgreementNamesNoDevice) {
  const ConsensusOutcome o = vote({rec(0, 7), rec(1, 7), rec(2, 7), rec(3, 7)});
  EXPECT_EQ(o.votes[0].kind, VoteKind::kAgreed);
  EXPECT_TRUE(o.suspects.empty());
}

TEST(ConsensusVote, TwoDevicesSplitAreDecidedByTheGolden) {
  const ConsensusOutcome o = vote({rec(0, 7, "p", "c", 7), rec(1, 9, "p", "c", 7)});
  EXPECT_EQ(o.votes[0].kind, VoteKind::kGolden);
  EXPECT_EQ(suspect_devices(o), std::vector<int>{1});
}

TEST(ConsensusVote, TwoDevicesSplitWithoutAGoldenAreInconclusive) {
  const ConsensusOutcome o = vote({rec(0, 7), rec(1, 9)});
  EXPECT_EQ(o.votes[0].kind, VoteKind::kInconclusive);
  EXPECT_TRUE(o.suspects.empty());
  EXPECT_TRUE(o.inconclusive());
  EXPECT_TRUE(o.implicates("h", 0));
  EXPECT_TRUE(o.implicates("h", 1));
}

TEST(ConsensusVote, AnEvenSplitOfFourWithoutAGoldenIsInconclusive) {
  const ConsensusOutcome o = vote({rec(0, 7), rec(1, 7), rec(2, 9), rec(3, 9)});
  EXPECT_EQ(o.votes[0].kind, VoteKind::kInconclusive);
  EXPECT_TRUE(o.suspects.empty());
}

TEST(ConsensusVote, TheGoldenOverrulesAPairThatAgreesOnAWrongAnswer) {
  const ConsensusOutcome o = vote({rec(0, 9, "p", "c", 7), rec(1, 9, "p", "c", 7)});
  EXPECT_EQ(o.votes[0].kind, VoteKind::kGolden);
  EXPECT_EQ(suspect_devices(o), (std::vector<int>{0, 1}));
}

TEST(ConsensusVote, TheGoldenOverrulesAMajorityThatSharesAWrongAnswer) {
  const ConsensusOutcome o = vote({rec(0, 9, "p", "c", 7), rec(1, 9, "p", "c", 7), rec(2, 7, "p", "c", 7)});
  EXPECT_EQ(o.votes[0].kind, VoteKind::kGolden);
  EXPECT_EQ(suspect_devices(o), (std::vector<int>{0, 1}));
}

TEST(ConsensusVote, DevicesOfDifferentClassesAreNeverCompared) {
  const ConsensusOutcome o = vote({rec(0, 7, "p", "a"), rec(1, 9, "p", "b"), rec(2, 7, "p", "a")});
  ASSERT_EQ(o.votes.size(), 2u);
  EXPECT_TRUE(o.suspects.empty());
  EXPECT_FALSE(o.inconclusive());
}

TEST(EquivalenceClass, KeepsOnlyWhatChangesResults) {
  DeviceIdentity a;
  a.backend = "cpu";
  a.name = "Test CPU";
  a.compute_units = 4;
  a.compute_capability = "x86_64-avx2-fma";
  a.driver_version = "linux 6.1.0-18-amd64";
  a.runtime_version = "openmp 201511";
  DeviceIdentity b = a;
  b.driver_version = "linux 6.12.0-1-amd64";  // a kernel upgrade
  ProbeResult r;
  r.seed = 9;
  EXPECT_EQ(equivalence_class(a, r), equivalence_class(b, r));
  EXPECT_EQ(equivalence_class(a, r).find("linux"), std::string::npos);
  b.compute_units = 8;
  EXPECT_NE(equivalence_class(a, r), equivalence_class(b, r));
  // A GPU driver JIT-compiles PTX: it stays in the key.
  a.backend = b.backend = "cuda";
  b.compute_units = a.compute_units;
  a.driver_version = "570.86";
  b.driver_version = "575.51";
  EXPECT_NE(equivalence_class(a, r), equivalence_class(b, r));
}

TEST(ConsensusVote, TheDeviceAccusedByMostPeersComesFirst) {
  // q: devices 1 and 3 lose to 0, 2 and 4. p: device 3 alone differs from 0, 1, 2 and 5.
  const ConsensusOutcome o = vote({rec(0, 7, "q"), rec(1, 8, "q"), rec(2, 7, "q"), rec(3, 8, "q"), rec(4, 7, "q"),
                                   rec(0, 1, "p"), rec(1, 1, "p"), rec(2, 1, "p"), rec(3, 2, "p"), rec(5, 1, "p")});
  ASSERT_EQ(suspect_devices(o), (std::vector<int>{3, 1}));
  EXPECT_EQ(o.suspects[0].accusers, 5);  // 0, 2, 4 on q; 0, 1, 2, 5 on p
  EXPECT_EQ(o.suspects[1].accusers, 4);  // 0, 2, 4 on q; 3 on p
  EXPECT_EQ(o.suspects[0].probes, (std::vector<std::string>{"q", "p"}));
}

TEST(LocalCommunicator, EveryRankGetsEveryRecordInRankOrderRoundAfterRound) {
  auto ranks = make_local_communicators(4);
  std::vector<std::vector<std::string>> seen(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < 50; ++round) {
        const auto all = ranks[r]->all_gather(std::to_string(round * 10 + r));
        seen[r].push_back(all[0] + "," + all[1] + "," + all[2] + "," + all[3]);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(seen[r].size(), 50u);
    EXPECT_EQ(ranks[r]->rank(), r);
    EXPECT_EQ(ranks[r]->size(), 4);
    for (int round = 0; round < 50; ++round) {
      const int b = round * 10;
      EXPECT_EQ(seen[r][round], std::to_string(b) + "," + std::to_string(b + 1) + "," + std::to_string(b + 2) + "," +
                                    std::to_string(b + 3));
    }
  }
}

TEST(LocalCommunicator, AllReduceSumsInBothTypesAndSendRecvSwapsPairs) {
  auto ranks = make_local_communicators(3);
  std::vector<std::vector<float>> sums(3);
  std::vector<std::vector<uint16_t>> bf16_sums(3);
  std::vector<std::vector<std::string>> received(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      sums[r] = {1.0f * r, 10.0f};
      ranks[r]->all_reduce_sum(sums[r].data(), sums[r].size(), ReduceType::kFloat32);
      bf16_sums[r] = {0x3f80, 0x4120};  // 1 and 10
      ranks[r]->all_reduce_sum(bf16_sums[r].data(), bf16_sums[r].size(), ReduceType::kBFloat16);
      for (int peer = 0; peer < 3; ++peer) {
        if (peer == r) continue;
        const std::string mine = std::to_string(r) + ">" + std::to_string(peer);
        std::string theirs(mine.size(), '?');
        ranks[r]->send_recv(peer, mine.data(), theirs.data(), mine.size());
        received[r].push_back(theirs);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(sums[r], (std::vector<float>{3.0f, 30.0f}));
    EXPECT_EQ(bf16_sums[r], (std::vector<uint16_t>{0x4040, 0x41f0}));  // 3 and 30
  }
  EXPECT_EQ(received[0], (std::vector<std::string>{"1>0", "2>0"}));
  EXPECT_EQ(received[1], (std::vector<std::string>{"0>1", "2>1"}));
  EXPECT_EQ(received[2], (std::vector<std::string>{"0>2", "1>2"}));
}

TEST(LocalCommunicator, NoRankLeavesTheBarrierBeforeEveryRankArrives) {
  auto ranks = make_local_communicators(4);
  std::atomic<int> arrived{0};
  std::vector<int> seen_on_leaving(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * r));  // arrive one after another
      ++arrived;
      ranks[r]->barrier();
      seen_on_leaving[r] = arrived.load();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(seen_on_leaving, (std::vector<int>{4, 4, 4, 4}));
}

TEST(Bf16Add, RoundsTheFp32SumToNearestEven) {
  EXPECT_EQ(bf16_add(0x4380, 0x3f80), 0x4380);  // 256 + 1 = 257: a tie, to even 256
  EXPECT_EQ(bf16_add(0x4380, 0x4000), 0x4381);  // 256 + 2 = 258 exactly
  EXPECT_EQ(bf16_add(0x4381, 0x3f80), 0x4382);  // 258 + 1 = 259: a tie, to even 260
  EXPECT_EQ(bf16_add(0x437f, 0x3f80), 0x4380);  // 255 + 1 = 256 exactly
}

std::vector<CollectiveResult> allreduce_on_four(Injector* injector) {
  auto ranks = make_local_communicators(4);
  std::vector<CollectiveResult> results(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] { results[r] = check_allreduce(*ranks[r], nullptr, 99, injector); });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(AllreduceExact, CleanRanksAgreeBitForBitInFp32AndBf16) {
  for (const auto& r : allreduce_on_four(nullptr)) {
    EXPECT_EQ(r.types, (std::vector<std::string>{"fp32", "bf16"}));
    EXPECT_EQ(r.checked, 2 * kAllreduceElements);
    EXPECT_EQ(r.mismatches, 0u);
    EXPECT_FALSE(r.any_failed);
    EXPECT_FALSE(r.implicates(0));
  }
}

TEST(AllreduceExact, ACorruptContributionFailsAndThePairwiseRoundsNameItsLinks) {
  // Bit 30 of an FP32 element, bit 14 (30 mod 16) of a BF16 one: the exponent's top bit in both.
  Injector inj(parse_injection_specs("probe=coll.allreduce_exact,device=2,model=bitflip,bit=30,index=5"), 1);
  const auto results = allreduce_on_four(&inj);
  for (const auto& r : results) {
    EXPECT_EQ(r.mismatches, 2u);  // element 5 of each type
    EXPECT_TRUE(r.any_failed);
    EXPECT_EQ(r.bad_links, (std::vector<std::pair<int, int>>{{2, 0}, {2, 1}, {2, 3}}));
    EXPECT_TRUE(r.implicates(2));
    EXPECT_FALSE(r.implicates(0));
  }
}

TEST(AllreduceExact, Bf16SumsStayExactAtTheLargestRankCount) {
  // 255 ranks contribute up to 1 each: every partial sum is an integer of at most 255.
  auto ranks = make_local_communicators(kBf16MaxRanks);
  std::vector<CollectiveResult> results(kBf16MaxRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kBf16MaxRanks; ++r) {
    threads.emplace_back([&, r] { results[r] = check_allreduce(*ranks[r], nullptr, 7, nullptr); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    EXPECT_EQ(r.types, (std::vector<std::string>{"fp32", "bf16"}));
    EXPECT_EQ(r.mismatches, 0u);
  }
}

TEST(NcclCommunicator, WithoutNcclSaysWhatIsMissing) {
  if (nccl_compiled()) GTEST_SKIP() << "built with NCCL (it needs GPUs: tests/host/cuda runs it)";
  auto control = make_local_communicators(1);
  try {
    make_nccl_world_communicator(*control.front(), DeviceIdentity{});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("libnccl-dev"), std::string::npos);
  }
}

TEST(MpiCommunicator, WithoutMpiSaysWhatIsMissing) {
  if (mpi_compiled()) GTEST_SKIP() << "built with MPI (tests/cli/consensus_cli_test.cpp runs it under mpirun)";
  try {
    make_mpi_communicator();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("libopenmpi-dev"), std::string::npos);
  }
}

// The deterministic probes on four virtual CPU devices, clean, over many seeds: digests agree.
TEST(ConsensusProbes, CleanDevicesAgreeOverTwoHundredSeeds) {
  ProbeRegistry registry;
  register_builtin_probes(registry);
  const auto probes = registry.select({"alu.*", "gemm.exact.fp32", "sfu.transcendental"});
  const auto devices = make_cpu_devices(4);
  std::vector<DeviceIdentity> ids;
  for (const auto& d : devices) ids.push_back(d->identity());
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    RunOptions options;
    options.seed = seed;
    options.iterations = 16;        // short chains: the digests, not the work, are under test
    options.compute_bytes = 65536;  // 64 x 64 GEMM; 2,688 inputs per SFU function
    const RunReport report = run_probes(probes, devices, options, "run");
    const auto records = consensus_records(ids, report.results, "h", 0);
    ASSERT_EQ(records.size(), probes.size() * devices.size());
    const ConsensusOutcome o = vote(records);
    ASSERT_TRUE(o.suspects.empty()) << "seed " << seed << " names " << o.suspects[0].device.uuid;
    ASSERT_FALSE(o.inconclusive()) << "seed " << seed;
  }
}

TEST(ConsensusProbes, ChainDigestsMatchTheHostGoldenDigest) {
  ProbeRegistry registry;
  register_builtin_probes(registry);
  auto devices = make_cpu_devices(1);
  RunOptions options;
  options.seed = 5;
  options.iterations = 32;
  for (const Probe* p : registry.select({"alu.*"})) {
    const ProbeResult r = run_probe(*p, *devices[0], options);
    ASSERT_TRUE(r.digest && r.golden_digest) << p->id();
    EXPECT_EQ(*r.digest, *r.golden_digest) << p->id();
  }
}

}  // namespace
}  // namespace sdc
