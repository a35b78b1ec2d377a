// GEMM operations for the gemm.* probes. A backend's GemmEngine generates the seeded inputs,
// multiplies, hands the output to the device's injector, and verifies it against an independent
// expected answer, so a probe can neither see nor cheat the injected fault.
//
// Layout (every backend): A is m x k row-major, B is stored transposed (Bt: n x k row-major, i.e. B
// column-major), C is m x n row-major with ldc = n. A mismatch record's index is i * n + j: row
// i = index / n, column j = index % n. Lane model: output element (i, j) belongs to lane j % 32
// (the column a warp lane stores in the epilogue of the CUDA kernels); the engines offer C to the
// injector with group = 1, which gives the same lane for every n that is a multiple of 32 (the
// probes only use such n).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/device.hpp"
#include "host/mismatch.hpp"
#include "kernels/common/digest.hpp"
#include "kernels/common/gemm_elements.hpp"

namespace sdc {

enum class GemmPath : uint8_t {
  kLibrary,  // cuBLAS(Lt) on CUDA; OpenBLAS (after exact widening) on the CPU
  kSimt,     // the hand-written FP32 GEMM: shared-memory tiles and FMA units, no tensor cores
};

const char* gemm_type_name(GemmType t);
const char* gemm_inputs_name(GemmInputs in);

struct GemmSpec {
  GemmType type = GemmType::kFp32;
  GemmInputs inputs = GemmInputs::kRandom;
  GemmPath path = GemmPath::kLibrary;
  uint32_t m = 0, n = 0, k = 0;
  uint64_t seed = 0;
  uint32_t repeats = 1;  // gemm.repeat: the same inputs this many times, digests compared
  // false: the repeats are a batch of checked GEMMs, not compared with each other (the burn): no
  // digests, and a device engine reads their verdicts back once
  bool compare_repeats = true;
  bool digest = false;   // digest C even for one repeat (deterministic families, for consensus)
  // Random inputs: verify against this accumulation model instead of the engine's own. It must be
  // at least as loose as the engine's: coverage runs the CUDA engine's bounds and tiles on the CPU.
  std::optional<GemmAccumulation> model;
};

struct GemmRun {
  MismatchReport report;    // records name (row, column) as index = row * n + column
  double max_ratio = 0;     // largest |r| / tau over every check (random inputs); 0 for exact
  uint32_t check_tile = 0;  // columns per row check
  // Random inputs, the row checks of the last repeat: the smallest change of one element that every
  // check was sure to catch (gemm_detectable_error), and the rms of C, for it as a multiple.
  double detectable = 0, c_rms = 0;
  uint64_t flagged_checks = 0;  // row / column tile checks that failed
  double generate_s = 0;        // input generation (on the host, and upload; or on the device)
  double gemm_s = 0;            // all repeats together (CUDA: timed by events on the stream)
  double verify_s = 0;          // all verification (download and the reference included)
  double check_s = 0;           // the checks' passes alone (CUDA: their kernels, timed by events)
  // Random inputs: computing the checks' reference (A (B w) and the bound), once per input set; 0
  // when this run found the inputs and their reference kept from the previous run.
  double reference_s = 0;
  bool inputs_reused = false;      // the previous run's inputs and reference were reused
  std::vector<Digest128> digests;  // one per repeat, when repeats > 1 or spec.digest
  std::vector<uint32_t> failed_repeats;  // the repeats (a burn's: GEMMs) that found a wrong element
  std::string algorithm;           // what computed it (for the equivalence class)
  std::string library_version;
};

// Whether two specs have the same inputs (type, family, shape, seed): an engine keeps its inputs
// and their checks' reference from one run to the next while they do.
bool gemm_same_inputs(const GemmSpec& a, const GemmSpec& b);
bool gemm_same_accumulation(const GemmAccumulation& a, const GemmAccumulation& b);

// Called by an engine between computing C and verifying it: the owning device's inject().
using GemmInjectFn = std::function<void(DeviceBuffer& c, uint64_t elements, unsigned width_bits, uint64_t group)>;

// The accumulation model of the CUDA engine (cuBLASLt and the SIMT kernel) for `type` on `path`.
GemmAccumulation gemm_cuda_accumulation(GemmType type, GemmPath path);

class GemmEngine {
 public:
  virtual ~GemmEngine() = default;
  virtual bool supports(GemmType type, GemmPath path) const = 0;
  // The accumulation model of `type` on `path`, which fixes tau for random inputs.
  virtual GemmAccumulation accumulation(GemmType type, GemmPath path) const = 0;
  // Generates, multiplies (spec.repeats times), injects and verifies. Throws for API failures.
  virtual GemmRun run(const GemmSpec& spec) = 0;
};

// What each engine's run() does first: throws for a spec `engine` does not support, or an odd n.
void gemm_require_runnable(const GemmEngine& engine, const GemmSpec& spec);
// The output buffer for `spec` in `c`, allocated on `device` unless the previous run's has its size.
DeviceBuffer& gemm_output_buffer(Device& device, std::unique_ptr<DeviceBuffer>& c, const GemmSpec& spec);

}  // namespace sdc
