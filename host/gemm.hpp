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
  bool digest = false;   // digest C even for one repeat (deterministic families, for consensus)
};

struct GemmRun {
  MismatchReport report;           // records name (row, column) as index = row * n + column
  double max_ratio = 0;            // largest |r| / tau over every check (random inputs); 0 for exact
  uint64_t flagged_checks = 0;     // row / column tile checks that failed
  double generate_s = 0;           // input generation (on the host, and upload; or on the device)
  double gemm_s = 0;               // all repeats together
  double verify_s = 0;             // all verification (download included)
  std::vector<Digest128> digests;  // one per repeat, when repeats > 1 or spec.digest
  std::string algorithm;           // what computed it (for the equivalence class)
  std::string library_version;
};

// Called by an engine between computing C and verifying it: the owning device's inject().
using GemmInjectFn = std::function<void(DeviceBuffer& c, uint64_t elements, unsigned width_bits, uint64_t group)>;

// Seeded inputs, generated on the host by the SDC_HD generators (the same values on every backend).
struct GemmHostInputs {
  GemmSpec spec;
  std::vector<uint8_t> a, bt;             // stored in the input type
  std::vector<float> a_wide, bt_wide;     // exact float copies (empty for fp64)
  std::vector<int32_t> row_exp, col_exp;  // scaled: C_ij = 2^(row_exp_i + col_exp_j) * Cint_ij
  std::vector<int32_t> a_int, bt_int;     // exact families: the unscaled integer inputs
  uint64_t exact_bound = 0;               // exact families: bound on |Cint_ij|
};

GemmHostInputs generate_gemm_inputs(const GemmSpec& spec, int threads);
// The same into `in`, reusing its storage (no page faults when the previous run had the same size).
void generate_gemm_inputs_into(const GemmSpec& spec, int threads, GemmHostInputs& in);

struct GemmVerdict {
  MismatchReport report;
  double max_ratio = 0;
  uint64_t flagged_checks = 0;
};

// Verifies output C (gemm_output_bytes(type) per element, row-major m x n) against the inputs
// without an O(n^3) reference: Freivalds per column tile of the output (int64 modulo 2^64 with zero
// tolerance and two odd random vectors for exact inputs; FP64 with the deterministic bound tau of
// `acc` for random inputs), then the same check on the transpose per row tile to locate the wrong
// elements, each confirmed by an O(k) recomputation.
GemmVerdict verify_gemm(const GemmHostInputs& in, const void* c, const GemmAccumulation& acc, int threads);

// Location: candidates (sorted, unique) are the elements whose row fails in its column tile
// (row_flags, m x column tiles) and whose column fails in its row tile (col_flags, n x row tiles),
// plus `invalid`. A failed check no candidate confirms is recorded at its tile's first column
// (gemm_unconfirmed_checks).
std::vector<uint64_t> gemm_candidates(uint32_t m, uint32_t n, const std::vector<uint8_t>& row_flags,
                                      const std::vector<uint8_t>& col_flags, const std::vector<uint64_t>& invalid);
std::vector<uint64_t> gemm_unconfirmed_checks(uint32_t n, const std::vector<uint8_t>& row_flags);
// At most this many candidates are confirmed; the rest count as mismatches without a record.
inline constexpr size_t kGemmMaxConfirm = size_t{1} << 18;

// Confirms candidates (index i * n + j, observed output bits) by O(k) recomputations from the
// generators alone (no inputs in memory): what a device-verified engine does with the few
// candidates its kernels return. Same tests and bounds as verify_gemm's confirmation.
MismatchReport gemm_confirm_candidates(const GemmSpec& spec, const GemmAccumulation& acc,
                                       const std::vector<uint64_t>& index, const std::vector<uint64_t>& observed,
                                       int threads);

// Adds repeat `rep`'s verdict to `run`, counting each wrong element once over the repeats (`seen`
// holds the indices already counted).
void gemm_merge_repeat(GemmRun& run, const GemmVerdict& v, uint32_t rep, std::vector<uint64_t>& seen);

// Order-independent digest of C's words.
Digest128 gemm_digest(const void* c, uint64_t bytes, int threads);

// Column-tile width of the checks for an n-column output (at least 256 columns, at most
// kGemmMaxCheckTiles = 4 tiles): gemm_check_tile_of.
uint32_t gemm_check_tile(uint32_t n);

class GemmEngine {
 public:
  virtual ~GemmEngine() = default;
  virtual bool supports(GemmType type, GemmPath path) const = 0;
  // The accumulation model of `type` on `path`, which fixes tau for random inputs.
  virtual GemmAccumulation accumulation(GemmType type, GemmPath path) const = 0;
  // Generates, multiplies (spec.repeats times), injects and verifies. Throws for API failures.
  virtual GemmRun run(const GemmSpec& spec) = 0;
};

}  // namespace sdc
