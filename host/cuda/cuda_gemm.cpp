#include "host/cuda/cuda_gemm.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "kernels/gemm_launch.hpp"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

struct LtTypes {
  cudaDataType_t out;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

LtTypes lt_types(GemmType t) {
  switch (t) {
    case GemmType::kFp64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F_PEDANTIC, CUDA_R_64F};
    case GemmType::kFp32: return {CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F};
    case GemmType::kTf32: return {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F};
    case GemmType::kInt8: return {CUDA_R_32I, CUBLAS_COMPUTE_32I, CUDA_R_32I};
    default: return {CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};  // fp16, bf16, fp8
  }
}

// An operand's storage type (gemm_cuda_operands) as cuBLASLt's.
cudaDataType_t lt_input(GemmType t) {
  switch (t) {
    case GemmType::kFp64: return CUDA_R_64F;
    case GemmType::kFp16: return CUDA_R_16F;
    case GemmType::kBf16: return CUDA_R_16BF;
    case GemmType::kE4m3: return CUDA_R_8F_E4M3;
    case GemmType::kE5m2: return CUDA_R_8F_E5M2;
    case GemmType::kInt8: return CUDA_R_8I;
    default: return CUDA_R_32F;  // fp32, tf32
  }
}

// Owners of the per-call cuBLASLt descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  MatmulDesc(cublasComputeType_t compute, cudaDataType_t scale) {
    SDC_CUBLAS_TRY(cublasLtMatmulDescCreate(&d, compute, scale));
  }
  ~MatmulDesc() { SDC_CUBLAS_LOG(cublasLtMatmulDescDestroy(d)); }
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
};
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld) {
    SDC_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld));
  }
  ~Layout() { SDC_CUBLAS_LOG(cublasLtMatrixLayoutDestroy(l)); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  Preference() { SDC_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&p)); }
  ~Preference() { SDC_CUBLAS_LOG(cublasLtMatmulPreferenceDestroy(p)); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
};

// The problem in cuBLASLt's column-major terms: C^T (n x m, ld n) = op(Bt-as-col-major k x n)^T
// times (A-as-col-major k x m), i.e. "TN", the layout fp8 and int8 require.
struct Problem {
  LtTypes types;
  MatmulDesc desc;
  Layout a, b, c;
  Problem(const GemmSpec& s, const GemmOperands& ops)
      : types(lt_types(s.type)),
        desc(types.compute, types.scale),
        a(lt_input(ops.b), s.k, s.n, s.k),
        b(lt_input(ops.a), s.k, s.m, s.k),
        c(types.out, s.n, s.m, s.n) {
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    SDC_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
    SDC_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int host_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

template <typename T>
T algo_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T value{};
  size_t written = 0;
  SDC_CUBLAS_TRY(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof value, &written));
  return value;
}

}  // namespace

CudaGemmEngine::CudaGemmEngine(Device& device, int ordinal, cudaStream_t stream, GemmInjectFn inject)
    : device_(device),
      inject_(std::move(inject)),
      ordinal_(ordinal),
      stream_(stream),
      lt_(ordinal),
      done_(ordinal),
      start_(ordinal),
      end_(ordinal),
      workspace_(ordinal, kWorkspaceBytes) {
  int major = 0, minor = 0;
  SDC_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal));
  SDC_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal));
  cc_ = major * 10 + minor;
}

bool CudaGemmEngine::supports(GemmType type, GemmPath path) const {
  return gemm_cuda_operands(type, path, cc_).has_value();
}

GemmOperands CudaGemmEngine::operands(const GemmSpec& s) const {
  const std::optional<GemmOperands> ops = gemm_cuda_operands(s.type, s.path, cc_);
  if (!ops) throw std::runtime_error(std::string("gemm: this device has no ") + gemm_type_name(s.type) + " GEMM");
  return *ops;
}

GemmAccumulation CudaGemmEngine::accumulation(GemmType type, GemmPath path) const {
  return gemm_cuda_accumulation(type, path);
}

const CudaGemmEngine::Pinned& CudaGemmEngine::pinned(const GemmSpec& s) {
  const Key key{static_cast<int>(s.type), s.m, s.n, s.k};
  auto it = pinned_.find(key);
  if (it != pinned_.end()) return it->second;
  const Problem p(s, operands(s));
  Preference pref;
  const uint64_t ws = kWorkspaceBytes;
  SDC_CUBLAS_TRY(
      cublasLtMatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  constexpr int kWanted = 16;
  cublasLtMatmulHeuristicResult_t results[kWanted] = {};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt_.get(), p.desc.d, p.a.l, p.b.l, p.c.l, p.c.l, pref.p, kWanted, results, &found);
  // A shape or type this cuBLASLt cannot run is no fault of the device: the probe skips, saying so.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    throw std::runtime_error(std::string("cuBLASLt has no algorithm for ") + gemm_type_name(s.type) + " " +
                             std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k));
  }
  SDC_CUBLAS_TRY(status);
  // The first algorithm that runs without split-K: its result does not depend on a reduction
  // across thread blocks, so repeats are comparable bit for bit.
  for (int r = 0; r < found; ++r) {
    if (results[r].state != CUBLAS_STATUS_SUCCESS) continue;
    const cublasLtMatmulAlgo_t& algo = results[r].algo;
    if (algo_attribute<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) > 1) continue;
    char text[160];
    std::snprintf(text, sizeof text, "cublasLt algo=%d tile=%u stages=%u splitk=1 swizzle=%u custom=%u",
                  algo_attribute<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID),
                  algo_attribute<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                  algo_attribute<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                  algo_attribute<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                  algo_attribute<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
    return pinned_.emplace(key, Pinned{algo, text}).first->second;
  }
  throw std::runtime_error("cuBLASLt offers no algorithm without split-K for this GEMM");
}

