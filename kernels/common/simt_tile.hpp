// gemm.simt.fp32's tiling (kernels/gemm_simt.cu): which outputs and which loads each thread of a
// block takes. Index arithmetic only, shared with the CPU test that checks the cover.
#pragma once

#include "kernels/common/sdc_hd.hpp"

namespace sdc {

inline constexpr int kSimtTile = 128;                     // output tile edge
inline constexpr int kSimtDepth = 8;                      // k step staged through shared memory
inline constexpr int kSimtThreads = 256;                  // a 16 x 16 grid of threads
inline constexpr int kSimtMicro = 8;                      // each thread: 8 x 8 outputs
inline constexpr int kSimtGrid = kSimtTile / kSimtMicro;  // 16 threads along each edge

// Output row (column) r, 0..7, of the thread at row (column) coordinate c, 0..15, within the tile:
// two runs of four, half a tile apart. A warp's float4 reads of a shared-memory k slice are then
// conflict-free, and its float4 stores of C cover whole 256-byte runs.
SDC_HD int simt_micro_offset(int c, int r) { return (r / 4) * (kSimtTile / 2) + c * 4 + r % 4; }

// Each k step, thread t loads four consecutive k values (one float4) of one tile row of A and of
// Bt: 256 threads x 4 = the 128 x 8 slice.
SDC_HD int simt_load_row(int t) { return t / 2; }
SDC_HD int simt_load_k(int t) { return (t % 2) * 4; }

}  // namespace sdc
