#include "host/cpu_parallel.hpp"

#include <pthread.h>
#include <sched.h>

#include <cstring>

namespace sdc {

static_assert(sizeof(cpu_set_t) <= 128, "CorePin keeps a cpu_set_t in 128 bytes");

CorePin::CorePin(int core) {
  cpu_set_t saved;
  if (pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) != 0) return;
  std::memcpy(saved_, &saved, sizeof(saved));
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(core, &one);
  // Pinning is best effort: a core outside our cpuset still runs the work, just unpinned.
  restore_ = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
}

CorePin::~CorePin() {
  if (!restore_) return;
  cpu_set_t saved;
  std::memcpy(&saved, saved_, sizeof(saved));
  pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
}

std::vector<int> available_cores() {
  std::vector<int> cores;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cores.push_back(c);
    }
  }
  if (cores.empty()) cores.push_back(0);
  return cores;
}

}  // namespace sdc
