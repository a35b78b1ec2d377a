// Verification of the gemm.* outputs on the device, on the FP64 and integer CUDA cores (not the
// tensor cores that computed C). The arithmetic (check vectors, tau, the exact unscaling) is the
// SDC_HD code of gemm_check.hpp that the host's verify_gemm uses; these kernels only sum.
//
// A check is Y = B w per column tile (the inputs regenerated, one thread per depth index p), then
// a block per few lines of C and few tiles: A_line . Y, |A_line| . |B||w| and C_line . w, reduced in
// a fixed order. Random inputs take narrow tiles (gemm_float_tile_of), so a line has many. The
// outputs are read once by the check (and once more for the rms of C); the inputs are never read
// (regenerated in registers). The sums use explicit FMAs (this library compiles with --fmad=false):
// one rounding per step, which the bound's error model (any order, at most one rounding per
// operation) covers.
//
// Random inputs at speed: the row check's reference (r = A Y, q = |A| |B||w|) is computed once per
// input set by cuBLASLt GEMMs on the FP64 and FP32 units (host/cuda/cuda_gemm.cpp), from Y and the
// widened A these kernels produce; each GEMM's C is then checked by float_compare, one pass over C.
// The full check above remains the column pass that locates a failed row check.
#include <cuda_runtime.h>

#include "kernels/device_util.cuh"
#include "kernels/gemm_launch.hpp"

namespace sdc {
namespace {

constexpr unsigned kThreads = 256;
constexpr uint32_t kChunk = 256;                    // columns j per partial sum of Y
constexpr uint32_t kMaxTiles = kGemmExactMaxTiles;  // exact checks
constexpr uint32_t kVectors = kGemmExactVectors;
constexpr unsigned kMaxLineBlocks = 65535;

uint32_t chunks_per_tile(const GemmCheckShape& s) { return (s.tile + kChunk - 1) / kChunk; }

// Columns [lo, hi) of chunk c (over all tiles) of a line of `width`.
__device__ void chunk_range(const GemmCheckShape& s, uint32_t c, uint32_t cpt, uint32_t& lo, uint32_t& hi) {
  const uint32_t t = c / cpt;
  lo = t * s.tile + (c % cpt) * kChunk;
  hi = min(min(lo + kChunk, (t + 1) * s.tile), s.width);
  if (hi < lo) hi = lo;
}

// Sums N values over the block; thread 0 holds the totals. Every thread of the block must call it.
template <typename T, int N>
__device__ void block_sum(T (&v)[N]) {
  __shared__ T part[kThreads / 32][N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    for (int offset = 16; offset > 0; offset /= 2) v[i] += __shfl_down_sync(0xffffffffu, v[i], offset);
  }
  const unsigned warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) part[warp][i] = v[i];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      T sum = 0;
      for (unsigned w = 0; w < blockDim.x / 32; ++w) sum += part[w][i];
      v[i] = sum;
    }
  }
  __syncthreads();
}

// ---- Random families: FP64 Freivalds / ABFT ---------------------------------------------------

// partial[c * k + p] = (sum B_jp w_j, sum |B_jp| w_j) over the columns j of chunk c; thread p = 0
// also writes the chunk's sum and least of w to wpart[c].
__global__ void float_y_partial(GemmCheckShape s, uint32_t cpt, double2* partial, double2* wpart) {
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= s.k) return;
  uint32_t lo, hi;
  chunk_range(s, blockIdx.y, cpt, lo, hi);
  double y = 0, ya = 0;
  for (uint32_t j = lo; j < hi; ++j) {
    const double b = gemm_generated_double(s.other, static_cast<uint64_t>(j) * s.k + p);
    const double w = gemm_float_check_weight(s.key, j);
    y = fma(b, w, y);
    ya = fma(fabs(b), w, ya);
  }
  partial[static_cast<uint64_t>(blockIdx.y) * s.k + p] = make_double2(y, ya);
  if (p == 0) {
    const GemmTileWeights tw = gemm_tile_weights(s.key, lo, hi);
    wpart[blockIdx.y] = make_double2(tw.sum, tw.min);
  }
}

