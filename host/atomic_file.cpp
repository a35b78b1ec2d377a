#include "host/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "host/error.hpp"

namespace sdc {

void write_file_atomically(const std::string& path, const std::string& content, unsigned mode) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw InputError("cannot write " + path + ": " + what + ": " + reason);
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) fail("open");
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      fail("write");
    }
    done += static_cast<size_t>(n);
  }
  // The umask must not narrow the mode a reader such as node_exporter relies on.
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) {
    ::close(fd);
    fail("sync");
  }
  if (::close(fd) != 0) fail("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename");
}

}  // namespace sdc
