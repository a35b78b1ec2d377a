// coll.allreduce_exact over NCCL on this process's GPUs (ncclCommInitAll, one thread per GPU): the
// data lives in GPU memory. Clean, both types agree bit for bit; a corrupted contribution is named
// by its links when there are two GPUs or more. Skips without a GPU.
#include <gtest/gtest.h>

#include <thread>

#include "host/backend.hpp"
#include "host/communicator.hpp"
#include "scheduler/collective.hpp"

namespace sdc {
namespace {

std::vector<CollectiveResult> allreduce_on_gpus(const std::vector<std::unique_ptr<Device>>& gpus, Injector* injector) {
  std::vector<DeviceIdentity> identities;
  for (const auto& g : gpus) identities.push_back(g->identity());
  auto ranks = make_nccl_local_communicators(identities);
  std::vector<CollectiveResult> results(gpus.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < gpus.size(); ++r) {
    EXPECT_TRUE(ranks[r]->gpu_memory());
    threads.emplace_back([&, r] { results[r] = check_allreduce(*ranks[r], gpus[r].get(), 5, injector); });
  }
  for (auto& t : threads) t.join();
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

}  // namespace
}  // namespace sdc
