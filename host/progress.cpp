#include "host/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <limits>

namespace sdc {
namespace {

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Rounded as a person glances at it: "45 s", "12 min", "3.4 h".
std::string time_left(double s) {
  if (s < 99.5) return format("%.0f s", s);
  if (s < 99.5 * 60) return format("%.0f min", s / 60);
  return format("%.1f h", s / 3600);
}

}  // namespace

std::string progress_line(const ProgressState& s) {
  std::string line = s.label + ": " + std::to_string(s.done);
  if (s.total > 0) line += "/" + std::to_string(s.total);
  line += " " + s.unit;
  if (!s.items_unit.empty()) line += ", " + std::to_string(s.items) + " " + s.items_unit;
  // A rate from the first moments (one file, one trial) would be noise.
  if (s.elapsed_s >= static_cast<double>(kProgressInterval_ns) / 1e9) {
    const double rate = static_cast<double>(s.done) / s.elapsed_s;
    line += ", " + format(rate < 10 ? "%.1f" : "%.0f", rate) + " " + s.unit + "/s";
    if (s.total > 0 && s.done > 0 && s.done <= s.total) {
      line += ", " + time_left(static_cast<double>(s.total - s.done) / rate) + " left";
    }
  }
  return line;
}

FILE* terminal_stderr() { return ::isatty(STDERR_FILENO) == 1 ? stderr : nullptr; }

int64_t Progress::monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Progress::Progress(std::string label, FILE* out, Clock clock) : label_(std::move(label)), out_(out), clock_(clock) {}

void Progress::start(std::string unit, uint64_t total, std::string items_unit) {
  if (out_ == nullptr) return;
  const std::lock_guard<std::mutex> hold(drawing_);
  unit_ = std::move(unit);
  items_unit_ = std::move(items_unit);
  total_ = total;
  done_ = 0;
  items_ = 0;
  started_ns_ = clock_();
  next_draw_ns_ = 0;
}

void Progress::draw() {
  // One thread draws; the others go back to work (the next line shows their counts).
  std::unique_lock<std::mutex> hold(drawing_, std::try_to_lock);
  const int64_t now = clock_();
  if (!hold.owns_lock() || now < next_draw_ns_) return;
  next_draw_ns_ = now + kProgressInterval_ns;
  const ProgressState s{
      label_, unit_, items_unit_, done_.load(), total_, items_.load(), static_cast<double>(now - started_ns_) / 1e9};
  std::fprintf(out_, "\r%s\x1b[K", progress_line(s).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::finish() {
  if (out_ == nullptr) return;
  const std::lock_guard<std::mutex> hold(drawing_);
  next_draw_ns_ = std::numeric_limits<int64_t>::max();  // no line after the end, until start()
  if (!drawn_) return;
  std::fputs("\r\x1b[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace sdc
