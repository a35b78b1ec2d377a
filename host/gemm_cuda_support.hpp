// What the CUDA engine can run, decided on the host so the CPU tests check it: the operand types
// cuBLASLt multiplies for each gemm.* data type on a compute capability, and the shapes it refuses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "host/gemm.hpp"

namespace sdc {

// The storage types of A and of Bt in the device's GEMM.
struct GemmOperands {
  GemmType a = GemmType::kFp32;
  GemmType b = GemmType::kFp32;
};

// The operand types for `type` on `path` on a device of compute capability `cc` (major * 10 +
// minor), or none where the device has no such GEMM. cuBLASLt's FP8 matmul (sm 8.9 and later)
// takes E4M3 x E4M3, E4M3 x E5M2 and E5M2 x E4M3, never E5M2 x E5M2: e5m2 runs as E5M2 x E4M3 with
// B's values stored as E4M3, which holds every e5m2 input value of every family exactly
// (gemm_e4m3_holds), so the product is the same.
std::optional<GemmOperands> gemm_cuda_operands(GemmType type, GemmPath path, int cc);

// True where the e5m2 input value `v` is exactly an E4M3 value too.
bool gemm_e4m3_holds(float v);

// Why cuBLASLt cannot run `type` at m x n x k, or "" where it can: FP8 needs every dimension a
// multiple of 16 (16-byte aligned rows of A and Bt). The SIMT path takes any shape.
std::string gemm_cuda_unsupported_shape(GemmType type, GemmPath path, uint32_t m, uint32_t n, uint32_t k);

}  // namespace sdc
