// From failed checks to wrong elements, shared by the host and the CUDA engines: location (the
// candidates both checks point at), confirmation of each candidate by an O(k) recomputation, and
// the merge of a run's repeats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "host/gemm.hpp"
#include "host/gemm_inputs.hpp"
#include "host/mismatch.hpp"

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

// Location: candidates (sorted, unique) are the elements whose row fails in its column tile
// (row_flags, m x column tiles of tile_c) and whose column fails in its row tile (col_flags, n x row
// tiles of tile_r), every element of a failed row tile where no column check in it fails, plus
// `invalid`. A failed check no candidate confirms is recorded at its tile's first column
// (gemm_unconfirmed_checks).
std::vector<uint64_t> gemm_candidates(uint32_t m, uint32_t n, uint32_t tile_c, uint32_t tile_r,
                                      const std::vector<uint8_t>& row_flags, const std::vector<uint8_t>& col_flags,
                                      const std::vector<uint64_t>& invalid);
std::vector<uint64_t> gemm_unconfirmed_checks(uint32_t n, uint32_t tile_c, const std::vector<uint8_t>& row_flags);
// At most this many candidates are confirmed; the rest count as mismatches without a record.
inline constexpr size_t kGemmMaxConfirm = size_t{1} << 18;

// Confirms candidates (index i * n + j, observed output bits) by O(k) recomputations from the
// generators alone (no inputs in memory): what a device-verified engine does with the few
// candidates its kernels return.
MismatchReport gemm_confirm_candidates(const GemmSpec& spec, const GemmAccumulation& acc,
                                       const std::vector<uint64_t>& index, const std::vector<uint64_t>& observed,
                                       int threads);
// The same tests and bounds with the products recomputed from the inputs in memory, for output C
// on the host (verify_gemm).
MismatchReport gemm_confirm_from_inputs(const GemmHostInputs& in, const GemmAccumulation& acc, const void* c,
                                        const std::vector<uint64_t>& index, int threads);

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

}  // namespace sdc
