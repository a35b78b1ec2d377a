// The check at speed's fast path on the device (the arithmetic: kernels/common/gemm_fast_check.hpp,
// CPU-tested): the row check's reference computed in one pass over A as stored, in its own type,
// against the thin Y (r = A Y on the FP32 units in chunks added in FP64; fp64 in FP64) with each
// line's norm; each repeat's pass over C read in aligned vectors; and a batch of repeats whose
// summaries and failed checks (captured with their repeat and elements) the host reads once.
#include <cuda_runtime.h>

#include "kernels/common/gemm_fast_check.hpp"
#include "kernels/device_util.cuh"
#include "kernels/gemm_launch.hpp"

namespace sdc {
namespace {

constexpr unsigned kThreads = 256;

// Sums (or maxima of) N values over the block; thread 0 holds the result. Every thread must call it.
template <typename T, int N, bool kMax>
__device__ void block_reduce(T (&v)[N]) {
  __shared__ T part[kThreads / 32][N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    for (int offset = 16; offset > 0; offset /= 2) {
      const T other = __shfl_down_sync(0xffffffffu, v[i], offset);
      v[i] = kMax ? (other > v[i] ? other : v[i]) : v[i] + other;
    }
  }
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) part[threadIdx.x / 32][i] = v[i];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < blockDim.x / 32; ++w) {
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = kMax ? (part[w][i] > v[i] ? part[w][i] : v[i]) : v[i] + part[w][i];
    }
  }
  __syncthreads();
}

// ---- The reference over A ------------------------------------------------------------------------

// y32 = Y rounded to FP32 (the reference's operand), and tile_sq[t] += the squares of |B||w|_t as
// launch_gemm_float_y keeps it (FP32; gemm_norm_factor covers that rounding).
__global__ void fast_y(uint32_t k, uint32_t tiles, const double* __restrict__ y, const float* __restrict__ ya,
                       float* __restrict__ y32, double* tile_sq) {
  const uint32_t t = blockIdx.y;
  double sq[1] = {0};
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < k; p += gridDim.x * blockDim.x) {
    const uint64_t i = static_cast<uint64_t>(t) * k + p;
    y32[i] = static_cast<float>(y[i]);
    const double v = ya[i];
    sq[0] = fma(v, v, sq[0]);
  }
  block_reduce<double, 1, false>(sq);
  if (threadIdx.x == 0 && t < tiles) atomicAdd(&tile_sq[t], sq[0]);
}

// v[i] = sqrt(v[i]): the norms from their sums of squares (apart from the sums' kernels, whose
// registers sqrt's slow path would spill).
__global__ void square_roots(double* v, uint32_t count) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) v[i] = sqrt(v[i]);
}

// A block takes kRefEdge lines by kRefEdge tiles (gemm_fast_check.hpp's tiling), staging kRefDepth
// depth steps of A (decoded from its own type) and of Y through shared memory; each thread sums
// 4 x 4 outputs, read as float4. The first column of blocks also sums each line's squares.
constexpr int kRefPad = 4;  // keeps each staged row 16-byte aligned
static_assert(kRefThreads == kThreads, "the tiling's block");

template <GemmType T>
__device__ __forceinline__ float stored_float(const void* a, uint64_t i) {
  return gemm_input_to_float(T, a, i);
}