// Y_t and |B||w|_t (rounded to FP32, as on the host) from the chunks, in a fixed order; thread p = 0
// writes tile t's sum and least of w to tw[t].
__global__ void float_y_reduce(GemmCheckShape s, uint32_t cpt, const double2* partial, const double2* wpart, double* y,
                               float* ya, double2* tw) {
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= s.k) return;
  const uint32_t t = blockIdx.y;
  double sy = 0, sa = 0;
  for (uint32_t c = 0; c < cpt; ++c) {
    const double2 v = partial[(static_cast<uint64_t>(t) * cpt + c) * s.k + p];
    sy += v.x;
    sa += v.y;
  }
  y[static_cast<uint64_t>(t) * s.k + p] = sy;
  ya[static_cast<uint64_t>(t) * s.k + p] = static_cast<float>(sa);
  if (p == 0) {
    double sum = 0, least = 2;
    for (uint32_t c = 0; c < cpt; ++c) {
      const double2 v = wpart[t * cpt + c];
      sum += v.x;
      least = fmin(least, v.y);
    }
    tw[t] = make_double2(sum, least);
  }
}

// A block checks kLines lines over kGroupTiles consecutive tiles (blockIdx.y picks the group), and
// reads Y and |B||w| of those tiles (L2-resident) once for all its lines. Four by four: the
// per-thread sums must leave room for kLineBlocksPerSm blocks on an SM, so that the C . w phase
// keeps enough loads in flight to reach HBM's rate (scripts/check_sass.sh holds the register count
// to it). Narrow tiles make many groups; each regenerates its lines of A.
constexpr uint32_t kLines = 4;
constexpr uint32_t kGroupTiles = 4;
constexpr unsigned kLineBlocksPerSm = 2;

template <typename Out>
__global__ void __launch_bounds__(kThreads, kLineBlocksPerSm)
    float_lines(GemmCheckShape s, GemmFloatBound b, const Out* __restrict__ c, const double* __restrict__ y,
                const float* __restrict__ ya, const double2* __restrict__ tw, uint8_t* flags,
                GemmCheckSummary* summary) {
  const uint32_t t0 = blockIdx.y * kGroupTiles;
  const uint32_t group = min(kGroupTiles, s.tiles - t0);
  for (uint32_t first = blockIdx.x * kLines; first < s.lines; first += gridDim.x * kLines) {
    const uint32_t count = min(kLines, s.lines - first);
    // Per line r and tile t of the group: A_r . Y_t, then C_r . w over tile t (doubles);
    // |A_r| . |B||w|_t in FP32, as on the host.
    double sums[2 * kLines * kGroupTiles] = {};
    float q[kLines * kGroupTiles] = {};
    for (uint32_t p = threadIdx.x; p < s.k; p += blockDim.x) {
      double yt[kGroupTiles];
      float yat[kGroupTiles];
#pragma unroll
      for (uint32_t t = 0; t < kGroupTiles; ++t) {
        yt[t] = t < group ? y[static_cast<uint64_t>(t0 + t) * s.k + p] : 0.0;
        yat[t] = t < group ? ya[static_cast<uint64_t>(t0 + t) * s.k + p] : 0.0f;
      }
#pragma unroll
      for (uint32_t r = 0; r < kLines; ++r) {
        const double a = r < count ? gemm_generated_double(s.line, static_cast<uint64_t>(first + r) * s.k + p) : 0.0;
        const float af = fabsf(static_cast<float>(a));
#pragma unroll
        for (uint32_t t = 0; t < kGroupTiles; ++t) {
          sums[r * kGroupTiles + t] = fma(a, yt[t], sums[r * kGroupTiles + t]);
          q[r * kGroupTiles + t] = fmaf(af, yat[t], q[r * kGroupTiles + t]);
        }
      }
    }
#pragma unroll
    for (uint32_t t = 0; t < kGroupTiles; ++t) {
      if (t >= group) break;
      const uint32_t hi = min((t0 + t + 1) * s.tile, s.width);
      for (uint32_t j = (t0 + t) * s.tile + threadIdx.x; j < hi; j += blockDim.x) {
        const double w = gemm_float_check_weight(s.key, j);
#pragma unroll
        for (uint32_t r = 0; r < kLines; ++r) {
          if (r < count) {
            const double v =
                static_cast<double>(c[static_cast<uint64_t>(first + r) * s.line_stride + j * s.col_stride]);
            sums[(kLines + r) * kGroupTiles + t] = fma(v, w, sums[(kLines + r) * kGroupTiles + t]);
          }
        }
      }
    }
    block_sum(sums);
    block_sum(q);
    if (threadIdx.x == 0) {
      // One atomic per block for each total. Unrolled with constant indices, so the sums stay in
      // registers.
      unsigned long long failed = 0;
      double ratio = 0, detectable = 0;
#pragma unroll
      for (uint32_t r = 0; r < kLines; ++r) {
#pragma unroll
        for (uint32_t t = 0; t < kGroupTiles; ++t) {
          if (r >= count || t >= group) continue;
          const double2 weights = tw[t0 + t];
          const double tau =
              gemm_tile_tau(b.acc, b.rel, b.slack, s.k, q[r * kGroupTiles + t] * b.sum_factor, weights.x);
          const double res = fabs(sums[(kLines + r) * kGroupTiles + t] - sums[r * kGroupTiles + t]);
          const bool fails = gemm_check_fails(res, tau);
          flags[static_cast<uint64_t>(first + r) * s.tiles + t0 + t] = fails ? 1 : 0;
          failed += fails ? 1 : 0;
          if (res == res && tau > 0) ratio = fmax(ratio, res / tau);
          if (res == res) detectable = fmax(detectable, gemm_detectable_error(tau, res, weights.y));
        }
      }
      if (failed > 0) atomicAdd(&summary->flagged, failed);
      // A nonnegative double orders as its bits do.
      atomicMax(&summary->max_ratio_bits, static_cast<unsigned long long>(__double_as_longlong(ratio)));
      atomicMax(&summary->detectable_bits, static_cast<unsigned long long>(__double_as_longlong(detectable)));
    }
  }
}

