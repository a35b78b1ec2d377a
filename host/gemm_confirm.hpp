// From failed checks to wrong elements, shared by the host and the CUDA engines: location (the
// candidates both checks point at), confirmation of each candidate by an O(k) recomputation, and
// the merge of a run's repeats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "host/gemm.hpp"
#include "host/gemm_inputs.hpp"
#include "host/mismatch.hpp"
#include "kernels/common/gemm_fast_check.hpp"

namespace sdc {

struct GemmVerdict {
  MismatchReport report;
  double max_ratio = 0;
  uint64_t flagged_checks = 0;
  uint32_t check_tile = 0;           // of the row checks
  double detectable = 0, c_rms = 0;  // as in GemmRun
  double check_s = 0;                // the checks' passes alone
};

// Tile width of the row checks (columns = false) or of the column checks: gemm_check_tile_of.
uint32_t gemm_check_tile(const GemmSpec& s, const GemmAccumulation& acc, bool columns);

// What the failed checks point at, to confirm (gemm_confirm_capped).
struct GemmCandidates {
  std::vector<uint64_t> index;  // sorted, unique: i * n + j
  // Row checks (i * column tiles + tile, sorted) no column check explains, every element of whose
  // tile is in `index`; tiles tile_c wide in a C n wide.
  std::vector<uint64_t> whole_tiles;
  uint32_t n = 0, tile_c = 0;
  uint64_t beyond = 0;  // failing elements `index` lacks (past a device's buffer)
  // Where each failed check is kept when nothing confirms (gemm_unconfirmed_checks); per-element
  // checks (each candidate its own failed check) keep the candidates instead.
  std::vector<uint64_t> failed_at;
  bool element_checks = false;
};

// Location: candidates are the elements whose row fails in its column tile (row_flags, m x column
// tiles of tile_c) and whose column fails in its row tile (col_flags, n x row tiles of tile_r), every
// element of a failed row tile where no column check in it fails, plus `invalid`. A failed check no
// candidate confirms is recorded at its tile's first column (gemm_unconfirmed_checks).
GemmCandidates gemm_candidates(uint32_t m, uint32_t n, uint32_t tile_c, uint32_t tile_r,
                               const std::vector<uint8_t>& row_flags, const std::vector<uint8_t>& col_flags,
                               const std::vector<uint64_t>& invalid);
std::vector<uint64_t> gemm_unconfirmed_checks(uint32_t n, uint32_t tile_c, const std::vector<uint8_t>& row_flags);
// At most this many candidates are confirmed (gemm_confirm_capped).
inline constexpr size_t kGemmMaxConfirm = size_t{1} << 18;

// Confirms candidates (index i * n + j, observed output bits) by O(k) recomputations from the
// generators alone (no inputs in memory): what a device-verified engine does with the few
// candidates its kernels return.
MismatchReport gemm_confirm_candidates(const GemmSpec& spec, const GemmAccumulation& acc,
                                       const std::vector<uint64_t>& index, const std::vector<uint64_t>& observed,
                                       int threads);
// The same tests and bounds with the products recomputed from the inputs in memory, for output C
// on the host (verify_gemm).
MismatchReport gemm_confirm_from_inputs(const GemmHostInputs& in, const GemmAccumulation& acc,
                                        const std::vector<uint64_t>& index, const std::vector<uint64_t>& observed,
                                        int threads);

// C's output bits at a list of indices (read on the host, or gathered from a device).
using GemmBitsAt = std::function<std::vector<uint64_t>(const std::vector<uint64_t>& index)>;
// A verdict's report from its candidates: the first kGemmMaxConfirm confirmed (from `inputs` when
// given, else from the generators), the rest counted without a record, each a mismatch except those
// of a whole tile, one per tile (its failed check: the tile's other elements are likely right), and
// `beyond` more. When no mismatch results, each failed check is kept (gemm_keep_unconfirmed): a
// result with a failed check never passes.
MismatchReport gemm_confirm_capped(const GemmSpec& spec, const GemmAccumulation& acc, const GemmHostInputs* inputs,
                                   GemmCandidates candidates, const GemmBitsAt& bits_at, int threads);

// Counts each failed check at `at` (gemm_unconfirmed_checks), observed as `observed`, as a mismatch
// with a record: for a verdict whose location confirmed no element.
void gemm_keep_unconfirmed(MismatchReport& report, GemmType type, const std::vector<uint64_t>& at,
                           const std::vector<uint64_t>& observed);

// The record of a wrong element of C (index i * n + j) in the lane model of gemm.hpp.
MismatchRecord gemm_mismatch_record(const GemmSpec& spec, uint64_t index, uint64_t expected, uint64_t observed);

// Adds repeat `rep`'s verdict to `run`, counting each wrong element once over the repeats (`seen`
// holds the indices already counted).
void gemm_merge_repeat(GemmRun& run, const GemmVerdict& v, uint32_t rep, std::vector<uint64_t>& seen);
// A whole run's checks as one verdict, to merge runs as repeats (a burn's GEMMs).
GemmVerdict gemm_verdict_of(const GemmRun& run);

// The elements a batch's check captured for repeat `rep` (gemm_fast_check.hpp), to confirm: their
// indices, sorted, and their bits (slot s's values from values[s * stride] on).
struct GemmBatchCandidates {
  std::vector<uint64_t> index, bits;
};
GemmBatchCandidates gemm_batch_candidates(const std::vector<GemmCapture>& captures,
                                          const std::vector<uint64_t>& values, uint32_t stride, unsigned rep);

}  // namespace sdc
