// Contexts and device selection on a real GPU (issue: one context per GPU, the right GPU per
// rank). Its own program, since the first tests need a process in which no context exists yet.
// Skips without a GPU; the checks that need a second GPU skip with "needs 2 GPUs".
#include <cuda.h>
#include <gtest/gtest.h>

#include <thread>

#include "host/backend.hpp"
#include "host/cuda/cuda_context.hpp"
#include "host/cuda/cuda_raii.hpp"

namespace sdc {
namespace {

// Whether `ordinal`'s primary context is active, asked of the driver (which creates none).
bool context_active(int ordinal) {
  void* get = nullptr;
  void* state = nullptr;
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuDeviceGet", &get, 12000, cudaEnableDefault, nullptr), cudaSuccess);
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &state, 12000, cudaEnableDefault, nullptr),
            cudaSuccess);
  CUdevice device = 0;
  EXPECT_EQ(reinterpret_cast<CUresult (*)(CUdevice*, int)>(get)(&device, ordinal), CUDA_SUCCESS);
  unsigned flags = 0;
  int active = 0;
  EXPECT_EQ(reinterpret_cast<CUresult (*)(CUdevice, unsigned*, int*)>(state)(device, &flags, &active), CUDA_SUCCESS);
  return active != 0;
}

int gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  (void)cudaGetLastError();
  return count;
}

// First in this program: nothing has made a context yet.
TEST(CudaContexts, OpeningDevicesMakesNoContextUntilFirstUse) {
  if (gpu_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  auto all = make_cuda_devices();
  auto one = open_cuda_device(gpu_count() - 1);
  for (int g = 0; g < gpu_count(); ++g) EXPECT_FALSE(context_active(g)) << "GPU " << g;
  EXPECT_EQ(one->identity().index, gpu_count() - 1);
  auto buffer = one->allocate(4096);
  EXPECT_TRUE(context_active(gpu_count() - 1));
  // Opening and using the last GPU leaves the others untouched (device switching: needs 2 GPUs).
  for (int g = 0; g + 1 < gpu_count(); ++g) EXPECT_FALSE(context_active(g)) << "GPU " << g;
}

TEST(CudaContexts, AGuardOnAFreshThreadRestoresNoContextAndNeverTouchesGpu0) {
  if (gpu_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const int last = gpu_count() - 1;
  std::thread([&] {
    ASSERT_TRUE(current_cuda_context().known);
    EXPECT_EQ(current_cuda_context().context, nullptr);
    {
      DeviceGuard guard(last);
      EXPECT_NE(current_cuda_context().context, nullptr);
      int current = -1;
      EXPECT_EQ(cudaGetDevice(&current), cudaSuccess);
      EXPECT_EQ(current, last);
    }
    EXPECT_EQ(current_cuda_context().context, nullptr);  // not "device 0"
  }).join();
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  EXPECT_FALSE(context_active(0));
}

TEST(CudaContexts, NothrowGuardReportsAFailureWithoutThrowing) {
  if (gpu_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  testing::internal::CaptureStderr();
  bool ok = true;
  EXPECT_NO_THROW({
    NothrowDeviceGuard guard(gpu_count() + 7);
    ok = guard.ok();
  });
  (void)cudaGetLastError();
  EXPECT_FALSE(ok);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("cudaErrorInvalidDevice"), std::string::npos);
}

TEST(CudaContexts, StreamDeviceNamesTheStreamsGpu) {
  if (gpu_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  auto gpu0 = open_cuda_device(0);
  Stream stream0(0);
  EXPECT_EQ(gpu0->stream_device(stream0.get()), 0);
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  Stream stream1(1);
  EXPECT_EQ(gpu0->stream_device(stream1.get()), 1);
}

TEST(CudaContexts, OpenCudaDeviceRejectsAMissingOrdinal) {
  if (gpu_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  EXPECT_THROW(open_cuda_device(gpu_count()), NoDeviceError);
  EXPECT_THROW(open_cuda_device(-1), NoDeviceError);
}

}  // namespace
}  // namespace sdc
