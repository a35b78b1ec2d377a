// The hand-written SIMT GEMM of gemm.simt.fp32: independent of cuBLAS and of the tensor cores, so a
// fault it shares with gemm.exact.* points at the FMA units, one it does not share at the tensor cores.
// Register-tiled: each thread keeps an 8 x 8 block of C in registers and, per k, reads two float4
// of A and two of B from shared memory for 64 FMAs. The next k slice is loaded from global memory
// (float4) while the current one is used, into the other of two shared-memory buffers.
#include "kernels/common/simt_tile.hpp"
#include "kernels/gemm_launch.hpp"

namespace sdc {
namespace {

// Pads each shared row: keeps it 16-byte aligned, and the transposing stores conflict-free.
constexpr int kPad = 4;
constexpr int kHalf = kSimtTile / 2;

// Four consecutive k values p .. p + 3 of row `row` of a k-contiguous matrix (A or Bt), zero past
// its edges. kVector: k % 4 == 0 and 16-byte aligned rows, so the four are all in range or none.
template <bool kVector>
__device__ __forceinline__ float4 load_k4(const float* __restrict__ src, uint32_t rows, uint32_t k, uint32_t row,
                                          uint32_t p) {
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (row >= rows) return zero;
  const float* at = src + static_cast<size_t>(row) * k + p;
  if constexpr (kVector) {
    return p < k ? *reinterpret_cast<const float4*>(at) : zero;
  } else {
    return make_float4(p < k ? at[0] : 0.0f, p + 1 < k ? at[1] : 0.0f, p + 2 < k ? at[2] : 0.0f,
                       p + 3 < k ? at[3] : 0.0f);
  }
}

// Stores a loaded float4 transposed: slice[q][r] holds k value q of tile row r.
__device__ __forceinline__ void stage(float (*slice)[kSimtTile + kPad], int row, int q, float4 v) {
  slice[q][row] = v.x;
  slice[q + 1][row] = v.y;
  slice[q + 2][row] = v.z;
  slice[q + 3][row] = v.w;
}

__device__ __forceinline__ void unpack(const float* run, float (&out)[kSimtMicro], int c) {
  const float4 lo = *reinterpret_cast<const float4*>(run + c * 4);
  const float4 hi = *reinterpret_cast<const float4*>(run + kHalf + c * 4);
  out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w;
  out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
}

// C[i][j] is one FMA chain from 0 over p = 0 .. k - 1 in order, as before any tiling: the
// accumulation gemm.simt's tau assumes (CudaGemmEngine::accumulation). Zero padding past k adds
// fma(0, 0, acc) = acc exactly (acc, starting at +0, is never -0).
template <bool kVector>
__global__ void __launch_bounds__(kSimtThreads, 2)
    gemm_simt_fp32_kernel(const float* __restrict__ a, const float* __restrict__ bt, float* __restrict__ c, uint32_t m,
                          uint32_t n, uint32_t k, bool vector_store) {
  __shared__ __align__(16) float as[2][kSimtDepth][kSimtTile + kPad];  // as[.][q][r] = A[row0 + r][p0 + q]
  __shared__ __align__(16) float bs[2][kSimtDepth][kSimtTile + kPad];  // bs[.][q][r] = B[p0 + q][col0 + r]
  const int t = threadIdx.x;
  const int tx = t % kSimtGrid, ty = t / kSimtGrid;
  const uint32_t row0 = blockIdx.y * kSimtTile, col0 = blockIdx.x * kSimtTile;
  const int load_row = simt_load_row(t), load_k = simt_load_k(t);
  float acc[kSimtMicro][kSimtMicro];
#pragma unroll
  for (int i = 0; i < kSimtMicro; ++i) {
#pragma unroll
    for (int j = 0; j < kSimtMicro; ++j) acc[i][j] = 0.0f;
  }

  const uint32_t steps = (k + kSimtDepth - 1) / kSimtDepth;
  float4 next_a = load_k4<kVector>(a, m, k, row0 + load_row, load_k);
  float4 next_b = load_k4<kVector>(bt, n, k, col0 + load_row, load_k);
  stage(as[0], load_row, load_k, next_a);
  stage(bs[0], load_row, load_k, next_b);
  __syncthreads();
  for (uint32_t s = 0; s < steps; ++s) {
    const int cur = s % 2;
    const bool more = s + 1 < steps;
    if (more) {
      const uint32_t p = (s + 1) * kSimtDepth + load_k;
      next_a = load_k4<kVector>(a, m, k, row0 + load_row, p);
      next_b = load_k4<kVector>(bt, n, k, col0 + load_row, p);
    }
#pragma unroll
    for (int q = 0; q < kSimtDepth; ++q) {
      float av[kSimtMicro], bv[kSimtMicro];
      unpack(as[cur][q], av, ty);
      unpack(bs[cur][q], bv, tx);
#pragma unroll
      for (int i = 0; i < kSimtMicro; ++i) {
#pragma unroll
        for (int j = 0; j < kSimtMicro; ++j) acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
      }
    }
    if (more) {
      // The other buffer: its last readers passed the previous __syncthreads.
      stage(as[1 - cur], load_row, load_k, next_a);
      stage(bs[1 - cur], load_row, load_k, next_b);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < kSimtMicro; ++i) {
    const uint32_t row = row0 + simt_micro_offset(ty, i);
    if (row >= m) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t col = col0 + simt_micro_offset(tx, 4 * h);
      float* out = c + static_cast<size_t>(row) * n + col;
      if (vector_store && col + 3 < n) {
        *reinterpret_cast<float4*>(out) =
            make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (col + j < n) out[j] = acc[i][4 * h + j];
        }
      }
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t launch_gemm_simt_fp32(const float* a, const float* bt, float* c, uint32_t m, uint32_t n, uint32_t k,
                                  cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  const dim3 grid((n + kSimtTile - 1) / kSimtTile, (m + kSimtTile - 1) / kSimtTile);
  const bool vector_store = n % 4 == 0 && aligned16(c);
  if (k % 4 == 0 && aligned16(a) && aligned16(bt)) {
    gemm_simt_fp32_kernel<true><<<grid, kSimtThreads, 0, stream>>>(a, bt, c, m, n, k, vector_store);
  } else {
    gemm_simt_fp32_kernel<false><<<grid, kSimtThreads, 0, stream>>>(a, bt, c, m, n, k, vector_store);
  }
  return cudaGetLastError();
}

}  // namespace sdc
