// SDC_HD marks element logic shared by host and device code: the same source computes a device's
// work and the host's golden, so the two can only disagree when hardware does.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SDC_HD __host__ __device__ __forceinline__
#else
#define SDC_HD inline
#endif
