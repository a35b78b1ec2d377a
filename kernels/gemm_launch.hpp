// Host-callable launcher of the hand-written SIMT GEMM (gemm.simt.fp32). Enqueues on `stream` and
// returns the launch status; the caller synchronises.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sdc {

// C = A B in FP32 on the FMA units (no tensor cores): A m x k row-major, Bt n x k row-major (B
// column-major), C m x n row-major. 64 x 64 output tiles staged through shared memory in steps of
// 16 along k, 256 threads per block, each accumulating a 4 x 4 register tile with __fmaf_rn in a
// fixed order. Device pointers.
cudaError_t launch_gemm_simt_fp32(const float* a, const float* bt, float* c, uint32_t m, uint32_t n, uint32_t k,
                                  cudaStream_t stream);

}  // namespace sdc
