// Where a run's wall time went: productive time plus five loss categories, in integer nanoseconds.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sdc::goodput {

enum class Category : uint8_t { kQueue, kDetectionTeardown, kRestartWarmup, kRework, kBlockingOverhead };
inline constexpr size_t kCategoryCount = 5;
inline constexpr std::array<Category, kCategoryCount> kCategories = {Category::kQueue, Category::kDetectionTeardown,
                                                                     Category::kRestartWarmup, Category::kRework,
                                                                     Category::kBlockingOverhead};

// The JSON key ("detection_teardown").
std::string_view category_key(Category category);
// A heading for people ("detection & teardown").
std::string_view category_title(Category category);
// Who owns the category, and the lever that shrinks it (DESIGN.md, "Goodput").
std::string_view category_owner(Category category);
std::string_view category_lever(Category category);

struct CategoryNs {
  int64_t ns = 0;
  int64_t sdc_ns = 0;  // the part attributable to silent data corruption
  bool operator==(const CategoryNs& o) const { return ns == o.ns && sdc_ns == o.sdc_ns; }
};

// One attempt's detection & teardown (from its process_start to the next), split at its first
// fault: the time from the last progress to the fault (a hang's wait for the watchdog), and from the
// fault on (teardown). What explains an incident, such as a hang's culprit, is joined to it by
// `slurm_restart` and `attempt`, its process_start's (-1 where it has none).
struct AttemptLoss {
  int64_t slurm_restart = -1, attempt = -1;
  int64_t detection_ns = 0, teardown_ns = 0;
};

struct Breakdown {
  int64_t wall_ns = 0;
  int64_t productive_ns = 0;
  std::array<CategoryNs, kCategoryCount> categories{};
  // Diagnostics: silences between events longer than the gap threshold (labelled by the state
  // that encloses them), and discards.
  int64_t gap_count = 0;
  int64_t gap_ns = 0;
  int64_t rollbacks = 0;
  // Probes the loop did not wait for ("blocking": false): their spans overlap training and take no
  // wall time from it, but they are the detector's cost, so SDC-attributed.
  int64_t overlapped_probe_ns = 0;
  // The attempts with detection & teardown, in order; their sum is that category's ns.
  std::vector<AttemptLoss> attempts;

  CategoryNs& operator[](Category c) { return categories[static_cast<size_t>(c)]; }
  const CategoryNs& operator[](Category c) const { return categories[static_cast<size_t>(c)]; }
  int64_t lost_ns() const;
  int64_t sdc_lost_ns() const;
  double ettr() const { return wall_ns > 0 ? static_cast<double>(productive_ns) / static_cast<double>(wall_ns) : 0.0; }
  // productive + the five categories == wall, exactly.
  bool balanced() const { return productive_ns + lost_ns() == wall_ns; }
  // Compares the labels only (not the diagnostics).
  bool same_labels(const Breakdown& o) const {
    return wall_ns == o.wall_ns && productive_ns == o.productive_ns && categories == o.categories;
  }
};

}  // namespace sdc::goodput
