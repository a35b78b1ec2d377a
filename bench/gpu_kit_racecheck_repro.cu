// For the lease kit: compute-sanitizer racecheck on what CudaGemmEngine.SmallShapesPassCleanAndLocateAFlip
// runs besides sdcprobe's checks, to tell the tool's failures from ours. The first GPU run (H200,
// CUDA 13.0) saw racecheck stop on that test with "Internal Sanitizer Error: The Sanitizer failed to
// handle a hardware exception", then cudaErrorIllegalAddress, while memcheck and synccheck ran the
// same kernels clean. This program runs only cuBLASLt's GEMMs of that test's types and small shapes
// (TN, FP32 output; fp8 at multiples of 16) and one shared-memory block sum in namespace sdc (the
// sanitizer's filter), each synchronised and named on stdout before the next. When racecheck fails
// here too, the failure is the tool's (or cuBLASLt's), not in sdcprobe's kernels. Exit 0 when every
// GEMM ran and the sum is right, 1 otherwise.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>

namespace sdc {
namespace {

constexpr unsigned kThreads = 256;

// The GEMM checks' block_sum pattern: warp shuffles, then lane 0 of each warp through shared memory.
__global__ void block_sum_kernel(const double* in, unsigned n, double* out) {
  __shared__ double part[kThreads / 32];
  double v = threadIdx.x < n ? in[threadIdx.x] : 0.0;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) sum += part[w];
    *out = sum;
  }
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("gpu_kit_racecheck_repro: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}
bool ok(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  std::printf("gpu_kit_racecheck_repro: %s: cuBLAS status %d\n", what, static_cast<int>(s));
  return false;
}

struct Type {
  const char* name;
  cudaDataType_t in, out;
  cublasComputeType_t compute;
  cudaDataType_t scale;
  unsigned in_bytes, out_bytes;
  uint32_t n, k;
};

// One TN GEMM of `t` (n x n x k, zero operands), synchronised. Returns false naming what failed.
bool gemm(cublasLtHandle_t lt, const Type& t, void* ws, size_t ws_bytes) {
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t h{};
  int found = 0;
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const uint64_t wsb = ws_bytes;
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const int32_t one_i = 1, zero_i = 0;
  const void* alpha = t.scale == CUDA_R_64F   ? static_cast<const void*>(&one64)
                      : t.scale == CUDA_R_32I ? static_cast<const void*>(&one_i)
                                              : static_cast<const void*>(&one32);
  const void* beta = t.scale == CUDA_R_64F   ? static_cast<const void*>(&zero64)
                     : t.scale == CUDA_R_32I ? static_cast<const void*>(&zero_i)
                                             : static_cast<const void*>(&zero32);
  const size_t in_bytes = size_t{t.n} * t.k * t.in_bytes, out_bytes = size_t{t.n} * t.n * t.out_bytes;
  const bool ran =
      ok(cudaMalloc(&a, in_bytes), "cudaMalloc") && ok(cudaMalloc(&b, in_bytes), "cudaMalloc") &&
      ok(cudaMalloc(&c, out_bytes), "cudaMalloc") && ok(cudaMemset(a, 0, in_bytes), "cudaMemset") &&
      ok(cudaMemset(b, 0, in_bytes), "cudaMemset") &&
      ok(cublasLtMatmulDescCreate(&desc, t.compute, t.scale), "descriptor") &&
      ok(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa") &&
      ok(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb") &&
      ok(cublasLtMatrixLayoutCreate(&la, t.in, t.k, t.n, t.k), "layout") &&
      ok(cublasLtMatrixLayoutCreate(&lb, t.in, t.k, t.n, t.k), "layout") &&
      ok(cublasLtMatrixLayoutCreate(&lc, t.out, t.n, t.n, t.n), "layout") &&
      ok(cublasLtMatmulPreferenceCreate(&pref), "preference") &&
      ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb),
         "workspace") &&
      ok(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &h, &found), "heuristic") && found > 0 &&
      ok(cublasLtMatmul(lt, desc, alpha, a, la, b, lb, beta, c, lc, c, lc, &h.algo, ws, ws_bytes, nullptr),
         "cublasLtMatmul") &&
      ok(cudaDeviceSynchronize(), "synchronize after the GEMM");
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (desc) cublasLtMatmulDescDestroy(desc);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return ran;
}

}  // namespace
}  // namespace sdc

int main() {
  using namespace sdc;
  const Type types[] = {
      {"fp64", CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F_PEDANTIC, CUDA_R_64F, 8, 8, 136, 72},
      {"fp32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F, 4, 4, 136, 72},
      {"tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, 4, 4, 136, 72},
      {"fp16", CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F, 2, 4, 136, 72},
      {"bf16", CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F, 2, 4, 136, 72},
      {"e4m3", CUDA_R_8F_E4M3, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F, 1, 4, 144, 80},
      {"int8", CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I, CUDA_R_32I, 1, 4, 136, 72},
  };
  constexpr size_t kWorkspace = size_t{32} << 20;
  void* ws = nullptr;
  cublasLtHandle_t lt = nullptr;
  if (!ok(cudaMalloc(&ws, kWorkspace), "cudaMalloc") || !ok(cublasLtCreate(&lt), "cublasLtCreate")) return 1;
  bool all = true;
  for (const Type& t : types) {
    const bool ran = gemm(lt, t, ws, kWorkspace);
    std::printf("gpu_kit_racecheck_repro: cuBLASLt %s %u x %u x %u: %s\n", t.name, t.n, t.n, t.k,
                ran ? "ran" : "FAILED");
    std::fflush(stdout);
    all = all && ran;
    if (!ran) break;  // a sticky error leaves nothing after it meaningful
  }
  cublasLtDestroy(lt);
  cudaFree(ws);
  if (!all) return 1;
  double host[kThreads], *in = nullptr, *out = nullptr, sum = 0;
  for (unsigned i = 0; i < kThreads; ++i) host[i] = i;
  const bool summed = ok(cudaMalloc(&in, sizeof host), "cudaMalloc") &&
                      ok(cudaMalloc(&out, sizeof sum), "cudaMalloc") &&
                      ok(cudaMemcpy(in, host, sizeof host, cudaMemcpyHostToDevice), "cudaMemcpy") &&
                      (block_sum_kernel<<<1, kThreads>>>(in, kThreads, out), ok(cudaGetLastError(), "launch")) &&
                      ok(cudaMemcpy(&sum, out, sizeof sum, cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(in);
  cudaFree(out);
  std::printf("gpu_kit_racecheck_repro: block sum %s (%g)\n",
              summed && sum == kThreads * (kThreads - 1) / 2.0 ? "right" : "WRONG", sum);
  return summed && sum == kThreads * (kThreads - 1) / 2.0 ? 0 : 1;
}
