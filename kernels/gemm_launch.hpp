// Host-callable launcher of the hand-written SIMT GEMM (gemm.simt.fp32). Enqueues on `stream` and
// returns the launch status; the caller synchronises.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sdc {

// C = A B in FP32 on the FMA units (no tensor cores): A m x k row-major, Bt n x k row-major (B
// column-major), C m x n row-major. 128 x 128 output tiles staged through shared memory in steps
// of 8 along k, 256 threads per block, each accumulating an 8 x 8 register tile
// (kernels/common/simt_tile.hpp); every C element is one __fmaf_rn chain from 0 in k order. Device
// pointers.
cudaError_t launch_gemm_simt_fp32(const float* a, const float* bt, float* c, uint32_t m, uint32_t n, uint32_t k,
                                  cudaStream_t stream);

}  // namespace sdc
