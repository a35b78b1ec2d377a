// The lease kit's check that compute-sanitizer can run here at all: one trivial kernel, one
// allocation, one copy back. When this fails under the sanitizer, the tool cannot work on this
// machine (gVisor refuses the device), and the sanitizer step reports "could not run", not a
// finding in sdcprobe's kernels. Exit 0 when every word came back as written, 1 otherwise.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

// In namespace sdc like every kernel of sdcprobe, so that the sanitizer's kernel filter
// (KIT_SANITIZER_FILTER) instruments it too.
namespace sdc {
namespace {

constexpr unsigned kWords = 1024;

__global__ void write_index(unsigned* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kWords) out[i] = i;
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "gpu_kit_selftest: %s: %s (error %d)\n", what, cudaGetErrorString(e), static_cast<int>(e));
  return false;
}

}  // namespace
}  // namespace sdc

int main() {
  using namespace sdc;
  unsigned* device = nullptr;
  if (!ok(cudaMalloc(&device, kWords * sizeof(unsigned)), "cudaMalloc")) return 1;
  write_index<<<kWords / 256, 256>>>(device);
  std::vector<unsigned> host(kWords, ~0u);
  const bool ran = ok(cudaGetLastError(), "launch") &&
                   ok(cudaMemcpy(host.data(), device, kWords * sizeof(unsigned), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(device);
  if (!ran) return 1;
  for (unsigned i = 0; i < kWords; ++i) {
    if (host[i] != i) {
      std::fprintf(stderr, "gpu_kit_selftest: word %u is %u\n", i, host[i]);
      return 1;
    }
  }
  std::printf("gpu_kit_selftest: %u words written by a kernel and read back\n", kWords);
  return 0;
}
