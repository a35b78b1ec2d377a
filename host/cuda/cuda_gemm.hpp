// The CUDA backend's GEMM engine: cuBLASLt for every data type (tensor cores where the type has
// them; FP32 with CUBLAS_COMPUTE_32F_PEDANTIC), with the algorithm chosen once per (type, shape) from
// the heuristic, split-K excluded, and then reused (pinned), with this engine's own workspace; and
// the hand-written SIMT kernel (kernels/gemm_simt.cu) for gemm.simt.fp32. Nothing O(n^2) crosses
// the bus: A and B are generated on the device by the host's SDC_HD generators
// (kernels/gemm_generate.cu), C is checked there by the Freivalds/ABFT kernels of
// kernels/gemm_verify.cu on the FP64 and integer cores (random fp8: per element against two INT32
// reference GEMMs on the int8 tensor cores), and digested there. Only per-(line, tile)
// flags and the candidates' values come back, to be confirmed on the host in O(k) each.
// The check at speed: the inputs and the reference of random inputs' row check (r = A (B w) by an
// FP64 GEMM of A against the thin Y = B w, the bound's sum |A| (|B||w|) by an FP32 GEMM; fp8: the
// INT32 reference GEMMs) are kept while the next run asks for the same inputs, so each later GEMM
// costs one fused pass over its C. Locating a failed check (the column pass) recomputes its
// reference each time (check()).
// The fast path (SDCPROBE_GEMM_CHECK=fast; the thin GEMMs' path, measured on the leases, stays the
// default until a lease has run and measured the fast one): the reference in one pass over A as stored (kernels/gemm_fast_check.cu), and
// a run's repeats checked as one batch whose verdicts are read back once, the failing repeat named.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "host/cuda/cuda_raii.hpp"
#include "host/cuda/cuda_streams.hpp"
#include "host/gemm.hpp"
#include "host/gemm_confirm.hpp"
#include "host/gemm_cuda_support.hpp"
#include "kernels/common/gemm_check.hpp"

namespace sdc {

class CudaGemmEngine : public GemmEngine {
 public:
  // `device` allocates C (so its apply_corruption can reach it) and counts the bytes this engine
  // copies between host and device; `stream` is the device's stream, on which every operation is
  // enqueued (the injector's kernel runs on it too).
  CudaGemmEngine(Device& device, int ordinal, cudaStream_t stream, GemmInjectFn inject);

  bool supports(GemmType type, GemmPath path) const override;
  GemmAccumulation accumulation(GemmType type, GemmPath path) const override;
  GemmRun run(const GemmSpec& spec) override;

  // The inputs as generated on the device, copied to the host (tests compare them with
  // generate_gemm_inputs bit for bit; the copy is counted like any other).
  void generate_on_device(const GemmSpec& spec, std::vector<uint8_t>& a, std::vector<uint8_t>& bt);

