// The hand-written SIMT GEMM of gemm.simt.fp32: independent of cuBLAS and of the tensor cores, so a
// fault it shares with gemm.exact.* points at the FMA units, one it does not share at the tensor cores.
#include "kernels/gemm_launch.hpp"

namespace sdc {
namespace {

constexpr int kTile = 64;   // output tile edge
constexpr int kDepth = 16;  // k step staged through shared memory
constexpr int kThreads = 256;
constexpr int kSub = 4;  // each thread: kSub x kSub outputs, rows ty + 16 x, columns tx + 16 y

__global__ void __launch_bounds__(kThreads)
    gemm_simt_fp32_kernel(const float* __restrict__ a, const float* __restrict__ bt, float* __restrict__ c, uint32_t m,
                          uint32_t n, uint32_t k) {
  __shared__ float as[kDepth][kTile + 1];  // as[q][r] = A[row0 + r][p0 + q]
  __shared__ float bs[kDepth][kTile + 1];  // bs[q][r] = B[p0 + q][col0 + r]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const uint32_t row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  float acc[kSub][kSub];
#pragma unroll
  for (int x = 0; x < kSub; ++x) {
#pragma unroll
    for (int y = 0; y < kSub; ++y) acc[x][y] = 0.0f;
  }
  for (uint32_t p0 = 0; p0 < k; p0 += kDepth) {
    for (int e = threadIdx.x; e < kTile * kDepth; e += kThreads) {
      const int r = e / kDepth, q = e % kDepth;
      const uint32_t gp = p0 + q;
      const uint32_t gi = row0 + r, gj = col0 + r;
      as[q][r] = (gi < m && gp < k) ? a[static_cast<size_t>(gi) * k + gp] : 0.0f;
      bs[q][r] = (gj < n && gp < k) ? bt[static_cast<size_t>(gj) * k + gp] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kDepth; ++q) {
      float av[kSub], bv[kSub];
#pragma unroll
      for (int x = 0; x < kSub; ++x) {
        av[x] = as[q][ty + 16 * x];
        bv[x] = bs[q][tx + 16 * x];
      }
#pragma unroll
      for (int x = 0; x < kSub; ++x) {
#pragma unroll
        for (int y = 0; y < kSub; ++y) acc[x][y] = __fmaf_rn(av[x], bv[y], acc[x][y]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int x = 0; x < kSub; ++x) {
#pragma unroll
    for (int y = 0; y < kSub; ++y) {
      const uint32_t i = row0 + ty + 16 * x, j = col0 + tx + 16 * y;
      if (i < m && j < n) c[static_cast<size_t>(i) * n + j] = acc[x][y];
    }
  }
}

}  // namespace

cudaError_t launch_gemm_simt_fp32(const float* a, const float* bt, float* c, uint32_t m, uint32_t n, uint32_t k,
                                  cudaStream_t stream) {
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  gemm_simt_fp32_kernel<<<grid, kThreads, 0, stream>>>(a, bt, c, m, n, k);
  return cudaGetLastError();
}

}  // namespace sdc