double CudaGemmEngine::elapsed_s(const Event& from, const Event& to) {
  float ms = 0;
  SDC_CUDA_TRY(cudaEventElapsedTime(&ms, from.get(), to.get()));
  return ms / 1e3;
}

double CudaGemmEngine::multiply(const GemmSpec& s, DeviceBuffer& c) {
  DeviceGuard guard(ordinal_);
  SDC_CUDA_TRY(cudaEventRecord(start_.get(), stream_));
  if (s.path == GemmPath::kSimt) {
    SDC_CUDA_TRY(
        launch_gemm_simt_fp32(a_.as<float>(), bt_.as<float>(), static_cast<float*>(c.data()), s.m, s.n, s.k, stream_));
    SDC_CUDA_TRY(cudaEventRecord(end_.get(), stream_));
    synchronize();
    return elapsed_s(start_, end_);
  }
  matmul(s, a_.get(), bt_.get(), c.data());
  SDC_CUDA_TRY(cudaEventRecord(end_.get(), stream_));
  synchronize();
  return elapsed_s(start_, end_);
}

void CudaGemmEngine::matmul(const GemmSpec& s, const void* a, const void* bt, void* c) {
  const Pinned& algo = pinned(s);
  const Problem p(s, operands(s));
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const int32_t one_i = 1, zero_i = 0;
  const void* alpha = &one32;
  const void* beta = &zero32;
  if (p.types.scale == CUDA_R_64F) {
    alpha = &one64;
    beta = &zero64;
  } else if (p.types.scale == CUDA_R_32I) {
    alpha = &one_i;
    beta = &zero_i;
  }
  // Operand "A" of cuBLASLt is Bt, operand "B" is A (see Problem).
  SDC_CUBLAS_TRY(cublasLtMatmul(lt_.get(), p.desc.d, alpha, bt, p.a.l, a, p.b.l, beta, c, p.c.l, c, p.c.l, &algo.algo,
                                workspace_.get(), kWorkspaceBytes, stream_));
}

// Sleeps on a blocking-sync event rather than spinning in cudaStreamSynchronize, as the device's own
// operations do: an inline probe must not take a core from the training job.
void CudaGemmEngine::synchronize() { wait_blocking(stream_, done_.get()); }

