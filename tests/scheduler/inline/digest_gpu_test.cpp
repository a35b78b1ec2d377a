// sdc_digest_cuda on a GPU: the same digest as sdc_digest_host for the same bytes, on the caller's
// stream, for whole and partial last words. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/common/random.hpp"
#include "sdcprobe/sdcprobe.h"

namespace {

bool have_gpu() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  return ok;
}

class DigestGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(DigestGpu, CudaDigestEqualsHostDigestOnTheCallersStream) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // Small, odd, and large enough that many blocks add to the result; at a 16-byte boundary and
  // 8 bytes past one, where the kernel's first word precedes its 16-byte loads.
  for (size_t offset : {size_t{0}, size_t{8}}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{13}, size_t{24}, size_t{4096}, size_t{(64u << 20) + 5}}) {
      std::vector<unsigned char> bytes(n);
      for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(sdc::mix64(n + i));
      unsigned char* base = nullptr;
      sdc_digest* out = nullptr;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&base), n + offset), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), sizeof(sdc_digest)), cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(base + offset, bytes.data(), n, cudaMemcpyHostToDevice, stream), cudaSuccess);
      ASSERT_EQ(sdc_digest_cuda(base + offset, n, out, stream), SDC_OK) << sdc_last_error();
      sdc_digest gpu{};
      ASSERT_EQ(cudaMemcpyAsync(&gpu, out, sizeof gpu, cudaMemcpyDeviceToHost, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      sdc_digest cpu{};
      ASSERT_EQ(sdc_digest_host(bytes.data(), n, &cpu), SDC_OK) << sdc_last_error();
      EXPECT_EQ(gpu.lo, cpu.lo) << n << " bytes at offset " << offset;
      EXPECT_EQ(gpu.hi, cpu.hi) << n << " bytes at offset " << offset;
      cudaFree(base);
      cudaFree(out);
    }
  }
  cudaStreamDestroy(stream);
}

TEST_F(DigestGpu, HostAndMisalignedPointersAreRefused) {
  void* data = nullptr;
  sdc_digest* out = nullptr;
  ASSERT_EQ(cudaMalloc(&data, 64), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), sizeof(sdc_digest)), cudaSuccess);
  std::vector<uint64_t> host(8);
  EXPECT_EQ(sdc_digest_cuda(host.data(), 64, out, nullptr), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_digest_cuda(static_cast<char*>(data) + 4, 32, out, nullptr), SDC_ERR_INVALID_ARGUMENT);
  sdc_digest on_host{};
  EXPECT_EQ(sdc_digest_cuda(data, 64, &on_host, nullptr), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // nothing was launched with a bad pointer
  cudaFree(data);
  cudaFree(out);
}

TEST_F(DigestGpu, IdentityNamesTheGpuAsNvidiaSmiDoes) {
  char buf[512];
  ASSERT_EQ(sdc_device_identity("cuda", 0, buf, sizeof buf, nullptr), SDC_OK) << sdc_last_error();
  const std::string text = buf;
  EXPECT_NE(text.find("\"uuid\":\"GPU-"), std::string::npos) << text;
  EXPECT_NE(text.find("\"pci_bus_id\":\"0000"), std::string::npos) << text;
}

}  // namespace
