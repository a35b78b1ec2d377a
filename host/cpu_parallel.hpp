// Runs work on a device's cores: one OpenMP thread per core, each pinned to its core for the
// duration of the call, so a mismatch names the core that produced it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include <omp.h>

namespace sdc {

// Splits [0, n) into contiguous chunks, one per core, aligned to `align` elements. Calls
// f(chunk, lo, hi, core) on each core's thread (chunk = 0 .. cores.size() - 1). The split depends only on n, the core
// count and align, so two calls with the same arguments give each core the same chunk.
template <typename F>
void for_each_core(const std::vector<int>& cores, size_t n, size_t align, F&& f);

// for_each_core in rounds, for work long enough to need a heartbeat: each core's chunk (the same
// split) goes to f a piece of at most `round` elements at a time, from the chunk's start (or, when
// `descending`, from its end), all cores taking their next piece together, and `between()` runs on
// the calling thread after each round. So each round is a bounded amount of every core's progress.
// Rounds are also bounded in time: the first piece is a sixteenth of `round`, and each next one
// doubles (up to `round`) while a round takes under half of kRoundTarget and halves while one takes
// longer. At full speed the rounds soon reach `round`; on a core many times slower (a sanitizer
// build, a loaded node, a throttled device) `between()` still comes about every kRoundTarget, where
// a fixed piece sized for full speed would leave a watchdog seconds without a heartbeat.
inline constexpr std::chrono::milliseconds kRoundTarget{100};
template <typename F, typename B>
void for_each_core_in_rounds(const std::vector<int>& cores, size_t n, size_t align, size_t round, bool descending,
                             B&& between, F&& f);

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

template <typename F, typename B>
void for_each_core_in_rounds(const std::vector<int>& cores, size_t n, size_t align, size_t round, bool descending,
                             B&& between, F&& f) {
  const size_t threads = cores.size(), units = (n + align - 1) / align;
  size_t longest = 0;  // the longest chunk of for_each_core's split
  for (size_t t = 0; t < threads; ++t)
    longest =
        std::max(longest, std::min(n, units * (t + 1) / threads * align) - std::min(n, units * t / threads * align));
  round = std::max(align, round / align * align);
  size_t piece = std::max(align, round / 16 / align * align);
  for (size_t done = 0; done < longest;) {
    const auto start = std::chrono::steady_clock::now();
    for_each_core(cores, n, align, [&](size_t chunk, size_t lo, size_t hi, int core) {
      if (done >= hi - lo) return;
      const size_t take = std::min(piece, hi - lo - done);
      if (descending) {
        f(chunk, hi - done - take, hi - done, core);
      } else {
        f(chunk, lo + done, lo + done + take, core);
      }
    });
    between();
    done += piece;
    const auto took = std::chrono::steady_clock::now() - start;
    if (took > kRoundTarget) {
      piece = std::max(align, piece / 2 / align * align);
    } else if (took < kRoundTarget / 2) {
      piece = std::min(round, piece * 2);
    }
  }
}

}  // namespace sdc