// V: float (A exact in FP32, gemm_ref_add's chunks) or double (fp64).
template <GemmType T, typename V>
__global__ void __launch_bounds__(kThreads)
    fast_reference(GemmCheckShape s, const void* __restrict__ a, const V* __restrict__ y, double* __restrict__ r,
                   double* __restrict__ line_norm) {
  constexpr bool kWide = sizeof(V) == sizeof(double);
  __shared__ __align__(16) V as[kRefDepth][kRefEdge + kRefPad];
  __shared__ __align__(16) V ys[kRefDepth][kRefEdge + kRefPad];
  const int tid = threadIdx.x;
  const uint32_t line0 = blockIdx.y * kRefEdge, tile0 = blockIdx.x * kRefEdge;
  GemmRefSum sum32[kRefMicro][kRefMicro];
  double sum64[kRefMicro][kRefMicro] = {};
  double sq[kRefLoads] = {};
  for (uint32_t p0 = 0; p0 < s.k; p0 += kRefDepth) {
    const int kk = ref_load_depth(tid);
    const uint32_t p = p0 + kk;
#pragma unroll
    for (int i = 0; i < kRefLoads; ++i) {
      const int row = ref_load_row(tid, i);
      const uint32_t line = line0 + row, tile = tile0 + row;
      V av = 0, yv = 0;
      if (line < s.lines && p < s.k) {
        const uint64_t at = static_cast<uint64_t>(line) * s.k + p;
        if constexpr (kWide) {
          av = static_cast<const double*>(a)[at];
        } else {
          av = stored_float<T>(a, at);
        }
      }
      if (tile < s.tiles && p < s.k) yv = y[static_cast<uint64_t>(tile) * s.k + p];
      as[kk][row] = av;
      ys[kk][row] = yv;
      sq[i] = fma(static_cast<double>(av), static_cast<double>(av), sq[i]);
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kRefDepth; ++q) {
      V av[kRefMicro], yv[kRefMicro];
#pragma unroll
      for (int i = 0; i < kRefMicro; ++i) av[i] = as[q][ref_out_line(tid, i)], yv[i] = ys[q][ref_out_tile(tid, i)];
#pragma unroll
      for (int i = 0; i < kRefMicro; ++i) {
#pragma unroll
        for (int j = 0; j < kRefMicro; ++j) {
          if constexpr (kWide) {
            sum64[i][j] = fma(av[i], yv[j], sum64[i][j]);
          } else {
            gemm_ref_add(sum32[i][j], av[i], yv[j]);
          }
        }
      }
    }
    if constexpr (!kWide) {
      if (ref_folds_after(p0)) {
#pragma unroll
        for (int i = 0; i < kRefMicro; ++i) {
#pragma unroll
          for (int j = 0; j < kRefMicro; ++j) gemm_ref_fold(sum32[i][j]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kRefMicro; ++i) {
    const uint32_t line = line0 + ref_out_line(tid, i);
#pragma unroll
    for (int j = 0; j < kRefMicro; ++j) {
      const uint32_t tile = tile0 + ref_out_tile(tid, j);
      if (line >= s.lines || tile >= s.tiles) continue;
      double v = sum64[i][j];
      if constexpr (!kWide) {
        gemm_ref_fold(sum32[i][j]);
        v = sum32[i][j].total;
      }
      r[static_cast<uint64_t>(line) * s.tiles + tile] = v;
    }
  }
  if (blockIdx.x != 0) return;
    // Every lane of a warp loaded the same rows: their squares sum over the warp.
#pragma unroll
  for (int i = 0; i < kRefLoads; ++i) {
    for (int offset = 16; offset > 0; offset /= 2) sq[i] += __shfl_down_sync(0xffffffffu, sq[i], offset);
    const uint32_t line = line0 + ref_load_row(tid, i);
    if (tid % 32 == 0 && line < s.lines) line_norm[line] = sq[i];  // square_roots makes it the norm
  }
}

// ---- The pass over C, and the batch's captures -----------------------------------------------

template <typename Out>
struct Vector;
template <>
struct Vector<float> {
  using type = float4;
  static constexpr uint32_t kPer = 4;
  __device__ static void unpack(const float4& v, double (&out)[4]) {
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  }
};
template <>
struct Vector<double> {
  using type = double2;
  static constexpr uint32_t kPer = 2;
  __device__ static void unpack(const double2& v, double (&out)[2]) { out[0] = v.x, out[1] = v.y; }
};

// Claims a capture slot for a failed check and copies its elements' bits (the first `stride`).
__device__ __forceinline__ void capture(const GemmCapture& cap, GemmType type, const void* c, GemmCapture* caps,
                                        unsigned long long* values, uint32_t stride, unsigned* count) {
  const unsigned slot = atomicAdd(count, 1u);
  if (slot >= kGemmCaptureSlots) return;
  caps[slot] = cap;
  for (uint32_t e = 0; e < cap.count && e < stride; ++e)
    values[static_cast<uint64_t>(slot) * stride + e] = gemm_output_bits(type, c, cap.first + e);
}

// Adds the block's part to a repeat's summary: C's sum of squares, the failed checks, the largest
// residual / tau (most[0]) and the largest error sure to be caught (most[1]). Every thread of the
// block must call it.
__device__ void add_to_summary(GemmCheckSummary* sum, double (&squares)[1], unsigned long long (&failed)[1],
                               double (&most)[2]) {
  block_reduce<double, 1, false>(squares);
  block_reduce<unsigned long long, 1, false>(failed);
  block_reduce<double, 2, true>(most);
  if (threadIdx.x == 0) {
    if (failed[0] > 0) atomicAdd(&sum->flagged, failed[0]);
    atomicMax(&sum->max_ratio_bits, static_cast<unsigned long long>(__double_as_longlong(most[0])));
    atomicMax(&sum->detectable_bits, static_cast<unsigned long long>(__double_as_longlong(most[1])));
    atomicAdd(&sum->c_square_sum, squares[0]);
  }
}

// One thread per row check (line, tile): the tile's C read in aligned vectors (column order kept),
// against r with tau from the norms; the batch's summary of repeat `rep`.
template <typename Out>
__global__ void __launch_bounds__(kThreads)
    fast_compare(GemmCheckShape s, GemmFastBound b, const Out* __restrict__ c, const double* __restrict__ r,
                 const double* __restrict__ line_norm, const double* __restrict__ tile_norm,
                 const double2* __restrict__ tw, unsigned rep, GemmCheckSummary* summaries, GemmCapture* caps,
                 unsigned long long* values, uint32_t stride, unsigned* count) {
  using V = Vector<Out>;
  constexpr uint32_t kPer = V::kPer;
  const uint64_t checks = static_cast<uint64_t>(s.lines) * s.tiles;
  double squares[1] = {0}, most[2] = {0, 0};
  unsigned long long failed[1] = {0};
  for (uint64_t x = grid_thread(); x < checks; x += grid_stride()) {
    const uint32_t line = static_cast<uint32_t>(x / s.tiles), t = static_cast<uint32_t>(x % s.tiles);
    const uint32_t lo = t * s.tile, hi = min(lo + s.tile, s.width);
    const uint64_t row = static_cast<uint64_t>(line) * s.width;
    const GemmVectorSpan span = gemm_vector_span(row, lo, hi, kPer);
    double cw = 0;
    for (uint32_t j = lo; j < span.head; ++j)
      gemm_compare_add(static_cast<double>(c[row + j]), gemm_float_check_weight(s.key, j), cw, squares[0]);
    for (uint32_t j = span.head; j < span.body; j += kPer) {
      double v[kPer];
      V::unpack(*reinterpret_cast<const typename V::type*>(c + row + j), v);
#pragma unroll
      for (uint32_t e = 0; e < kPer; ++e) gemm_compare_add(v[e], gemm_float_check_weight(s.key, j + e), cw, squares[0]);
    }
    for (uint32_t j = span.body; j < hi; ++j)
      gemm_compare_add(static_cast<double>(c[row + j]), gemm_float_check_weight(s.key, j), cw, squares[0]);
    const double2 w = tw[t];
    const GemmFastCheck ch = gemm_fast_check(b, s.k, cw, r[x], line_norm[line], tile_norm[t], w.x, w.y);
    if (ch.fails) {
      ++failed[0];
      capture(gemm_capture_of(rep, line, t, s.tile, s.width), s.out_type, c, caps, values, stride, count);
    }
    if (ch.residual == ch.residual) {
      if (ch.tau > 0) most[0] = fmax(most[0], ch.residual / ch.tau);
      most[1] = fmax(most[1], ch.detectable);
    }
  }
  add_to_summary(summaries + rep, squares, failed, most);
}

// Random fp8: each element against the exact INT32 reference, its bound from its row's and column's
// norms (gemm_norm_element); a block per row, four elements a thread at a time (n % 4 == 0: fp8 shapes
// are multiples of 16); a failing element is captured alone.
__global__ void __launch_bounds__(kThreads)
    fast_element_compare(GemmAccumulation acc, double rel, uint32_t k, double unscale, GemmType type,
                         const float* __restrict__ c, const int32_t* __restrict__ ref,
                         const double* __restrict__ norm_a, const double* __restrict__ norm_b, uint32_t m, uint32_t n,
                         unsigned rep, GemmCheckSummary* summaries, GemmCapture* caps, unsigned long long* values,
                         unsigned* count) {
  double squares[1] = {0}, most[2] = {0, 0};
  unsigned long long failed[1] = {0};
  for (uint32_t i = blockIdx.x; i < m; i += gridDim.x) {
    const double row = norm_a[i] * unscale;
    const uint64_t base = static_cast<uint64_t>(i) * n;
    for (uint32_t j = threadIdx.x * 4; j < n; j += blockDim.x * 4) {
      const float4 o = *reinterpret_cast<const float4*>(c + base + j);
      const int4 x = *reinterpret_cast<const int4*>(ref + base + j);
      const double obs[4] = {o.x, o.y, o.z, o.w};
      const int32_t exact[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (uint32_t e = 0; e < 4; ++e) {
        const GemmElementCheck ch = gemm_norm_element(acc, rel, k, exact[e] * unscale, row * norm_b[j + e], obs[e]);
        if (ch.fails) {
          ++failed[0];
          capture(GemmCapture{base + j + e, rep, 1}, type, c, caps, values, 1, count);
        }
        if (ch.residual == ch.residual) {
          if (ch.tau > 0) most[0] = fmax(most[0], ch.residual / ch.tau);
          most[1] = fmax(most[1], ch.tau + ch.residual);
        }
        squares[0] = fma(obs[e], obs[e], squares[0]);
      }
    }
  }
  add_to_summary(summaries + rep, squares, failed, most);
}

// norm[row] = the sum of squares of an int8 operand's row (exact), a block per row; square_roots
// then makes it the norm.
__global__ void int8_row_squares(const int8_t* __restrict__ v, uint64_t rows, uint32_t k, double* norm) {
  for (uint64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    unsigned long long sq[1] = {0};
    for (uint32_t p = threadIdx.x; p < k; p += blockDim.x) {
      const int x = v[row * k + p];
      sq[0] += static_cast<unsigned long long>(x * x);
    }
    block_reduce<unsigned long long, 1, false>(sq);
    if (threadIdx.x == 0) norm[row] = static_cast<double>(sq[0]);
  }
}

// Repeats of gemm.repeat: the elements of C that differ from repeat 0's, only where the digests
// differ (read on the device, so that the stream never waits for the host).
__global__ void diff_if_changed(GemmType t, const void* c, const void* first, uint64_t elements, uint32_t n,
                                const Digest128* digests, unsigned rep, DeviceMismatchLog* log) {
  if (digests[rep].lo == digests[0].lo && digests[rep].hi == digests[0].hi) return;
  for (uint64_t e = grid_thread(); e < elements; e += grid_stride()) {
    const uint64_t now = gemm_output_bits(t, c, e), then = gemm_output_bits(t, first, e);
    record_mismatch_if(now != then, log, e, then, now, kNoUnit, static_cast<unsigned>((e % n) % 32));
  }
}

}  // namespace

cudaError_t launch_gemm_fast_y(uint32_t k, uint32_t tiles, const double* y, const float* ya, float* y32,
                               double* tile_norm, cudaStream_t stream) {
  const cudaError_t e = cudaMemsetAsync(tile_norm, 0, tiles * sizeof(double), stream);
  if (e != cudaSuccess) return e;
  const unsigned blocks = (k + kThreads - 1) / kThreads;
  fast_y<<<dim3(blocks, tiles), kThreads, 0, stream>>>(k, tiles, y, ya, y32, tile_norm);
  square_roots<<<(tiles + kThreads - 1) / kThreads, kThreads, 0, stream>>>(tile_norm, tiles);
  return cudaGetLastError();
}

cudaError_t launch_gemm_fast_reference(const GemmCheckShape& s, GemmType store, const void* a, const float* y32,
                                       const double* y, double* r, double* line_norm, cudaStream_t stream) {
  const dim3 grid((s.tiles + kRefEdge - 1) / kRefEdge, (s.lines + kRefEdge - 1) / kRefEdge);
  switch (store) {
    case GemmType::kFp64:
      fast_reference<GemmType::kFp64, double><<<grid, kThreads, 0, stream>>>(s, a, y, r, line_norm);
      break;
    case GemmType::kFp32:
    case GemmType::kTf32:
      fast_reference<GemmType::kFp32, float><<<grid, kThreads, 0, stream>>>(s, a, y32, r, line_norm);
      break;
    case GemmType::kFp16:
      fast_reference<GemmType::kFp16, float><<<grid, kThreads, 0, stream>>>(s, a, y32, r, line_norm);
      break;
    case GemmType::kBf16:
      fast_reference<GemmType::kBf16, float><<<grid, kThreads, 0, stream>>>(s, a, y32, r, line_norm);
      break;
    default: return cudaErrorInvalidValue;  // fp8 has its exact reference; int8 no random inputs
  }
  square_roots<<<(s.lines + kThreads - 1) / kThreads, kThreads, 0, stream>>>(line_norm, s.lines);
  return cudaGetLastError();
}

cudaError_t launch_gemm_fast_compare(const GemmCheckShape& s, const GemmFastBound& b, const void* c, const double* r,
                                     const double* line_norm, const double* tile_norm, const double2* tw, unsigned rep,
                                     GemmCheckSummary* summaries, GemmCapture* caps, unsigned long long* values,
                                     unsigned* count, cudaStream_t stream) {
  if (s.tiles == 0 || s.tile == 0 || s.col_stride != 1 || s.line_stride != s.width) return cudaErrorInvalidValue;
  const LaunchShape shape{65535, kThreads};
  const unsigned blocks = blocks_for(static_cast<uint64_t>(s.lines) * s.tiles, shape);
  if (s.out_type == GemmType::kFp64) {
    fast_compare<<<blocks, kThreads, 0, stream>>>(s, b, static_cast<const double*>(c), r, line_norm, tile_norm, tw, rep,
                                                  summaries, caps, values, s.tile, count);
  } else if (s.out_type != GemmType::kInt8) {
    fast_compare<<<blocks, kThreads, 0, stream>>>(s, b, static_cast<const float*>(c), r, line_norm, tile_norm, tw, rep,
                                                  summaries, caps, values, s.tile, count);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_gemm_fast_element_compare(const GemmAccumulation& acc, GemmType type, uint32_t k, uint32_t n,
                                             uint64_t elements, const float* c, const int32_t* ref,
                                             const double* norm_a, const double* norm_b, unsigned rep,
                                             GemmCheckSummary* summaries, GemmCapture* caps, unsigned long long* values,
                                             unsigned* count, cudaStream_t stream) {
  if (n == 0 || n % 4 != 0 || elements % n != 0) return cudaErrorInvalidValue;
  const uint64_t m = elements / n;
  const unsigned blocks = m < 8192 ? static_cast<unsigned>(m) : 8192u;
  const double unscale = exp2_double(-2 * gemm_reference_shift(type));
  fast_element_compare<<<blocks, kThreads, 0, stream>>>(acc, gemm_relative_bound(acc, k), k, unscale, type, c, ref,
                                                        norm_a, norm_b, static_cast<uint32_t>(m), n, rep, summaries,
                                                        caps, values, count);
  return cudaGetLastError();
}

cudaError_t launch_gemm_reference_norms(const int8_t* v, uint64_t rows, uint32_t k, double* norm, cudaStream_t stream) {
  const unsigned blocks = rows < 65535 ? static_cast<unsigned>(rows) : 65535u;
  int8_row_squares<<<blocks, kThreads, 0, stream>>>(v, rows, k, norm);
  square_roots<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      norm, static_cast<uint32_t>(rows));
  return cudaGetLastError();
}

cudaError_t launch_gemm_diff_if_changed(GemmType out_type, const void* c, const void* first, uint64_t elements,
                                        uint32_t n, const Digest128* digests, unsigned rep, DeviceMismatchLog* log,
                                        cudaStream_t stream) {
  const LaunchShape shape{65535, kThreads};
  diff_if_changed<<<blocks_for(elements, shape), kThreads, 0, stream>>>(out_type, c, first, elements, n, digests, rep,
                                                                        log);
  return cudaGetLastError();
}

}  // namespace sdc
