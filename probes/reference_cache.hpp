// Host references that depend only on a probe's configuration (the chains' goldens and expected
// digest, the SFU's FP64 results), computed once and kept for the process, so that repeated and
// inline probes pay device time only. Thread-safe: an inline probe runs off the training thread, and
// several devices may run one probe at once in a process. Bounded: the least recently used entries
// go first, and a value larger than the whole budget is returned without being kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <utility>

namespace sdc {

// What a cache has done since the process started: a hit costs the host nothing.
struct ReferenceCacheStats {
  uint64_t hits = 0;
  uint64_t computed = 0;  // misses: values computed (kept or not)
  size_t entries = 0;
  size_t bytes = 0;
};

// Value must have `size_t bytes() const`.
template <typename Key, typename Value>
class ReferenceCache {
 public:
  ReferenceCache(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // The value for `key`, from `compute()` on a miss. The lock is held while computing: a second
  // device asking for the same configuration waits for it instead of computing it again.
  template <typename Compute>
  std::shared_ptr<const Value> get(const Key& key, Compute&& compute) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key) {
        entries_.splice(entries_.begin(), entries_, it);  // most recently used first
        ++stats_.hits;
        return entries_.front().second;
      }
    }
    auto value = std::make_shared<const Value>(compute());
    ++stats_.computed;
    const size_t bytes = value->bytes();
    if (bytes > max_bytes_ || max_entries_ == 0) return value;
    while (!entries_.empty() && (entries_.size() >= max_entries_ || stats_.bytes + bytes > max_bytes_)) {
      stats_.bytes -= entries_.back().second->bytes();
      entries_.pop_back();
    }
    entries_.emplace_front(key, value);
    stats_.bytes += bytes;
    return value;
  }

  ReferenceCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    ReferenceCacheStats s = stats_;
    s.entries = entries_.size();
    return s;
  }

 private:
  const size_t max_entries_;
  const size_t max_bytes_;
  mutable std::mutex mutex_;
  std::list<std::pair<Key, std::shared_ptr<const Value>>> entries_;  // most recently used first
  ReferenceCacheStats stats_;
};

}  // namespace sdc
