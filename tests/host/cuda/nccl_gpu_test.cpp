// coll.allreduce_exact over NCCL on this process's GPUs (ncclCommInitAll, one thread per GPU): the
// data lives in GPU memory. Clean, both types agree bit for bit; a corrupted contribution is named
// by its links when there are two GPUs or more. Skips without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>

#include "host/backend.hpp"
#include "host/communicator.hpp"
#include "scheduler/consensus/collective.hpp"

namespace sdc {
namespace {

std::vector<CollectiveResult> allreduce_on_gpus(const std::vector<std::unique_ptr<Device>>& gpus, Injector* injector) {
  std::vector<DeviceIdentity> identities;
  for (const auto& g : gpus) identities.push_back(g->identity());
  auto ranks = make_nccl_local_communicators(identities);
  std::vector<CollectiveResult> results(gpus.size());
  // Staging (pinned host memory and GPU buffers) before the rank threads, freed after the join.
  std::vector<AllreduceStaging> staging;
  for (size_t r = 0; r < gpus.size(); ++r) {
    EXPECT_TRUE(ranks[r]->gpu_memory());
    staging.push_back(make_allreduce_staging(*ranks[r], gpus[r].get()));
  }
  const auto errors = run_ranks(ranks, [&](int r, Communicator& comm) {
    const size_t k = static_cast<size_t>(r);
    results[k] = check_allreduce(comm, gpus[k].get(), 5, injector, &staging[k]);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return results;
}

TEST(NcclAllreduce, CleanGpusAgreeBitForBitInFp32AndBf16) {
  auto gpus = make_cuda_devices();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  for (const auto& r : allreduce_on_gpus(gpus, nullptr)) {
    EXPECT_EQ(r.types, (std::vector<std::string>{"fp32", "bf16"}));
    EXPECT_EQ(r.mismatches, 0u);
    EXPECT_FALSE(r.any_failed);
  }
}

TEST(NcclAllreduce, ACorruptContributionIsNamedByItsLinks) {
  auto gpus = make_cuda_devices();
  if (gpus.size() < 2) GTEST_SKIP() << "needs two GPUs";
  Injector inj(parse_injection_specs("probe=coll.allreduce_exact,device=1,model=bitflip,bit=30,index=9"), 1);
  for (const auto& r : allreduce_on_gpus(gpus, &inj)) {
    EXPECT_TRUE(r.any_failed);
    ASSERT_FALSE(r.bad_links.empty());
    for (const auto& link : r.bad_links) EXPECT_EQ(link.first, 1);
    EXPECT_EQ(r.bad_links.size(), gpus.size() - 1);
  }
}

// Non-blocking communicators, polled: a lone rank's all-reduce completes and its communicator is
// finalised and destroyed cleanly.
TEST(NcclFailures, OneRankPerGpuCompletesThroughThePoll) {
  auto gpus = make_cuda_devices();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  gpus.resize(1);
  auto ranks = make_nccl_local_communicators({gpus[0]->identity()});
  const auto errors = run_ranks(ranks, [&](int, Communicator& comm) {
    auto buffer = gpus[0]->allocate(1024 * sizeof(float));
    comm.all_reduce_sum(buffer->data(), 1024, ReduceType::kFloat32);
    comm.barrier();
  });
  EXPECT_EQ(errors, std::vector<std::string>{""});
}

// Rank 1 fails before the collective: rank 0, already inside ncclAllReduce waiting for it, is
// released (its communicator aborted) with an error naming rank 1, and every thread is joined.
TEST(NcclFailures, ARankThatThrowsReleasesThePeersWaitingInNccl) {
  auto gpus = make_cuda_devices();
  if (gpus.size() < 2) GTEST_SKIP() << "needs 2 GPUs";
  std::vector<DeviceIdentity> identities;
  for (const auto& g : gpus) identities.push_back(g->identity());
  auto ranks = make_nccl_local_communicators(identities);
  const auto errors = run_ranks(ranks, [&](int r, Communicator& comm) {
    auto buffer = gpus[static_cast<size_t>(r)]->allocate(1024 * sizeof(float));
    if (r == 1) throw std::runtime_error("staging failed");
    comm.all_reduce_sum(buffer->data(), 1024, ReduceType::kFloat32);
  });
  EXPECT_EQ(errors[1], "rank 1: staging failed");
  for (size_t r = 0; r < errors.size(); ++r) {
    if (r == 1) continue;
    EXPECT_NE(errors[r].find("rank 1: staging failed"), std::string::npos) << errors[r];
  }
}

}  // namespace
}  // namespace sdc