// summary->c_square_sum += sum of C^2 (a statistic: atomics in any order), apart from float_lines,
// whose registers it would spill.
template <typename Out>
__global__ void square_sum(const Out* __restrict__ c, uint64_t elements, GemmCheckSummary* summary) {
  double v[1] = {0};
  const uint64_t stride = grid_stride();
  for (uint64_t e = grid_thread(); e < elements; e += stride) {
    const double x = static_cast<double>(c[e]);
    v[0] = fma(x, x, v[0]);
  }
  block_sum(v);
  if (threadIdx.x == 0) atomicAdd(&summary->c_square_sum, v[0]);
}

// ---- Exact families: int64 Freivalds modulo 2^64 ----------------------------------------------

// y[(t * kVectors + v) * k + p] += sum over chunk c of B_jp w_vj (mod 2^64: any order is exact).
__global__ void exact_y(GemmCheckShape s, uint32_t cpt, unsigned long long* y) {
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= s.k) return;
  uint32_t lo, hi;
  chunk_range(s, blockIdx.y, cpt, lo, hi);
  unsigned long long acc[kVectors] = {};
  for (uint32_t j = lo; j < hi; ++j) {
    const auto b = static_cast<unsigned long long>(
        static_cast<long long>(gemm_generated_int(s.other, static_cast<uint64_t>(j) * s.k + p)));
    for (uint32_t v = 0; v < kVectors; ++v) acc[v] += b * gemm_exact_check_weight(s.key, j, v);
  }
  const uint32_t t = blockIdx.y / cpt;
  for (uint32_t v = 0; v < kVectors; ++v) atomicAdd(&y[(static_cast<uint64_t>(t) * kVectors + v) * s.k + p], acc[v]);
}

// Called by every active lane, invalid or not: the lanes with an invalid output share one atomic
// (as record_mismatch_if does), so an output that is invalid everywhere costs one per warp. The
// count stays exact; indices past `cap` are not written.
__device__ __forceinline__ void record_invalid_if(bool bad, GemmCheckSummary* summary, unsigned long long* invalid,
                                                  uint64_t cap, uint64_t idx) {
  const unsigned hits = __ballot_sync(__activemask(), bad);
  if (!bad) return;
  const unsigned me = lane_id();
  const unsigned leader = warp_leader(hits);
  unsigned long long base = 0;
  if (me == leader) base = atomicAdd(&summary->invalid, static_cast<unsigned long long>(popcount32(hits)));
  base = __shfl_sync(hits, base, leader);
  const unsigned long long slot = warp_slot(base, hits, me);
  if (slot < cap) invalid[slot] = idx;
}

