#include "goodput/breakdown.hpp"

namespace sdc::goodput {
namespace {

struct CategoryInfo {
  std::string_view key, title, owner, lever;
};

// Owners from DESIGN.md's table; levers are what that owner can turn.
constexpr CategoryInfo kInfo[kCategoryCount] = {
    {"queue", "queue", "scheduler", "reserve capacity or hot spares so a requeue starts at once"},
    {"detection_teardown", "detection & teardown", "monitoring",
     "shorter watchdog and NCCL timeouts; automatic triage and eviction of suspects"},
    {"restart_warmup", "restart & warm-up", "launcher",
     "faster init and restore: cached images, in-memory or peer checkpoint restore, warm compile caches"},
    {"rework", "rework", "checkpoint cadence, detection latency",
     "checkpoint more often (see `sdcprobe plan`); probe more often to bound SDC detection latency"},
    {"blocking_overhead", "blocking overhead", "I/O, data, this tool",
     "asynchronous checkpoint saves, faster data loading, cheaper or rarer probes"},
};

}  // namespace

std::string_view category_key(Category c) { return kInfo[static_cast<size_t>(c)].key; }
std::string_view category_title(Category c) { return kInfo[static_cast<size_t>(c)].title; }
std::string_view category_owner(Category c) { return kInfo[static_cast<size_t>(c)].owner; }
std::string_view category_lever(Category c) { return kInfo[static_cast<size_t>(c)].lever; }

int64_t Breakdown::lost_ns() const {
  int64_t sum = 0;
  for (const CategoryNs& c : categories) sum += c.ns;
  return sum;
}

int64_t Breakdown::sdc_lost_ns() const {
  int64_t sum = 0;
  for (const CategoryNs& c : categories) sum += c.sdc_ns;
  return sum;
}

}  // namespace sdc::goodput
