// Runs work on a device's cores: one OpenMP thread per core, each pinned to its core for the
// duration of the call, so a mismatch names the core that produced it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <omp.h>

namespace sdc {

// Splits [0, n) into contiguous chunks, one per core, aligned to `align` elements. Calls
// f(chunk, lo, hi, core) on each core's thread (chunk = 0 .. cores.size() - 1). The split depends only on n, the core
// count and align, so two calls with the same arguments give each core the same chunk.
template <typename F>
void for_each_core(const std::vector<int>& cores, size_t n, size_t align, F&& f);

// Pins the calling thread to one core and restores its previous affinity on destruction.
class CorePin {
 public:
  explicit CorePin(int core);
  ~CorePin();
  CorePin(const CorePin&) = delete;
  CorePin& operator=(const CorePin&) = delete;

 private:
  bool restore_ = false;
  unsigned char saved_[128];  // cpu_set_t storage, kept opaque to avoid <sched.h> here
};

// The cores this process may run on, in order.
std::vector<int> available_cores();

template <typename F>
void for_each_core(const std::vector<int>& cores, size_t n, size_t align, F&& f) {
  const int threads = static_cast<int>(cores.size());
  const size_t units = (n + align - 1) / align;
#pragma omp parallel num_threads(threads)
  // The runtime may give fewer threads than asked (OMP_THREAD_LIMIT, nesting): loop so that every
  // chunk still runs, on its own core.
  for (int t = omp_get_thread_num(); t < threads; t += omp_get_num_threads()) {
    const size_t lo = std::min(n, units * t / threads * align);
    const size_t hi = std::min(n, units * (t + 1) / threads * align);
    if (lo < hi) {
      CorePin pin(cores[t]);
      f(static_cast<size_t>(t), lo, hi, cores[t]);
    }
  }
}

}  // namespace sdc