template <typename Out>
__global__ void __launch_bounds__(kThreads, kLineBlocksPerSm)
    exact_lines(GemmCheckShape s, double bound, const Out* __restrict__ c, const unsigned long long* __restrict__ y,
                uint8_t* flags, GemmCheckSummary* summary, unsigned long long* invalid, uint64_t invalid_cap) {
  constexpr uint32_t kSums = kMaxTiles * kVectors;
  for (uint32_t line = blockIdx.x; line < s.lines; line += gridDim.x) {
    unsigned long long sums[2 * kSums] = {};  // A . Y_tv, then C . w_v over tile t
    const uint64_t base = static_cast<uint64_t>(line) * s.k;
    for (uint32_t p = threadIdx.x; p < s.k; p += blockDim.x) {
      const auto a = static_cast<unsigned long long>(static_cast<long long>(gemm_generated_int(s.line, base + p)));
#pragma unroll
      for (uint32_t tv = 0; tv < kSums; ++tv) {
        if (tv >= s.tiles * kVectors) break;
        sums[tv] += a * y[static_cast<uint64_t>(tv) * s.k + p];
      }
    }
    const uint64_t row = static_cast<uint64_t>(line) * s.line_stride;
    const int line_exp = gemm_generated_exponent(s.line, line);
#pragma unroll
    for (uint32_t t = 0; t < kMaxTiles; ++t) {
      if (t >= s.tiles) break;
      const uint32_t hi = min((t + 1) * s.tile, s.width);
      for (uint32_t j = t * s.tile + threadIdx.x; j < hi; j += blockDim.x) {
        const uint64_t idx = row + j * s.col_stride;
        const double unscale = exp2_double(-(line_exp + gemm_generated_exponent(s.other, j)));
        int64_t ci = gemm_unscale_output(static_cast<double>(c[idx]), unscale, bound);
        if (invalid != nullptr) record_invalid_if(ci == kGemmInvalid, summary, invalid, invalid_cap, idx);
        if (ci == kGemmInvalid) ci = 0;
#pragma unroll
        for (uint32_t v = 0; v < kVectors; ++v) {
          sums[kSums + t * kVectors + v] += static_cast<unsigned long long>(ci) * gemm_exact_check_weight(s.key, j, v);
        }
      }
    }
    block_sum(sums);
    if (threadIdx.x == 0) {
      unsigned long long failed = 0;
#pragma unroll
      for (uint32_t t = 0; t < kMaxTiles; ++t) {
        if (t >= s.tiles) continue;
        bool fails = false;
#pragma unroll
        for (uint32_t v = 0; v < kVectors; ++v) fails |= sums[t * kVectors + v] != sums[kSums + t * kVectors + v];
        flags[static_cast<uint64_t>(line) * s.tiles + t] = fails ? 1 : 0;
        failed += fails ? 1 : 0;
      }
      if (failed > 0) atomicAdd(&summary->flagged, failed);
    }
  }
}

// ---- Candidates and repeats -------------------------------------------------------------------

__global__ void gather_kernel(GemmType t, const void* c, const unsigned long long* index, uint64_t count,
                              unsigned long long* bits) {
  const uint64_t stride = grid_stride();
  for (uint64_t q = grid_thread(); q < count; q += stride) bits[q] = gemm_output_bits(t, c, index[q]);
}

__global__ void diff_kernel(GemmType t, const void* c, const void* first, uint64_t elements, uint32_t n,
                            DeviceMismatchLog* log) {
  const uint64_t stride = grid_stride();
  for (uint64_t e = grid_thread(); e < elements; e += stride) {
    const uint64_t now = gemm_output_bits(t, c, e), then = gemm_output_bits(t, first, e);
    record_mismatch_if(now != then, log, e, then, now, kNoUnit, static_cast<unsigned>((e % n) % 32));
  }
}

// ---- Random fp8: per element against the exact integer reference ------------------------------

