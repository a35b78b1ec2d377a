// CUDA backend logic that needs no GPU: identity formatting as nvidia-smi prints it, sticky-error
// classification, the error macros, and the no-device path of make_cuda_devices.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "host/backend.hpp"
#include "host/cuda/cuda_error.hpp"
#include "host/cuda/cuda_identity.hpp"

namespace sdc {
namespace {

TEST(CudaIdentity, UuidIsLowercaseGpuForm) {
  const std::array<unsigned char, 16> bytes = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                               0x0f, 0xed, 0xcb, 0xa9, 0x87, 0x65, 0x43, 0x21};
  EXPECT_EQ(format_gpu_uuid(bytes), "GPU-12345678-9abc-def0-0fed-cba987654321");
  EXPECT_EQ(format_gpu_uuid({}), "GPU-00000000-0000-0000-0000-000000000000");
}

TEST(CudaIdentity, PciBusIdHasEightDigitDomainInUppercase) {
  EXPECT_EQ(format_pci_bus_id(0, 0x3b, 0), "00000000:3B:00.0");
  EXPECT_EQ(format_pci_bus_id(0x10001, 0xff, 0x1f), "00010001:FF:1F.0");
}

TEST(CudaIdentity, VersionsAsMajorDotMinor) {
  EXPECT_EQ(format_cuda_version(12040), "12.4");
  EXPECT_EQ(format_cuda_version(13000), "13.0");
  EXPECT_EQ(format_cuda_version(11080), "11.8");
}

TEST(CudaErrors, StickyErrorsAreTheOnesThatPoisonTheContext) {
  for (cudaError_t e :
       {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorECCUncorrectable, cudaErrorHardwareStackError,
        cudaErrorIllegalInstruction, cudaErrorMisalignedAddress, cudaErrorInvalidAddressSpace, cudaErrorInvalidPc,
        cudaErrorAssert, cudaErrorLaunchTimeout, cudaErrorNvlinkUncorrectable}) {
    EXPECT_TRUE(is_sticky_cuda_error(e)) << cudaGetErrorName(e);
  }
  EXPECT_TRUE(is_sticky_cuda_error(static_cast<cudaError_t>(226)));  // cudaErrorContained
  EXPECT_TRUE(is_sticky_cuda_error(static_cast<cudaError_t>(721)));  // cudaErrorTensorMemoryLeak
  for (cudaError_t e :
       {cudaSuccess, cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorNoDevice, cudaErrorInsufficientDriver,
        cudaErrorNotReady, cudaErrorLaunchOutOfResources, cudaErrorInvalidConfiguration}) {
    EXPECT_FALSE(is_sticky_cuda_error(e)) << cudaGetErrorName(e);
  }
}

TEST(CudaErrors, TryThrowsWithCodeStickyFlagExpressionAndPlace) {
  EXPECT_NO_THROW(SDC_CUDA_TRY(cudaSuccess));
  try {
    SDC_CUDA_TRY(cudaErrorIllegalAddress);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), static_cast<int>(cudaErrorIllegalAddress));
    EXPECT_EQ(e.source(), CudaError::Source::kRuntime);
    EXPECT_TRUE(e.sticky());
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaErrorIllegalAddress"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda_errors_test.cpp"), std::string::npos) << what;
  }
  try {
    SDC_CUDA_TRY(cudaErrorMemoryAllocation);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), static_cast<int>(cudaErrorMemoryAllocation));
    EXPECT_FALSE(e.sticky());
  }
}

TEST(CudaErrors, CublasTryThrowsWithTheStatus) {
  EXPECT_NO_THROW(SDC_CUBLAS_TRY(CUBLAS_STATUS_SUCCESS));
  try {
    SDC_CUBLAS_TRY(CUBLAS_STATUS_NOT_INITIALIZED);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    // The same number as cudaErrorInvalidValue: only the source tells them apart.
    static_assert(static_cast<int>(CUBLAS_STATUS_NOT_INITIALIZED) == static_cast<int>(cudaErrorInvalidValue));
    EXPECT_EQ(e.code(), static_cast<int>(CUBLAS_STATUS_NOT_INITIALIZED));
    EXPECT_EQ(e.source(), CudaError::Source::kCublas);
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos) << e.what();
  }
}

TEST(CudaErrors, LogReportsWithoutThrowing) {
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(SDC_CUDA_LOG(cudaErrorInvalidValue));
  EXPECT_NO_THROW(SDC_CUDA_LOG(cudaSuccess));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cudaErrorInvalidValue"), std::string::npos) << err;
  EXPECT_EQ(err.find("cudaSuccess"), std::string::npos) << err;
}

TEST(CudaBackend, NoDeviceMeansAnEmptyListAndAReason) {
  EXPECT_TRUE(cuda_backend_compiled());
  std::vector<std::unique_ptr<Device>> devices;
  ASSERT_NO_THROW(devices = make_cuda_devices());
  if (devices.empty()) {
    EXPECT_FALSE(cuda_unavailable_reason().empty());
  } else {
    EXPECT_TRUE(cuda_unavailable_reason().empty());
    for (size_t i = 0; i < devices.size(); ++i) EXPECT_EQ(devices[i]->identity().index, static_cast<int>(i));
  }
}

}  // namespace
}  // namespace sdc
