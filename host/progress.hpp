// Progress of long work (fleet sdc's files, fleet goodput's jobs, coverage's trials) on one line of a
// terminal: "fleet sdc: 1200/450000 files, 95000 results, 9800 files/s, 45 s left", redrawn in place at
// most every kProgressInterval_ns and cleared at the end. Off a terminal it writes nothing, so logs,
// pipes and CI output are the same as without it.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace sdc {

inline constexpr int64_t kProgressInterval_ns = 250'000'000;  // four lines a second at most

// What one line shows. total 0: not known (no ETA); items_unit empty: no items.
struct ProgressState {
  std::string label, unit, items_unit;
  uint64_t done = 0, total = 0, items = 0;
  double elapsed_s = 0;
};

// The line's text, without the "\r" and the erase: counts, then once kProgressInterval_ns has passed
// the rate, and the time left when the total is known.
std::string progress_line(const ProgressState& s);

// stderr when it is a terminal, else null (a Progress that writes nothing).
FILE* terminal_stderr();

class Progress {
 public:
  using Clock = int64_t (*)();  // monotonic nanoseconds
  static int64_t monotonic_ns();

  // `out` null: every call returns at once, writing nothing.
  explicit Progress(std::string label, FILE* out = terminal_stderr(), Clock clock = monotonic_ns);
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool shown() const { return out_ != nullptr; }
  // A phase of the work: its counts start at zero and its first add() draws the line.
  void start(std::string unit, uint64_t total, std::string items_unit = "");
  // `done` units more, with `items` items; any thread. Draws when kProgressInterval_ns has passed
  // since the last line (a clock read otherwise: nothing to format or write).
  void add(uint64_t done, uint64_t items = 0) {
    if (out_ == nullptr) return;
    done_.fetch_add(done, std::memory_order_relaxed);
    items_.fetch_add(items, std::memory_order_relaxed);
    if (clock_() >= next_draw_ns_.load(std::memory_order_relaxed)) draw();
  }
  // Erases the line, if one was drawn. start() may begin another phase after.
  void finish();

 private:
  void draw();

  const std::string label_;
  FILE* const out_;
  const Clock clock_;
  std::string unit_, items_unit_;
  uint64_t total_ = 0;
  int64_t started_ns_ = 0;
  std::atomic<uint64_t> done_{0}, items_{0};
  std::atomic<int64_t> next_draw_ns_{0};
  std::mutex drawing_;
  bool drawn_ = false;
};

}  // namespace sdc