void CudaGemmEngine::download(void* host, const void* device, size_t bytes) {
  if (bytes == 0) return;
  SDC_CUDA_TRY(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  device_.count_host_device_bytes(bytes);
  synchronize();
}

void CudaGemmEngine::upload(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  SDC_CUDA_TRY(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  device_.count_host_device_bytes(bytes);
  synchronize();
}

DeviceMemory& CudaGemmEngine::grow(DeviceMemory& mem, size_t bytes) {
  if (mem.bytes() < bytes) {
    mem = DeviceMemory();  // free first, so the old and new blocks need not fit together
    mem = DeviceMemory(ordinal_, bytes);
  }
  return mem;
}

void CudaGemmEngine::generate(const GemmSpec& s) {
  if (s.m == 0 || s.n == 0 || s.k == 0) throw std::invalid_argument("gemm: empty shape");
  if (s.inputs == GemmInputs::kDense && (s.type != GemmType::kBf16 || s.k > kGemmDenseMaxK)) {
    throw std::invalid_argument("gemm: dense inputs are bf16 with k <= 256");
  }
  if (s.inputs == GemmInputs::kScaled && s.type == GemmType::kInt8) throw std::invalid_argument("gemm: no scaled int8");
  inputs_valid_ = reference_valid_ = false;
  const unsigned ib = gemm_input_bytes(s.type);
  grow(a_, uint64_t{s.m} * s.k * ib);
  grow(bt_, uint64_t{s.n} * s.k * ib);
  const GemmOperands ops = operands(s);
  SDC_CUDA_TRY(
      launch_gemm_generate(gemm_generator(s.type, s.inputs, s.k, s.seed, kGemmStreamA), ops.a, s.m, a_.get(), stream_));
  SDC_CUDA_TRY(launch_gemm_generate(gemm_generator(s.type, s.inputs, s.k, s.seed, kGemmStreamB), ops.b, s.n, bt_.get(),
                                    stream_));
  synchronize();
  inputs_spec_ = s;
  inputs_valid_ = true;
}

void CudaGemmEngine::generate_on_device(const GemmSpec& spec, std::vector<uint8_t>& a, std::vector<uint8_t>& bt) {
  DeviceGuard guard(ordinal_);
  generate(spec);
  const unsigned ib = gemm_input_bytes(spec.type);
  a.resize(uint64_t{spec.m} * spec.k * ib);
  bt.resize(uint64_t{spec.n} * spec.k * ib);
  download(a.data(), a_.get(), a.size());
  download(bt.data(), bt_.get(), bt.size());
}

GemmCheckSummary CudaGemmEngine::check(const GemmSpec& spec, const GemmAccumulation& acc, const void* c, bool columns,
                                       std::vector<uint8_t>& flags, double& check_s) {
  const GemmCheckShape s = gemm_check_shape(spec.type, spec.inputs, spec.m, spec.n, spec.k, spec.seed, columns, acc);
  const size_t flag_bytes = static_cast<size_t>(s.lines) * s.tiles;
  grow(flags_, flag_bytes);
  grow(summary_, sizeof(GemmCheckSummary));
  auto* summary = summary_.as<GemmCheckSummary>();
  auto* flags_d = flags_.as<uint8_t>();
  const bool exact = gemm_inputs_exact(spec.inputs);
  grow(scratch_, exact ? gemm_exact_check_scratch(s) : gemm_float_check_scratch(s));
  // Only the row pass records invalid outputs: the column pass sees the same ones.
  unsigned long long* invalid = nullptr;
  if (exact && !columns)
    invalid = grow(invalid_, kGemmMaxConfirm * sizeof(unsigned long long)).as<unsigned long long>();
  SDC_CUDA_TRY(cudaEventRecord(start_.get(), stream_));
  if (exact) {
    const double bound = static_cast<double>(gemm_exact_output_bound(spec.inputs, spec.k, s.line.mag));
    SDC_CUDA_TRY(
        launch_gemm_exact_check(s, bound, c, scratch_.get(), flags_d, summary, invalid, kGemmMaxConfirm, stream_));
  } else {
    SDC_CUDA_TRY(launch_gemm_float_check(s, gemm_float_bound(s, acc), c, scratch_.get(), flags_d, summary, stream_));
  }
  SDC_CUDA_TRY(cudaEventRecord(end_.get(), stream_));
  GemmCheckSummary out;
  download(&out, summary, sizeof out);
  check_s += elapsed_s(start_, end_);
  fetch_flags(flags_d, flag_bytes, out.flagged, out.flagged > 0 || out.invalid > 0, flags);
  return out;
}

void CudaGemmEngine::fetch_flags(const uint8_t* flags_d, size_t flag_bytes, uint64_t flagged, bool wanted,
                                 std::vector<uint8_t>& flags) {
  flags.clear();
  if (!wanted) return;
  flags.resize(flag_bytes);
  if (flagged * sizeof(uint64_t) < flag_bytes) {
    // Few failed checks: their indices cross the bus, not a byte per check.
    std::vector<uint64_t> list(flagged);
    auto* list_d = grow(flag_list_, list.size() * sizeof(uint64_t) + sizeof(uint64_t)).as<unsigned long long>();
    SDC_CUDA_TRY(launch_gemm_flag_list(flags_d, flag_bytes, list_d + 1, list.size(), list_d, stream_));
    download(list.data(), list_d + 1, list.size() * sizeof(uint64_t));
    for (uint64_t f : list) flags[f] = 1;
  } else {
    download(flags.data(), flags_d, flag_bytes);
  }
}

std::vector<uint64_t> CudaGemmEngine::gather(GemmType type, const void* c, const std::vector<uint64_t>& index) {
  std::vector<uint64_t> bits(index.size());
  if (index.empty()) return bits;
  const size_t bytes = index.size() * sizeof(uint64_t);
  grow(index_, bytes);
  grow(bits_, bytes);
  upload(index_.get(), index.data(), bytes);
  SDC_CUDA_TRY(launch_gemm_gather(type, c, index_.as<unsigned long long>(), index.size(),
                                  bits_.as<unsigned long long>(), stream_));
  download(bits.data(), bits_.get(), bytes);
  return bits;
}

void CudaGemmEngine::thin_gemm(cudaDataType_t type, cublasComputeType_t compute, uint64_t rows, uint64_t cols,
                               uint64_t depth, const void* x, const void* y, void* d) {
  MatmulDesc desc(compute, type);
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  SDC_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
  SDC_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
  const Layout xl(type, depth, rows, static_cast<int64_t>(depth)), yl(type, depth, cols, static_cast<int64_t>(depth));
  const Layout dl(type, rows, cols, static_cast<int64_t>(rows));
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const bool wide = type == CUDA_R_64F;
  const void* alpha = wide ? static_cast<const void*>(&one64) : &one32;
  const void* beta = wide ? static_cast<const void*>(&zero64) : &zero32;
  // No algorithm given: cuBLASLt's own heuristic (any summation order; the bound allows any).
  SDC_CUBLAS_TRY(cublasLtMatmul(lt_.get(), desc.d, alpha, x, xl.l, y, yl.l, beta, d, dl.l, d, dl.l, nullptr,
                                workspace_.get(), kWorkspaceBytes, stream_));
}

// Random fp8: two INT32 GEMMs of the inputs scaled to int8 on the integer tensor cores (as fast as
// the fp8 GEMM itself): (m + n) k * 2 bytes of operands and 8 m n bytes of results (768 MiB at
// n = k = 8192), kept with the engine; the fast path runs the first alone, with the operands' norms. Other random inputs: the row check's r = A Y by an FP64 GEMM
// of A (widened on the device) against the thin Y = B w (k x n / tile), and q = |A| |B||w| by an
// FP32 GEMM (FP32 units, no TF32: the bound's sum factor assumes FP32 roundings), neither on the
// tensor cores of the type under test. The widened A (12 m k bytes: 768 MiB at n = 8192) and Y stay
// allocated for the next input set, whose reference would otherwise wait on cudaMalloc and cudaFree.
double CudaGemmEngine::reference(const GemmSpec& spec, const GemmAccumulation& acc) {
  reference_valid_ = false;
  if (gemm_reference_check(spec.type, spec.inputs)) {
    if (spec.k > kGemmReferenceMaxK) throw std::invalid_argument("gemm: fp8 reference needs k <= 149130");
    const uint64_t elements = static_cast<uint64_t>(spec.m) * spec.n;
    const uint64_t a_bytes = uint64_t{spec.m} * spec.k, b_bytes = uint64_t{spec.n} * spec.k;
    auto* a = grow(ref_a_, a_bytes).as<int8_t>();
    auto* a_abs = grow(ref_a_abs_, a_bytes).as<int8_t>();
    auto* bt = grow(ref_bt_, b_bytes).as<int8_t>();
    auto* bt_abs = grow(ref_bt_abs_, b_bytes).as<int8_t>();
    auto* ref = grow(ref_c_, elements * sizeof(int32_t)).as<int32_t>();
    // The fast path bounds each element by its operands' norms (gemm_norm_element): no S = |A| |B|.
    const bool fast = fast_check();
    auto* ref_abs = fast ? nullptr : grow(ref_abs_, elements * sizeof(int32_t)).as<int32_t>();
    auto* norm_a = fast ? grow(ref_norm_a_, spec.m * sizeof(double)).as<double>() : nullptr;
    auto* norm_b = fast ? grow(ref_norm_b_, spec.n * sizeof(double)).as<double>() : nullptr;
    GemmSpec int8 = spec;
    int8.type = GemmType::kInt8;
    pinned(int8);  // outside the timing
    SDC_CUDA_TRY(cudaEventRecord(start_.get(), stream_));
    SDC_CUDA_TRY(launch_gemm_reference_operand(gemm_generator(spec.type, spec.inputs, spec.k, spec.seed, kGemmStreamA),
                                               spec.m, a, a_abs, stream_));
    SDC_CUDA_TRY(launch_gemm_reference_operand(gemm_generator(spec.type, spec.inputs, spec.k, spec.seed, kGemmStreamB),
                                               spec.n, bt, bt_abs, stream_));
    matmul(int8, a, bt, ref);
    if (fast) {
      SDC_CUDA_TRY(launch_gemm_reference_norms(a, spec.m, spec.k, norm_a, stream_));
      SDC_CUDA_TRY(launch_gemm_reference_norms(bt, spec.n, spec.k, norm_b, stream_));
    } else {
      matmul(int8, a_abs, bt_abs, ref_abs);
    }
    SDC_CUDA_TRY(cudaEventRecord(end_.get(), stream_));
    synchronize();
  } else if (fast_check()) {
    SDC_CUDA_TRY(cudaEventRecord(start_.get(), stream_));
    fast_reference(spec, acc);
    SDC_CUDA_TRY(cudaEventRecord(end_.get(), stream_));
    synchronize();
  } else {
    const GemmCheckShape s = gemm_check_shape(spec.type, spec.inputs, spec.m, spec.n, spec.k, spec.seed, false, acc);
    const uint64_t checks = uint64_t{s.lines} * s.tiles, ys = uint64_t{s.tiles} * s.k, as = uint64_t{s.lines} * s.k;
    grow(scratch_, gemm_float_check_scratch(s));
    auto* y = grow(ref_y_, ys * sizeof(double)).as<double>();
    auto* ya = grow(ref_ya_, ys * sizeof(float)).as<float>();
    auto* wide = grow(ref_wide_, as * sizeof(double)).as<double>();
    auto* wide_abs = grow(ref_wide_abs_, as * sizeof(float)).as<float>();
    auto* r = grow(row_r_, checks * sizeof(double)).as<double>();
    auto* q = grow(row_q_, checks * sizeof(float)).as<float>();
    auto* tw = grow(row_tw_, s.tiles * sizeof(double2)).as<double2>();
    SDC_CUDA_TRY(cudaEventRecord(start_.get(), stream_));
    SDC_CUDA_TRY(launch_gemm_float_y(s, scratch_.get(), y, ya, tw, stream_));
    SDC_CUDA_TRY(launch_gemm_wide_operand(s.line, s.lines, wide, wide_abs, stream_));
    // r and q are lines x tiles, line-major: column-major tiles x lines = Y^T A.
    thin_gemm(CUDA_R_64F, CUBLAS_COMPUTE_64F, s.tiles, s.lines, s.k, y, wide, r);
    thin_gemm(CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, s.tiles, s.lines, s.k, ya, wide_abs, q);
    SDC_CUDA_TRY(cudaEventRecord(end_.get(), stream_));
    synchronize();
  }
  reference_spec_ = spec;
  reference_acc_ = acc;
  reference_valid_ = true;
  reference_fast_ = fast_check();
  return elapsed_s(start_, end_);
}

bool CudaGemmEngine::fast_check() {
  const char* path = std::getenv("SDCPROBE_GEMM_CHECK");
  return path != nullptr && std::strcmp(path, "fast") == 0;
}

// Y = B w and |B||w| per tile (FP64, the inputs regenerated), Y rounded to FP32 and each tile's
// norm; then r and each line's norm in one pass over A as generate() stored it:
// (m + n) k input bytes read, no widened copy of A, no second thin GEMM for the bound (its sum comes
// from the norms, gemm_norm_q).
void CudaGemmEngine::fast_reference(const GemmSpec& spec, const GemmAccumulation& acc) {
  const GemmCheckShape s = gemm_check_shape(spec.type, spec.inputs, spec.m, spec.n, spec.k, spec.seed, false, acc);
  const uint64_t ys = uint64_t{s.tiles} * s.k;
  grow(scratch_, gemm_float_check_scratch(s));
  auto* y = grow(ref_y_, ys * sizeof(double)).as<double>();
  auto* ya = grow(ref_ya_, ys * sizeof(float)).as<float>();
  auto* y32 = grow(ref_y32_, ys * sizeof(float)).as<float>();
  auto* tile_norm = grow(row_tile_norm_, s.tiles * sizeof(double)).as<double>();
  auto* line_norm = grow(row_line_norm_, s.lines * sizeof(double)).as<double>();
  auto* r = grow(row_r_, uint64_t{s.lines} * s.tiles * sizeof(double)).as<double>();
  auto* tw = grow(row_tw_, s.tiles * sizeof(double2)).as<double2>();
  SDC_CUDA_TRY(launch_gemm_float_y(s, scratch_.get(), y, ya, tw, stream_));
  SDC_CUDA_TRY(launch_gemm_fast_y(s.k, s.tiles, y, ya, y32, tile_norm, stream_));
  SDC_CUDA_TRY(launch_gemm_fast_reference(s, operands(spec).a, a_.get(), y32, y, r, line_norm, stream_));
}

void CudaGemmEngine::run_fast_repeats(const GemmSpec& spec, const GemmAccumulation& acc, DeviceBuffer& c,
                                      GemmRun& run) {
  const uint32_t reps = std::max(1u, spec.repeats);
  const bool compared = spec.repeats > 1 && spec.compare_repeats, digests = compared || spec.digest;
  const uint64_t elements = static_cast<uint64_t>(spec.m) * spec.n;
  const uint64_t c_bytes = elements * gemm_output_bytes(spec.type);
  const unsigned width = gemm_output_bytes(spec.type) * 8;
  const bool per_element = gemm_reference_check(spec.type, spec.inputs);
  const GemmCheckShape s = gemm_check_shape(spec.type, spec.inputs, spec.m, spec.n, spec.k, spec.seed, false, acc);
  const uint32_t stride = per_element ? 1 : s.tile;
  auto* summaries = grow(batch_summaries_, reps * sizeof(GemmCheckSummary)).as<GemmCheckSummary>();
  auto* caps = grow(batch_caps_, kGemmCaptureSlots * sizeof(GemmCapture)).as<GemmCapture>();
  auto* values = grow(batch_values_, uint64_t{kGemmCaptureSlots} * stride * sizeof(uint64_t)).as<unsigned long long>();
  auto* count = grow(batch_count_, sizeof(unsigned)).as<unsigned>();
  auto* digest_d = digests ? grow(batch_digests_, reps * sizeof(Digest128)).as<Digest128>() : nullptr;
  auto* logs = compared ? grow(batch_logs_, reps * sizeof(DeviceMismatchLog)).as<DeviceMismatchLog>() : nullptr;
  while (batch_events_.size() < 4 * size_t{reps}) batch_events_.emplace_back(ordinal_);
  SDC_CUDA_TRY(cudaMemsetAsync(summaries, 0, reps * sizeof(GemmCheckSummary), stream_));
  SDC_CUDA_TRY(cudaMemsetAsync(count, 0, sizeof(unsigned), stream_));
  if (compared) SDC_CUDA_TRY(cudaMemsetAsync(logs, 0, reps * sizeof(DeviceMismatchLog), stream_));
  const GemmFastBound bound = gemm_fast_bound(s, acc);
  const LaunchShape digest_shape{4096, 256};
  for (uint32_t rep = 0; rep < reps; ++rep) {
    Event* ev = &batch_events_[4 * size_t{rep}];
    SDC_CUDA_TRY(cudaEventRecord(ev[0].get(), stream_));
    matmul(spec, a_.get(), bt_.get(), c.data());
    SDC_CUDA_TRY(cudaEventRecord(ev[1].get(), stream_));
    inject_(c, elements, width, 1);
    SDC_CUDA_TRY(cudaEventRecord(ev[2].get(), stream_));
    if (per_element) {
      SDC_CUDA_TRY(launch_gemm_fast_element_compare(acc, spec.type, spec.k, spec.n, elements,
                                                    static_cast<const float*>(c.data()), ref_c_.as<int32_t>(),
                                                    ref_norm_a_.as<double>(), ref_norm_b_.as<double>(), rep,
                                                    summaries, caps, values, count, stream_));
    } else {
      SDC_CUDA_TRY(launch_gemm_fast_compare(s, bound, c.data(), row_r_.as<double>(), row_line_norm_.as<double>(),
                                            row_tile_norm_.as<double>(), row_tw_.as<double2>(), rep, summaries, caps,
                                            values, count, stream_));
    }
    SDC_CUDA_TRY(cudaEventRecord(ev[3].get(), stream_));
    if (digests)
      SDC_CUDA_TRY(launch_digest(static_cast<const uint64_t*>(c.data()), c_bytes / 8, digest_d + rep, digest_shape,
                                 stream_));
    if (compared && rep == 0) {
      SDC_CUDA_TRY(cudaMemcpyAsync(grow(first_, c_bytes).get(), c.data(), c_bytes, cudaMemcpyDeviceToDevice, stream_));
    } else if (compared) {
      SDC_CUDA_TRY(launch_gemm_diff_if_changed(spec.type, c.data(), first_.get(), elements, spec.n, digest_d, rep,
                                               logs + rep, stream_));
    }
  }
  synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<GemmCheckSummary> sums(reps);
  download(sums.data(), summaries, reps * sizeof(GemmCheckSummary));
  unsigned captured = 0;
  download(&captured, count, sizeof captured);
  std::vector<GemmCapture> cap_list(std::min<unsigned>(captured, kGemmCaptureSlots));
  std::vector<uint64_t> cap_values(cap_list.size() * stride);
  if (!cap_list.empty()) {
    download(cap_list.data(), caps, cap_list.size() * sizeof(GemmCapture));
    download(cap_values.data(), values, cap_values.size() * sizeof(uint64_t));
  }
  std::vector<Digest128> digs(digests ? reps : 0);
  if (digests) download(digs.data(), digest_d, reps * sizeof(Digest128));
  std::vector<uint64_t> seen;
  for (uint32_t rep = 0; rep < reps; ++rep) {
    const Event* ev = &batch_events_[4 * size_t{rep}];
    run.gemm_s += elapsed_s(ev[0], ev[1]);
    GemmVerdict v;
    v.check_s = elapsed_s(ev[2], ev[3]);
    v.check_tile = per_element ? 1 : s.tile;
    std::memcpy(&v.max_ratio, &sums[rep].max_ratio_bits, sizeof v.max_ratio);
    std::memcpy(&v.detectable, &sums[rep].detectable_bits, sizeof v.detectable);
    v.c_rms = std::sqrt(sums[rep].c_square_sum / static_cast<double>(elements));
    v.flagged_checks = sums[rep].flagged;
    v.report.checked = elements;
    if (sums[rep].flagged > 0) {
      const GemmBatchCandidates found = gemm_batch_candidates(cap_list, cap_values, stride, rep);
      GemmCandidates candidates;
      candidates.index = found.index;
      candidates.element_checks = per_element;
      for (const GemmCapture& cap : cap_list) {
        if (cap.rep == rep && !per_element) candidates.failed_at.push_back(cap.first);
      }
      std::sort(candidates.failed_at.begin(), candidates.failed_at.end());
      // Failed checks past the capture slots: counted, not located.
      candidates.beyond = found.index.empty() ? sums[rep].flagged : 0;
      const GemmBitsAt bits_at = [&found](const std::vector<uint64_t>& index) {
        std::vector<uint64_t> bits;
        for (uint64_t i : index) {
          const auto it = std::lower_bound(found.index.begin(), found.index.end(), i);
          bits.push_back(it != found.index.end() && *it == i ? found.bits[it - found.index.begin()] : 0);
        }
        return bits;
      };
      v.report = gemm_confirm_capped(spec, acc, nullptr, std::move(candidates), bits_at, host_threads());
    }
    if (digests) run.digests.push_back(digs[rep]);
    if (rep > 0 && compared && digs[rep] != digs[0] && v.report.mismatches == 0) {
      // Differs from repeat 0 while both pass their bounds: the elements that differ.
      DeviceMismatchLog log;
      download(&log, logs + rep, sizeof log);
      v.report.mismatches += log.mismatches;
      for (uint64_t r = 0; r < std::min<uint64_t>(log.mismatches, kDeviceMismatchSlots); ++r)
        v.report.keep(
            gemm_mismatch_record(spec, log.records[r].index, log.records[r].expected, log.records[r].observed));
    }
    run.verify_s += v.check_s;
    gemm_merge_repeat(run, v, rep, seen);
  }
  run.verify_s += seconds_since(t0);
}

GemmCheckSummary CudaGemmEngine::compare(const GemmSpec& spec, const GemmAccumulation& acc, const void* c,
                                         std::vector<uint8_t>& flags, double& check_s) {
  const GemmCheckShape s = gemm_check_shape(spec.type, spec.inputs, spec.m, spec.n, spec.k, spec.seed, false, acc);
  const size_t flag_bytes = static_cast<size_t>(s.lines) * s.tiles;
  auto* flags_d = grow(flags_, flag_bytes).as<uint8_t>();
  auto* summary = grow(summary_, sizeof(GemmCheckSummary)).as<GemmCheckSummary>();
  SDC_CUDA_TRY(cudaEventRecord(start_.get(), stream_));
  SDC_CUDA_TRY(launch_gemm_float_compare(s, gemm_float_bound(s, acc), c, row_r_.as<double>(), row_q_.as<float>(),
                                         row_tw_.as<double2>(), flags_d, summary, stream_));
  SDC_CUDA_TRY(cudaEventRecord(end_.get(), stream_));
  GemmCheckSummary out;
  download(&out, summary, sizeof out);
  check_s += elapsed_s(start_, end_);
  fetch_flags(flags_d, flag_bytes, out.flagged, out.flagged > 0, flags);
  return out;
}

// Each element of C against the kept INT32 reference GEMMs (reference()), one pass over C.
GemmVerdict CudaGemmEngine::reference_verify(const GemmSpec& spec, const GemmAccumulation& acc, const void* c) {
  const uint64_t elements = static_cast<uint64_t>(spec.m) * spec.n;
  const auto* ref = ref_c_.as<int32_t>();
  const auto* ref_abs = ref_abs_.as<int32_t>();
  auto* index_d = grow(ref_index_, kGemmMaxConfirm * sizeof(unsigned long long)).as<unsigned long long>();
  auto* summary = grow(summary_, sizeof(GemmCheckSummary)).as<GemmCheckSummary>();
  SDC_CUDA_TRY(cudaEventRecord(start_.get(), stream_));
  SDC_CUDA_TRY(launch_gemm_reference_check(acc, spec.type, spec.k, elements, static_cast<const float*>(c), ref, ref_abs,
                                           index_d, kGemmMaxConfirm, summary, stream_));
  SDC_CUDA_TRY(cudaEventRecord(end_.get(), stream_));
  GemmCheckSummary out;
  download(&out, summary, sizeof out);
  GemmVerdict verdict;
  verdict.check_s = elapsed_s(start_, end_);
  verdict.check_tile = 1;
  std::memcpy(&verdict.max_ratio, &out.max_ratio_bits, sizeof verdict.max_ratio);
  std::memcpy(&verdict.detectable, &out.detectable_bits, sizeof verdict.detectable);
  verdict.c_rms = std::sqrt(out.c_square_sum / static_cast<double>(elements));
  verdict.flagged_checks = out.flagged;
  verdict.report.checked = elements;
  if (out.flagged == 0) return verdict;
  GemmCandidates candidates;
  candidates.index.resize(std::min<uint64_t>(out.flagged, kGemmMaxConfirm));
  download(candidates.index.data(), index_d, candidates.index.size() * sizeof(uint64_t));
  std::sort(candidates.index.begin(), candidates.index.end());
  candidates.beyond = out.flagged - candidates.index.size();
  candidates.element_checks = true;
  verdict.report =
      gemm_confirm_capped(spec, acc, nullptr, std::move(candidates), bits_at(spec.type, c), host_threads());
  return verdict;
}

GemmVerdict CudaGemmEngine::verify(const GemmSpec& spec, const GemmAccumulation& acc, const void* c) {
  const uint32_t m = spec.m, n = spec.n;
  if (gemm_reference_check(spec.type, spec.inputs)) return reference_verify(spec, acc, c);
  GemmVerdict verdict;
  verdict.report.checked = static_cast<uint64_t>(m) * n;
  std::vector<uint8_t> row_flags, col_flags;
  // Random inputs: one pass over C against the kept reference; exact: the int64 check.
  const GemmCheckSummary rows = gemm_inputs_exact(spec.inputs) ? check(spec, acc, c, false, row_flags, verdict.check_s)
                                                               : compare(spec, acc, c, row_flags, verdict.check_s);
  verdict.check_tile = gemm_check_tile(spec, acc, false);
  if (!gemm_inputs_exact(spec.inputs)) {
    std::memcpy(&verdict.max_ratio, &rows.max_ratio_bits, sizeof verdict.max_ratio);
    std::memcpy(&verdict.detectable, &rows.detectable_bits, sizeof verdict.detectable);
    verdict.c_rms = std::sqrt(rows.c_square_sum / (static_cast<double>(m) * n));
  }
  verdict.flagged_checks = rows.flagged;
  if (rows.flagged == 0 && rows.invalid == 0) return verdict;

  // Locate: the same check on the transpose; candidates where both fail, plus the invalid outputs.
  std::vector<uint64_t> invalid(std::min<uint64_t>(rows.invalid, kGemmMaxConfirm));
  download(invalid.data(), invalid_.get(), invalid.size() * sizeof(uint64_t));
  const GemmCheckSummary cols = check(spec, acc, c, true, col_flags, verdict.check_s);
  verdict.flagged_checks += cols.flagged;
  // (The row pass's flags came back with its failure; the column pass's only if it failed too.)
  const uint32_t tile_c = verdict.check_tile, tile_r = gemm_check_tile(spec, acc, true);
  if (col_flags.empty()) col_flags.assign(static_cast<size_t>(n) * ((m + tile_r - 1) / tile_r), 0);
  GemmCandidates candidates = gemm_candidates(m, n, tile_c, tile_r, row_flags, col_flags, invalid);
  // Invalid outputs past the recorded ones are wrong without confirmation.
  candidates.beyond = rows.invalid - invalid.size();
  verdict.report =
      gemm_confirm_capped(spec, acc, nullptr, std::move(candidates), bits_at(spec.type, c), host_threads());
  return verdict;
}

Digest128 CudaGemmEngine::digest(const void* c, uint64_t bytes) {
  grow(digest_, sizeof(Digest128));
  const LaunchShape shape{4096, 256};
  SDC_CUDA_TRY(launch_digest(static_cast<const uint64_t*>(c), bytes / 8, digest_.as<Digest128>(), shape, stream_));
  Digest128 d;
  download(&d, digest_.get(), sizeof d);
  return d;
}

GemmRun CudaGemmEngine::run(const GemmSpec& spec) {
  gemm_require_runnable(*this, spec);
  const std::string shape = gemm_cuda_unsupported_shape(spec.type, spec.path, spec.m, spec.n, spec.k);
  if (!shape.empty()) throw std::runtime_error("gemm: " + shape);
  DeviceGuard guard(ordinal_);
  GemmRun run;
  // Choose (or look up) the pinned algorithm outside the timings.
  if (spec.path == GemmPath::kLibrary) pinned(spec);
  auto t0 = std::chrono::steady_clock::now();
  // The inputs and their checks' reference stay while the next run asks for the same inputs.
  run.inputs_reused = inputs_valid_ && gemm_same_inputs(inputs_spec_, spec);
  if (!run.inputs_reused) {
    generate(spec);
    run.generate_s = seconds_since(t0);
  }
  const uint64_t elements = static_cast<uint64_t>(spec.m) * spec.n;
  const unsigned width = gemm_output_bytes(spec.type) * 8;
  const uint64_t c_bytes = elements * gemm_output_bytes(spec.type);
  DeviceBuffer& c = gemm_output_buffer(device_, c_, spec);
  const GemmAccumulation acc = spec.model ? *spec.model : accumulation(spec.type, spec.path);
  const bool fast = fast_check() && !gemm_inputs_exact(spec.inputs);
  if (!gemm_inputs_exact(spec.inputs) &&
      !(reference_valid_ && reference_fast_ == fast_check() && gemm_same_inputs(reference_spec_, spec) &&
        gemm_same_accumulation(reference_acc_, acc))) {
    run.reference_s = reference(spec, acc);
    run.verify_s += run.reference_s;
    run.inputs_reused = false;
  }
  if (fast) {
    run_fast_repeats(spec, acc, c, run);
    run.algorithm = algorithm(spec);
    run.library_version = library_version();
    return run;
  }
  std::vector<uint64_t> seen;  // indices already counted, so one wrong element counts once
  for (uint32_t rep = 0; rep < std::max(1u, spec.repeats); ++rep) {
    run.gemm_s += multiply(spec, c);
    inject_(c, elements, width, 1);
    t0 = std::chrono::steady_clock::now();
    GemmVerdict v = verify(spec, acc, c.data());
    // Digests only where repeats or devices are compared (gemm.repeat.*, gemm.exact.* for
    // consensus).
    const bool compared = spec.repeats > 1 && spec.compare_repeats;
    if (compared || spec.digest) run.digests.push_back(digest(c.data(), c_bytes));
    if (compared && rep == 0) {
      SDC_CUDA_TRY(cudaMemcpyAsync(grow(first_, c_bytes).get(), c.data(), c_bytes, cudaMemcpyDeviceToDevice, stream_));
      synchronize();
    }
    if (rep > 0 && compared && run.digests[rep] != run.digests[0] && v.report.mismatches == 0) {
      // Differs from repeat 0 while both pass their bounds: name the elements that differ.
      grow(log_, sizeof(DeviceMismatchLog));
      SDC_CUDA_TRY(
          launch_gemm_diff(spec.type, c.data(), first_.get(), elements, spec.n, log_.as<DeviceMismatchLog>(), stream_));
      DeviceMismatchLog log;
      download(&log, log_.get(), sizeof log);
      v.report.mismatches += log.mismatches;
      for (uint64_t r = 0; r < std::min<uint64_t>(log.mismatches, kDeviceMismatchSlots); ++r)
        v.report.keep(
            gemm_mismatch_record(spec, log.records[r].index, log.records[r].expected, log.records[r].observed));
    }
    run.verify_s += seconds_since(t0);
    gemm_merge_repeat(run, v, rep, seen);
  }
  run.algorithm = algorithm(spec);
  run.library_version = library_version();
  return run;
}

std::string CudaGemmEngine::algorithm(const GemmSpec& spec) const {
  if (spec.path == GemmPath::kSimt) return "sdc-simt-fp32-128x128x8";
  auto it = pinned_.find(Key{static_cast<int>(spec.type), spec.m, spec.n, spec.k});
  return it == pinned_.end() ? "cublasLt" : it->second.description;
}

std::string CudaGemmEngine::library_version() const { return "cublasLt " + std::to_string(cublasLtGetVersion()); }

}  // namespace sdc