// v[i] and v_abs[i]: element i of the operand as the reference's int8 (gemm_reference_int8) and its
// magnitude.
__global__ void reference_operand(GemmGenerator g, uint64_t elements, int shift, int8_t* v, int8_t* v_abs) {
  const uint64_t stride = grid_stride();
  for (uint64_t i = grid_thread(); i < elements; i += stride) {
    const int8_t q = gemm_reference_int8(gemm_generated_float(g, i), shift);
    v[i] = q;
    v_abs[i] = q < 0 ? static_cast<int8_t>(-q) : q;
  }
}

// Each element of C against ref and ref_abs (the integer GEMMs, times `unscale`): the failing ones'
// indices (the first `cap`) into `candidates`, counted in summary->flagged.
__global__ void reference_lines(GemmAccumulation acc, double rel, uint32_t k, double unscale,
                                const float* __restrict__ c, const int32_t* __restrict__ ref,
                                const int32_t* __restrict__ ref_abs, uint64_t elements, unsigned long long* candidates,
                                uint64_t cap, GemmCheckSummary* summary) {
  double ratio = 0, detectable = 0, squares[1] = {0};
  const uint64_t stride = grid_stride();
  for (uint64_t e = grid_thread(); e < elements; e += stride) {
    const double obs = c[e];
    const GemmElementCheck ch = gemm_reference_element(acc, rel, k, ref[e] * unscale, ref_abs[e] * unscale, obs);
    if (ch.fails) {
      const unsigned long long slot = atomicAdd(&summary->flagged, 1ull);
      if (slot < cap) candidates[slot] = e;
    }
    if (ch.residual == ch.residual) {
      if (ch.tau > 0) ratio = fmax(ratio, ch.residual / ch.tau);
      detectable = fmax(detectable, ch.tau + ch.residual);
    }
    squares[0] = fma(obs, obs, squares[0]);
  }
  double most[2] = {ratio, detectable};
  block_sum(squares);
  // Block maxima by warp shuffles and shared memory, as block_sum does for sums.
  __shared__ double part[kThreads / 32][2];
  for (int i = 0; i < 2; ++i) {
    for (int offset = 16; offset > 0; offset /= 2)
      most[i] = fmax(most[i], __shfl_down_sync(0xffffffffu, most[i], offset));
  }
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32][0] = most[0], part[threadIdx.x / 32][1] = most[1];
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < blockDim.x / 32; ++w)
      most[0] = fmax(most[0], part[w][0]), most[1] = fmax(most[1], part[w][1]);
    atomicMax(&summary->max_ratio_bits, static_cast<unsigned long long>(__double_as_longlong(most[0])));
    atomicMax(&summary->detectable_bits, static_cast<unsigned long long>(__double_as_longlong(most[1])));
    atomicAdd(&summary->c_square_sum, squares[0]);
  }
}

// ---- Random families at speed: one pass over C against the kept reference ---------------------

// v[i] = element i of the operand in FP64 and v_abs[i] = its magnitude rounded to FP32: the
// reference GEMMs' operands (R = A Y in FP64, the bound's sum |A| |B||w| in FP32).
__global__ void wide_operand(GemmGenerator g, uint64_t elements, double* v, float* v_abs) {
  const uint64_t stride = grid_stride();
  for (uint64_t i = grid_thread(); i < elements; i += stride) {
    const double x = gemm_generated_double(g, i);
    v[i] = x;
    v_abs[i] = fabsf(static_cast<float>(x));
  }
}

// Block maxima of N nonnegative values; thread 0 holds them. Every thread of the block must call it.
template <int N>
__device__ void block_max(double (&v)[N]) {
  __shared__ double part[kThreads / 32][N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    for (int offset = 16; offset > 0; offset /= 2) v[i] = fmax(v[i], __shfl_down_sync(0xffffffffu, v[i], offset));
  }
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) part[threadIdx.x / 32][i] = v[i];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < blockDim.x / 32; ++w) {
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = fmax(v[i], part[w][i]);
    }
  }
  __syncthreads();
}

