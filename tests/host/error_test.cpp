// The error taxonomy's words for an operator: a DependencyError names its cause, anything else
// says only what went wrong.
#include "host/error.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace sdc {
namespace {

TEST(ErrorTaxonomy, ADependencyErrorNamesItsCause) {
  EXPECT_EQ(describe_error(NcclError("rank 1: ncclAllReduce: unhandled system error")),
            "NCCL error: rank 1: ncclAllReduce: unhandled system error");
  EXPECT_EQ(describe_error(NvmlError("nvmlInit_v2: Driver Not Loaded")), "NVML error: nvmlInit_v2: Driver Not Loaded");
  EXPECT_EQ(describe_error(WorkerProtocolError("\"start\" is not a string")),
            "worker protocol error: \"start\" is not a string");
  EXPECT_EQ(describe_error(std::runtime_error("fork: Resource temporarily unavailable")),
            "fork: Resource temporarily unavailable");
  EXPECT_EQ(describe_error(InputError("--size: not a size")), "--size: not a size");
}

}  // namespace
}  // namespace sdc
