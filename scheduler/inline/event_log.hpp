// Appends goodput events (JSON Lines) to a file. Each line is one write() to an O_APPEND file
// under a lock, stamped inside the lock, so timestamps in the file never go backwards and a crash
// loses at most the line being written.
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace sdc {

class EventLog {
 public:
  // An empty path disables the log. Throws InputError naming the path when it cannot be opened.
  explicit EventLog(const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Adds "t" (Unix nanoseconds) and appends the event; `durable` also fsyncs.
  void append(nlohmann::json event, bool durable = false);
  bool enabled() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  std::mutex mutex_;
};

}  // namespace sdc