// One thread per row check (line, tile): C_line . w over the tile against r = A_line . Y_t, with tau
// from q = |A_line| . |B||w|_t (FP32, scaled by the bound's sum factor). Consecutive threads take
// consecutive tiles of a row, so a warp reads a contiguous stretch of C.
template <typename Out>
__global__ void __launch_bounds__(kThreads)
    float_compare(GemmCheckShape s, GemmFloatBound b, const Out* __restrict__ c, const double* __restrict__ r,
                  const float* __restrict__ q, const double2* __restrict__ tw, uint8_t* flags,
                  GemmCheckSummary* summary) {
  const uint64_t checks = static_cast<uint64_t>(s.lines) * s.tiles;
  const uint64_t stride = grid_stride();
  double squares[1] = {0}, most[2] = {0, 0};  // sum of C^2; largest |r| / tau and detectable error
  unsigned long long failed[1] = {0};
  for (uint64_t x = grid_thread(); x < checks; x += stride) {
    const uint32_t line = static_cast<uint32_t>(x / s.tiles), t = static_cast<uint32_t>(x % s.tiles);
    const uint32_t hi = min((t + 1) * s.tile, s.width);
    const Out* row = c + static_cast<uint64_t>(line) * s.line_stride;
    double cw = 0;
    for (uint32_t j = t * s.tile; j < hi; ++j) {
      const double v = static_cast<double>(row[j]);
      cw = fma(v, gemm_float_check_weight(s.key, j), cw);
      squares[0] = fma(v, v, squares[0]);
    }
    const double2 weights = tw[t];
    const double tau = gemm_tile_tau(b.acc, b.rel, b.slack, s.k, static_cast<double>(q[x]) * b.sum_factor, weights.x);
    const double res = fabs(cw - r[x]);
    const bool fails = gemm_check_fails(res, tau);
    flags[x] = fails ? 1 : 0;
    failed[0] += fails ? 1 : 0;
    if (res == res && tau > 0) most[0] = fmax(most[0], res / tau);
    if (res == res) most[1] = fmax(most[1], gemm_detectable_error(tau, res, weights.y));
  }
  block_sum(squares);
  block_sum(failed);
  block_max(most);
  if (threadIdx.x == 0) {
    if (failed[0] > 0) atomicAdd(&summary->flagged, failed[0]);
    atomicMax(&summary->max_ratio_bits, static_cast<unsigned long long>(__double_as_longlong(most[0])));
    atomicMax(&summary->detectable_bits, static_cast<unsigned long long>(__double_as_longlong(most[1])));
    atomicAdd(&summary->c_square_sum, squares[0]);
  }
}

unsigned line_blocks(uint32_t lines) { return lines < kMaxLineBlocks ? (lines == 0 ? 1 : lines) : kMaxLineBlocks; }
unsigned float_line_blocks(uint32_t lines) { return line_blocks((lines + kLines - 1) / kLines); }

}  // namespace

// Scratch of the FP64 check: partial (tiles x chunks x k double2), wpart (tiles x chunks double2),
// tw (tiles double2), y (tiles x k doubles), ya (tiles x k floats), in that order.
size_t gemm_float_check_scratch(const GemmCheckShape& s) {
  const size_t chunks = static_cast<size_t>(s.tiles) * chunks_per_tile(s);
  return (chunks * s.k + chunks + s.tiles) * sizeof(double2) +
         static_cast<size_t>(s.tiles) * s.k * (sizeof(double) + sizeof(float));
}

size_t gemm_exact_check_scratch(const GemmCheckShape& s) {
  return static_cast<size_t>(s.tiles) * kVectors * s.k * sizeof(unsigned long long);
}

namespace {

// Y_t and |B||w|_t of every tile into y and ya, and the tiles' weights into tw, through `partial`
// and `wpart` (gemm_float_check_scratch's layout).
void launch_float_y(const GemmCheckShape& s, double2* partial, double2* wpart, double* y, float* ya, double2* tw,
                    cudaStream_t stream) {
  const uint32_t cpt = chunks_per_tile(s);
  const unsigned pblocks = (s.k + kThreads - 1) / kThreads;
  float_y_partial<<<dim3(pblocks, s.tiles * cpt), kThreads, 0, stream>>>(s, cpt, partial, wpart);
  float_y_reduce<<<dim3(pblocks, s.tiles), kThreads, 0, stream>>>(s, cpt, partial, wpart, y, ya, tw);
}

}  // namespace