 private:
  struct Pinned {
    cublasLtMatmulAlgo_t algo;
    std::string description;
  };
  using Key = std::tuple<int, uint32_t, uint32_t, uint32_t>;
  const Pinned& pinned(const GemmSpec& spec);
  // The storage types of A and Bt for spec on this device (gemm_cuda_operands).
  GemmOperands operands(const GemmSpec& spec) const;
  void generate(const GemmSpec& spec);
  // Returns the GEMM's own time, from events on the stream.
  double multiply(const GemmSpec& spec, DeviceBuffer& c);
  // C = A B by cuBLASLt (the pinned algorithm of spec's type and shape), enqueued.
  void matmul(const GemmSpec& spec, const void* a, const void* bt, void* c);
  // Random fp8: each element against the exact INT32 reference GEMMs (gemm_reference_check).
  GemmVerdict reference_verify(const GemmSpec& spec, const GemmAccumulation& acc, const void* c);
  GemmVerdict verify(const GemmSpec& spec, const GemmAccumulation& acc, const void* c);
  // One pass of the check (rows, or columns to locate); returns its summary, flags in `flags`, and
  // adds its kernels' time (events on the stream) to `check_s`.
  GemmCheckSummary check(const GemmSpec& spec, const GemmAccumulation& acc, const void* c, bool columns,
                         std::vector<uint8_t>& flags, double& check_s);
  // A pass's flags (a byte per line and tile) into `flags` when `wanted`: the indices of the
  // `flagged` failed checks cross the bus, or the whole array when that is smaller.
  void fetch_flags(const uint8_t* flags_d, size_t flag_bytes, uint64_t flagged, bool wanted,
                   std::vector<uint8_t>& flags);
  // Random inputs: computes the reference of the inputs in a_ and bt_ under `acc` and keeps it;
  // returns the seconds it took. run() calls it only when the kept one does not fit.
  double reference(const GemmSpec& spec, const GemmAccumulation& acc);
  // Whether this run takes the fast path (SDCPROBE_GEMM_CHECK, read per run so that a benchmark can
  // measure both paths in one process).
  static bool fast_check();
  // The fast path's reference of random inputs other than fp8 (r, each line's and tile's norm, the
  // tile weights), enqueued.
  void fast_reference(const GemmSpec& spec, const GemmAccumulation& acc);
  // The fast path's repeats: every GEMM, its injection and its check enqueued back to back, the
  // verdicts (summaries, captured failed checks, digests) read back once at the end.
  void run_fast_repeats(const GemmSpec& spec, const GemmAccumulation& acc, DeviceBuffer& c, GemmRun& run);
  // The row pass at speed: C against the kept reference, one pass; as check().
  GemmCheckSummary compare(const GemmSpec& spec, const GemmAccumulation& acc, const void* c,
                           std::vector<uint8_t>& flags, double& check_s);
  // D (rows x cols, column-major, ld rows) = X^T Y with X (depth x rows) and Y (depth x cols), both
  // column-major with ld depth, by cuBLASLt in `compute` (the FP64 or FP32 units, never reduced
  // precision).
  void thin_gemm(cudaDataType_t type, cublasComputeType_t compute, uint64_t rows, uint64_t cols, uint64_t depth,
                 const void* x, const void* y, void* d);
  // Seconds between two events recorded on the stream, both complete.
  static double elapsed_s(const Event& from, const Event& to);
  // The bits of output elements `index` (C stays on the device).
  std::vector<uint64_t> gather(GemmType type, const void* c, const std::vector<uint64_t>& index);
  GemmBitsAt bits_at(GemmType type, const void* c) {
    return [this, type, c](const std::vector<uint64_t>& index) { return gather(type, c, index); };
  }
  Digest128 digest(const void* c, uint64_t bytes);
  // Counted copies, complete on return.
  void download(void* host, const void* device, size_t bytes);
  void upload(void* device, const void* host, size_t bytes);
  void synchronize();
  DeviceMemory& grow(DeviceMemory& mem, size_t bytes);
  std::string algorithm(const GemmSpec& spec) const;
  std::string library_version() const;

  Device& device_;
  GemmInjectFn inject_;
  int ordinal_;
  cudaStream_t stream_;
  int cc_ = 0;  // compute capability, major * 10 + minor
  CublasLtHandle lt_;
  BlockingEvent done_;  // synchronize() sleeps on it
  Event start_, end_;   // timing of the GEMM and of the checks' kernels
  DeviceMemory workspace_;
  DeviceMemory a_, bt_;
  std::unique_ptr<DeviceBuffer> c_;
  DeviceMemory first_;    // repeat 0's output, for naming the elements a later repeat changed
  DeviceMemory scratch_;  // Y of the checks
  DeviceMemory ref_a_, ref_a_abs_, ref_bt_, ref_bt_abs_, ref_c_, ref_abs_, ref_index_;  // fp8's reference
  // What a_ and bt_ hold (valid: generated completely), and the spec and accumulation the kept
  // reference belongs to.
  GemmSpec inputs_spec_, reference_spec_;
  GemmAccumulation reference_acc_;
  bool inputs_valid_ = false, reference_valid_ = false, reference_fast_ = false;
  DeviceMemory row_r_, row_q_, row_tw_;  // the row check's reference: r, q (lines x tiles), tile weights
  DeviceMemory ref_y_, ref_ya_, ref_wide_, ref_wide_abs_;  // what it is computed from: Y, |B||w|, A and |A|
  DeviceMemory flags_, flag_list_, summary_, invalid_, index_, bits_, digest_, log_;
  DeviceMemory ref_y32_, row_line_norm_, row_tile_norm_;  // the fast path's reference: Y in FP32, the norms
  DeviceMemory ref_norm_a_, ref_norm_b_;                  // and random fp8's: its operands' row norms
  DeviceMemory batch_summaries_, batch_caps_, batch_values_, batch_count_, batch_digests_, batch_logs_;
  std::vector<Event> batch_events_;  // per repeat: GEMM start, end, check start, end
  std::map<Key, Pinned> pinned_;
};

}  // namespace sdc
