#include "host/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "host/error.hpp"

namespace sdc {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw InputError("cannot write " + path + ": " + what + ": " + std::strerror(err));
}

// Returns 0 or the errno of the failed write.
int write_all(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// Follows a chain of symbolic links (dangling or not) to the path the content belongs at.
std::string resolve_links(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::string link(4096, '\0');
    const ssize_t n = ::readlink(p.c_str(), link.data(), link.size());
    if (n < 0) fail(path, "readlink " + p, errno);
    link.resize(static_cast<size_t>(n));
    const size_t slash = p.rfind('/');
    p = link.front() == '/' || slash == std::string::npos ? link : p.substr(0, slash + 1) + link;
  }
  fail(path, "resolving symbolic links", ELOOP);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& content, unsigned mode) {
  if (path.empty()) throw InputError("cannot write an empty path");
  if (path == "-") {
    std::fflush(stdout);  // after what the command printed
    if (const int err = write_all(STDOUT_FILENO, content); err != 0) fail("standard output", "write", err);
    return;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) fail(path, "is a directory", EISDIR);
    if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
      throw InputError("cannot write " + path + ": not a regular file, FIFO or character device");
    }
    // FIFOs and character devices: no temporary file, no rename. open follows the path as given, so /proc/self/fd/N
    // reaches the pipe it names.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail(path, "open", errno);
    const int err = write_all(fd, content);
    ::close(fd);
    if (err != 0) fail(path, "write", err);
    return;
  }

  const std::string target = resolve_links(path);
  const size_t slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string tmp = dir + "." + base + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) fail(path, "create a temporary file in " + (dir.empty() ? std::string("./") : dir), errno);
  auto give_up = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, what, err);
  };
  if (const int err = write_all(fd, content); err != 0) give_up("write", err);
  // The umask must not narrow the mode a reader such as node_exporter relies on.
  if (::fchmod(fd, mode) != 0) give_up("chmod", errno);
  if (::fsync(fd) != 0) give_up("sync", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "close", err);
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "rename", err);
  }
}

}  // namespace sdc
