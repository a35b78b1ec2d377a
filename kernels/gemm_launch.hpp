// Host-callable launchers of the gemm.* kernels: the hand-written SIMT GEMM (gemm.simt.fp32), and
// the generation and verification that keep a GEMM probe's O(n^2) data on the device. Each enqueues
// on `stream` and returns the launch status; the caller synchronises.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/device_mismatch.hpp"
#include "kernels/common/digest.hpp"
#include "kernels/common/gemm_check.hpp"
#include "kernels/common/gemm_fast_check.hpp"

namespace sdc {

// C = A B in FP32 on the FMA units (no tensor cores): A m x k row-major, Bt n x k row-major (B
// column-major), C m x n row-major. 128 x 128 output tiles staged through shared memory in steps
// of 8 along k, 256 threads per block, each accumulating an 8 x 8 register tile
// (kernels/common/simt_tile.hpp); every C element is one __fmaf_rn chain from 0 in k order. Device
// pointers.
cudaError_t launch_gemm_simt_fp32(const float* a, const float* bt, float* c, uint32_t m, uint32_t n, uint32_t k,
                                  cudaStream_t stream);

// The indices of the nonzero bytes of flags[0, count), in any order, into list (the first `cap`);
// *listed counts them all.
cudaError_t launch_gemm_flag_list(const uint8_t* flags, uint64_t count, unsigned long long* list, uint64_t cap,
                                  unsigned long long* listed, cudaStream_t stream);

// Generates one operand, rows x g.k elements (A with A's generator, Bt with B's), into `out` as
// type `store`: with store = g.type, the bits generate_gemm_inputs stores on the host
// (kernels/gemm_generate.cu); another type must hold every value exactly (e5m2's B as E4M3).
cudaError_t launch_gemm_generate(const GemmGenerator& g, GemmType store, uint64_t rows, void* out, cudaStream_t stream);

// The checks' shape and bound: GemmCheckShape and GemmFloatBound (gemm_check.hpp).

// Device scratch each check needs.
size_t gemm_float_check_scratch(const GemmCheckShape& s);
size_t gemm_exact_check_scratch(const GemmCheckShape& s);

// Random families: flags[line * tiles + t] = 1 where |C w - A (B w)| > tau over tile t; the
// summary (zeroed here) counts the failed checks and keeps the largest |r| / tau.
cudaError_t launch_gemm_float_check(const GemmCheckShape& s, const GemmFloatBound& b, const void* c, void* scratch,
                                    uint8_t* flags, GemmCheckSummary* summary, cudaStream_t stream);

// Random families at speed: the row check's reference, computed once per input set, and one pass
// over each C against it.
// Y_t = B w_t (y, tiles x k, FP64), |B||w_t| (ya, FP32) and each tile's sum and least w (tw)
// through `scratch` (gemm_float_check_scratch(s) bytes).
cudaError_t launch_gemm_float_y(const GemmCheckShape& s, void* scratch, double* y, float* ya, double2* tw,
                                cudaStream_t stream);
// One operand (rows x g.k) in FP64 (v) and its magnitudes in FP32 (v_abs), for the reference GEMMs
// r = A Y (FP64) and q = |A| |B||w| (FP32) on units other than the tensor cores under test.
cudaError_t launch_gemm_wide_operand(const GemmGenerator& g, uint64_t rows, double* v, float* v_abs,
                                     cudaStream_t stream);
// The row checks of C (s: the row pass) against r and q (lines x tiles, line-major) with tw's tile
// weights, in one pass over C: flags and summary (zeroed here) as launch_gemm_float_check's.
cudaError_t launch_gemm_float_compare(const GemmCheckShape& s, const GemmFloatBound& b, const void* c, const double* r,
                                      const float* q, const double2* tw, uint8_t* flags, GemmCheckSummary* summary,
                                      cudaStream_t stream);
// Exact families: int64 Freivalds modulo 2^64 with two odd vectors, zero tolerance. Outputs that
// unscale to no integer within `bound` count as invalid; with `invalid` set, the first
// `invalid_cap` of their indices are written there.
cudaError_t launch_gemm_exact_check(const GemmCheckShape& s, double bound, const void* c, void* scratch, uint8_t* flags,
                                    GemmCheckSummary* summary, unsigned long long* invalid, uint64_t invalid_cap,
                                    cudaStream_t stream);

// Random fp8 (gemm_reference_check): one operand (rows x g.k, A's or B's generator) as the
// reference's int8 values and their magnitudes, for the two INT32 GEMMs C_ref = A B and
// S = |A| |B|, exact in any order.
cudaError_t launch_gemm_reference_operand(const GemmGenerator& g, uint64_t rows, int8_t* v, int8_t* v_abs,
                                          cudaStream_t stream);
// Checks each of the `elements` outputs against its C_ref and S (gemm_reference_element); the
// summary (zeroed here) counts the failing elements, whose first `cap` indices go to `candidates`.
cudaError_t launch_gemm_reference_check(const GemmAccumulation& acc, GemmType type, uint32_t k, uint64_t elements,
                                        const float* c, const int32_t* ref, const int32_t* ref_abs,
                                        unsigned long long* candidates, uint64_t cap, GemmCheckSummary* summary,
                                        cudaStream_t stream);

// The check at speed's fast path (kernels/gemm_fast_check.cu; arithmetic in gemm_fast_check.hpp).
// From launch_gemm_float_y's Y and |B||w|: Y rounded to FP32 (y32, tiles x k) and each tile's norm
// of |B||w| (tile_norm).
cudaError_t launch_gemm_fast_y(uint32_t k, uint32_t tiles, const double* y, const float* ya, float* y32,
                               double* tile_norm, cudaStream_t stream);
// The row checks' reference r (lines x tiles, line-major) in one pass over A as stored in `store`
// (gemm_cuda_operands' type; fp64 against y, the others against y32), and each line's norm.
cudaError_t launch_gemm_fast_reference(const GemmCheckShape& s, GemmType store, const void* a, const float* y32,
                                       const double* y, double* r, double* line_norm, cudaStream_t stream);
// Repeat `rep` of a batch: the row checks of C against r, its summary added to summaries[rep] (zeroed
// by the caller once per batch), each failed check captured (caps, its tile's bits in values, s.tile
// per slot; *count counts them all, zeroed once per batch).
cudaError_t launch_gemm_fast_compare(const GemmCheckShape& s, const GemmFastBound& b, const void* c, const double* r,
                                     const double* line_norm, const double* tile_norm, const double2* tw, unsigned rep,
                                     GemmCheckSummary* summaries, GemmCapture* caps, unsigned long long* values,
                                     unsigned* count, cudaStream_t stream);
// Random fp8, repeat `rep` of a batch: each element against the exact reference, its bound from
// norm_a[row] norm_b[column] (launch_gemm_reference_norms), read four at a time; failing elements
// captured alone (one value per slot).
cudaError_t launch_gemm_fast_element_compare(const GemmAccumulation& acc, GemmType type, uint32_t k, uint32_t n,
                                             uint64_t elements, const float* c, const int32_t* ref,
                                             const double* norm_a, const double* norm_b, unsigned rep,
                                             GemmCheckSummary* summaries, GemmCapture* caps,
                                             unsigned long long* values, unsigned* count, cudaStream_t stream);
// norm[r] = the norm of row r of an int8 reference operand (rows x k, launch_gemm_reference_operand's v).
cudaError_t launch_gemm_reference_norms(const int8_t* v, uint64_t rows, uint32_t k, double* norm,
                                        cudaStream_t stream);
// launch_gemm_diff into `log` only where digests[rep] differs from digests[0] (read on the device).
cudaError_t launch_gemm_diff_if_changed(GemmType out_type, const void* c, const void* first, uint64_t elements,
                                        uint32_t n, const Digest128* digests, unsigned rep, DeviceMismatchLog* log,
                                        cudaStream_t stream);

// bits[q] = the bits of output element index[q] (candidates to confirm on the host).
cudaError_t launch_gemm_gather(GemmType out_type, const void* c, const unsigned long long* index, uint64_t count,
                               unsigned long long* bits, cudaStream_t stream);

// Records (in `log`, zeroed here) every element of C that differs from `first`, an earlier
// repeat's output: expected = first, lane = column % 32.
cudaError_t launch_gemm_diff(GemmType out_type, const void* c, const void* first, uint64_t elements, uint32_t n,
                             DeviceMismatchLog* log, cudaStream_t stream);

}  // namespace sdc