cudaError_t launch_gemm_float_check(const GemmCheckShape& s, const GemmFloatBound& b, const void* c, void* scratch,
                                    uint8_t* flags, GemmCheckSummary* summary, cudaStream_t stream) {
  if (s.tiles == 0 || s.tile == 0) return cudaErrorInvalidValue;
  const uint32_t cpt = chunks_per_tile(s);
  const size_t chunks = static_cast<size_t>(s.tiles) * cpt;
  auto* partial = static_cast<double2*>(scratch);
  auto* wpart = partial + chunks * s.k;
  auto* tw = wpart + chunks;
  auto* y = reinterpret_cast<double*>(tw + s.tiles);
  auto* ya = reinterpret_cast<float*>(y + static_cast<size_t>(s.tiles) * s.k);
  cudaError_t e = cudaMemsetAsync(summary, 0, sizeof(GemmCheckSummary), stream);
  if (e != cudaSuccess) return e;
  launch_float_y(s, partial, wpart, y, ya, tw, stream);
  const dim3 blocks(float_line_blocks(s.lines), (s.tiles + kGroupTiles - 1) / kGroupTiles);
  const uint64_t elements = static_cast<uint64_t>(s.lines) * s.width;
  const LaunchShape shape{4096, kThreads};
  const unsigned sum_blocks = blocks_for(elements, shape);
  switch (s.out_type) {
    case GemmType::kFp64:
      float_lines<<<blocks, kThreads, 0, stream>>>(s, b, static_cast<const double*>(c), y, ya, tw, flags, summary);
      square_sum<<<sum_blocks, kThreads, 0, stream>>>(static_cast<const double*>(c), elements, summary);
      break;
    case GemmType::kInt8:
      float_lines<<<blocks, kThreads, 0, stream>>>(s, b, static_cast<const int32_t*>(c), y, ya, tw, flags, summary);
      square_sum<<<sum_blocks, kThreads, 0, stream>>>(static_cast<const int32_t*>(c), elements, summary);
      break;
    default:
      float_lines<<<blocks, kThreads, 0, stream>>>(s, b, static_cast<const float*>(c), y, ya, tw, flags, summary);
      square_sum<<<sum_blocks, kThreads, 0, stream>>>(static_cast<const float*>(c), elements, summary);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_gemm_float_y(const GemmCheckShape& s, void* scratch, double* y, float* ya, double2* tw,
                                cudaStream_t stream) {
  if (s.tiles == 0 || s.tile == 0) return cudaErrorInvalidValue;
  auto* partial = static_cast<double2*>(scratch);
  launch_float_y(s, partial, partial + static_cast<size_t>(s.tiles) * chunks_per_tile(s) * s.k, y, ya, tw, stream);
  return cudaGetLastError();
}

cudaError_t launch_gemm_wide_operand(const GemmGenerator& g, uint64_t rows, double* v, float* v_abs,
                                     cudaStream_t stream) {
  const LaunchShape shape{65535, kThreads};
  const uint64_t elements = rows * g.k;
  wide_operand<<<blocks_for(elements, shape), shape.threads, 0, stream>>>(g, elements, v, v_abs);
  return cudaGetLastError();
}

cudaError_t launch_gemm_float_compare(const GemmCheckShape& s, const GemmFloatBound& b, const void* c, const double* r,
                                      const float* q, const double2* tw, uint8_t* flags, GemmCheckSummary* summary,
                                      cudaStream_t stream) {
  if (s.tiles == 0 || s.tile == 0 || s.col_stride != 1) return cudaErrorInvalidValue;
  const cudaError_t e = cudaMemsetAsync(summary, 0, sizeof(GemmCheckSummary), stream);
  if (e != cudaSuccess) return e;
  const LaunchShape shape{65535, kThreads};
  const unsigned blocks = blocks_for(static_cast<uint64_t>(s.lines) * s.tiles, shape);
  switch (s.out_type) {
    case GemmType::kFp64:
      float_compare<<<blocks, kThreads, 0, stream>>>(s, b, static_cast<const double*>(c), r, q, tw, flags, summary);
      break;
    case GemmType::kInt8:
      float_compare<<<blocks, kThreads, 0, stream>>>(s, b, static_cast<const int32_t*>(c), r, q, tw, flags, summary);
      break;
    default:
      float_compare<<<blocks, kThreads, 0, stream>>>(s, b, static_cast<const float*>(c), r, q, tw, flags, summary);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_gemm_exact_check(const GemmCheckShape& s, double bound, const void* c, void* scratch, uint8_t* flags,
                                    GemmCheckSummary* summary, unsigned long long* invalid, uint64_t invalid_cap,
                                    cudaStream_t stream) {
  if (s.tiles == 0 || s.tiles > kMaxTiles) return cudaErrorInvalidValue;
  const uint32_t cpt = chunks_per_tile(s);
  auto* y = static_cast<unsigned long long*>(scratch);
  cudaError_t e = cudaMemsetAsync(summary, 0, sizeof(GemmCheckSummary), stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(y, 0, gemm_exact_check_scratch(s), stream);
  if (e != cudaSuccess) return e;
  const unsigned pblocks = (s.k + kThreads - 1) / kThreads;
  exact_y<<<dim3(pblocks, s.tiles * cpt), kThreads, 0, stream>>>(s, cpt, y);
  const unsigned blocks = line_blocks(s.lines);
  switch (s.out_type) {
    case GemmType::kFp64:
      exact_lines<<<blocks, kThreads, 0, stream>>>(s, bound, static_cast<const double*>(c), y, flags, summary, invalid,
                                                   invalid_cap);
      break;
    case GemmType::kInt8:
      exact_lines<<<blocks, kThreads, 0, stream>>>(s, bound, static_cast<const int32_t*>(c), y, flags, summary, invalid,
                                                   invalid_cap);
      break;
    default:
      exact_lines<<<blocks, kThreads, 0, stream>>>(s, bound, static_cast<const float*>(c), y, flags, summary, invalid,
                                                   invalid_cap);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_gemm_reference_operand(const GemmGenerator& g, uint64_t rows, int8_t* v, int8_t* v_abs,
                                          cudaStream_t stream) {
  const LaunchShape shape{65535, kThreads};
  const uint64_t elements = rows * g.k;
  reference_operand<<<blocks_for(elements, shape), shape.threads, 0, stream>>>(g, elements,
                                                                               gemm_reference_shift(g.type), v, v_abs);
  return cudaGetLastError();
}

cudaError_t launch_gemm_reference_check(const GemmAccumulation& acc, GemmType type, uint32_t k, uint64_t elements,
                                        const float* c, const int32_t* ref, const int32_t* ref_abs,
                                        unsigned long long* candidates, uint64_t cap, GemmCheckSummary* summary,
                                        cudaStream_t stream) {
  const cudaError_t e = cudaMemsetAsync(summary, 0, sizeof(GemmCheckSummary), stream);
  if (e != cudaSuccess) return e;
  const LaunchShape shape{4096, kThreads};
  const double unscale = exp2_double(-2 * gemm_reference_shift(type));
  reference_lines<<<blocks_for(elements, shape), shape.threads, 0, stream>>>(
      acc, gemm_relative_bound(acc, k), k, unscale, c, ref, ref_abs, elements, candidates, cap, summary);
  return cudaGetLastError();
}

cudaError_t launch_gemm_gather(GemmType out_type, const void* c, const unsigned long long* index, uint64_t count,
                               unsigned long long* bits, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const LaunchShape shape{4096, kThreads};
  gather_kernel<<<blocks_for(count, shape), shape.threads, 0, stream>>>(out_type, c, index, count, bits);
  return cudaGetLastError();
}

cudaError_t launch_gemm_diff(GemmType out_type, const void* c, const void* first, uint64_t elements, uint32_t n,
                             DeviceMismatchLog* log, cudaStream_t stream) {
  const cudaError_t e = cudaMemsetAsync(log, 0, sizeof(DeviceMismatchLog), stream);
  if (e != cudaSuccess) return e;
  const LaunchShape shape{65535, kThreads};
  diff_kernel<<<blocks_for(elements, shape), shape.threads, 0, stream>>>(out_type, c, first, elements, n, log);
  return cudaGetLastError();
}

}  // namespace sdc
