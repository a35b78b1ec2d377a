#include "scheduler/inline/event_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "host/error.hpp"

namespace sdc {

EventLog::EventLog(const std::string& path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError("event_log '" + path + "': " + std::strerror(errno));
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLog::append(nlohmann::json event, bool durable) {
  if (fd_ < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  nlohmann::json line = {{"t", std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()}};
  line.update(event);
  const std::string text = line.dump() + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("event log write failed: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  if (durable) ::fsync(fd_);
}

}  // namespace sdc
