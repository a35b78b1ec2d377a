// Failure containment on the CPU: a device that fails to open is reported and the others are
// tested; a rank that throws mid-collective releases the other ranks instead of hanging them.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>

#include "host/backend.hpp"
#include "host/communicator.hpp"
#include "host/error.hpp"
#include "scheduler/consensus/collective.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {
namespace {

TEST(DeviceFailure, OneDeviceFailingToOpenIsDeviceErrorAloneAndTheOthersAreTested) {
  const auto devices = make_cpu_devices(4, {2});
  ASSERT_EQ(devices.size(), 4u);
  const auto probes = builtin_registry().select({"alu.*"});
  ASSERT_GE(probes.size(), 2u);
  RunOptions options;
  options.seed = 7;
  const RunReport report = run_probes(probes, devices, options, "run");
  ASSERT_EQ(report.devices.size(), 4u);
  ASSERT_EQ(report.results.size(), 4 * probes.size());
  for (const ProbeResult& r : report.results) {
    if (r.device_index == 2) {
      EXPECT_EQ(r.outcome, Outcome::kDeviceError) << r.probe;
      EXPECT_NE(r.reason.find("could not open cpu2"), std::string::npos) << r.reason;
    } else {
      EXPECT_EQ(r.outcome, Outcome::kPass) << "device " << r.device_index << " " << r.probe << ": " << r.reason;
    }
  }
}

TEST(DeviceFailure, OpenDeviceOpensTheOneAskedFor) {
  BackendOptions backend;
  backend.backend = "cpu";
  backend.cpu_devices = 4;
  EXPECT_EQ(open_device(backend, 3)->identity().index, 3);
  EXPECT_THROW(open_device(backend, 4), NoDeviceError);
  EXPECT_THROW(open_device(backend, -1), NoDeviceError);
  EXPECT_TRUE(open_device(backend, 0)->open_error().empty());
}

// Rank 2 throws between two collectives; without abort the other three would wait in the second
// one forever and join would never return.
TEST(RankFailure, ARankThrowingMidCollectiveReleasesTheOthersAndJoinReturns) {
  const auto ranks = make_local_communicators(4);
  const std::vector<std::string> errors = run_ranks(ranks, [](int rank, Communicator& comm) {
    float data[4] = {1, 2, 3, 4};
    comm.all_reduce_sum(data, 4, ReduceType::kFloat32);
    if (rank == 2) throw std::runtime_error("staging allocation failed");
    comm.all_reduce_sum(data, 4, ReduceType::kFloat32);
    comm.barrier();
  });
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[2], "rank 2: staging allocation failed");
  for (int r : {0, 1, 3}) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("communicator aborted: rank 2: staging allocation failed"),
              std::string::npos)
        << errors[static_cast<size_t>(r)];
  }
}

TEST(RankFailure, AbortReleasesARankWaitingForItsPeerInSendRecv) {
  const auto ranks = make_local_communicators(2);
  const std::vector<std::string> errors = run_ranks(ranks, [](int rank, Communicator& comm) {
    if (rank == 1) throw std::runtime_error("peer died");
    char byte = 1, got = 0;
    comm.send_recv(1, &byte, &got, 1);
  });
  EXPECT_EQ(errors[1], "rank 1: peer died");
  EXPECT_NE(errors[0].find("rank 1: peer died"), std::string::npos) << errors[0];
}

TEST(RankFailure, RanksThatAllFinishReportNoError) {
  const auto ranks = make_local_communicators(3);
  std::vector<float> sums(3);
  const std::vector<std::string> errors = run_ranks(ranks, [&](int rank, Communicator& comm) {
    float v = static_cast<float>(rank + 1);
    comm.all_reduce_sum(&v, 1, ReduceType::kFloat32);
    sums[static_cast<size_t>(rank)] = v;
  });
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(sums[r], 6.0f);
  }
}

// The collective with its staging made before the rank threads start, as GPUs need it.
TEST(RankFailure, AllreduceWithStagingMadeBeforeTheThreadsPasses) {
  const auto ranks = make_local_communicators(3);
  std::vector<AllreduceStaging> staging;
  for (const auto& rank : ranks) staging.push_back(make_allreduce_staging(*rank, nullptr));
  std::vector<CollectiveResult> results(3);
  const auto errors = run_ranks(ranks, [&](int r, Communicator& comm) {
    const size_t k = static_cast<size_t>(r);
    results[k] = check_allreduce(comm, nullptr, 11, nullptr, &staging[k]);
  });
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(results[r].mismatches, 0u);
    EXPECT_FALSE(results[r].any_failed);
    EXPECT_EQ(results[r].types, (std::vector<std::string>{"fp32", "bf16"}));
  }
}

}  // namespace
}  // namespace sdc
