// The machine's own ceilings, measured in the same run as the probes they judge.
#pragma once

#include <cstddef>

namespace sdc::bench {

// memcpy bandwidth over `bytes`-sized buffers on every core, in bytes read plus written per second.
double memcpy_bytes_per_second(size_t bytes);

// Peak FP32 FMA rate on every core, in FLOP/s (an FMA counts two).
double peak_fma32_flops();

}  // namespace sdc::bench
