// The machine's own ceilings, measured in the same run as the probes they judge.
#pragma once

#include <cstddef>

namespace sdc::bench {

// memcpy bandwidth over `bytes`-sized buffers on every core, in bytes read plus written per second.
double memcpy_bytes_per_second(size_t bytes);

// A read-only stream and a write-only stream (memset, which streams past the cache at this size)
// over `bytes` on every core, in bytes per second: what a pass that only reads (a verify) or only
// writes (a fill) can reach on this machine, where memcpy reads and writes at once.
double read_bytes_per_second(size_t bytes);
double write_bytes_per_second(size_t bytes);

// Peak FP32 FMA rate on every core, in FLOP/s (an FMA counts two).
double peak_fma32_flops();

}  // namespace sdc::bench
