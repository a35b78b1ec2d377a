#include "host/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

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

// A regular file's new content, in a temporary file beside its target until it is renamed there.
struct Staged {
  std::string path, target, tmp;
  int fd = -1;
};

// Writes `content` straight to standard output, a FIFO or a character device (nullopt: nothing to
// rename); otherwise to a new temporary file beside the link-resolved target, with its mode.
std::optional<Staged> stage(const std::string& path, const std::string& content, unsigned mode) {
  if (path.empty()) throw InputError("cannot write an empty path");
  if (path == "-") {
    std::fflush(stdout);  // after what the command printed
    if (const int err = write_all(STDOUT_FILENO, content); err != 0) fail("standard output", "write", err);
    return std::nullopt;
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
    return std::nullopt;
  }

  Staged s;
  s.path = path;
  s.target = resolve_links(path);
  const size_t slash = s.target.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : s.target.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? s.target : s.target.substr(slash + 1);
  s.tmp = dir + "." + base + ".tmp.XXXXXX";
  s.fd = ::mkostemp(s.tmp.data(), O_CLOEXEC);
  if (s.fd < 0) fail(path, "create a temporary file in " + (dir.empty() ? std::string("./") : dir), errno);
  auto give_up = [&](const char* what, int err) {
    ::close(s.fd);
    ::unlink(s.tmp.c_str());
    fail(path, what, err);
  };
  if (const int err = write_all(s.fd, content); err != 0) give_up("write", err);
  // The umask must not narrow the mode a reader such as node_exporter relies on.
  if (::fchmod(s.fd, mode) != 0) give_up("chmod", errno);
  return s;
}

// Removes what is left of staged files after a failure: open descriptors and temporary files.
void discard(std::vector<Staged>& staged) {
  for (Staged& s : staged) {
    if (s.fd >= 0) ::close(s.fd);
    if (!s.tmp.empty()) ::unlink(s.tmp.c_str());
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& content, unsigned mode) {
  write_files_atomically({{path, content}}, mode);
}

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files, unsigned mode) {
  std::vector<Staged> staged;
  try {
    for (const auto& [path, content] : files) {
      if (std::optional<Staged> s = stage(path, content, mode)) staged.push_back(std::move(*s));
    }
    // Synced at once, each on a thread of its own: a journaling file system (ext4's jbd2, XFS's log)
    // commits concurrent syncs together, so N files cost about one sync, where one after another
    // they cost N.
    std::vector<int> sync_errors(staged.size(), 0);
    std::vector<std::thread> syncs;
    for (size_t i = 1; i < staged.size(); ++i) {
      syncs.emplace_back([&, i] { sync_errors[i] = ::fsync(staged[i].fd) == 0 ? 0 : errno; });
    }
    if (!staged.empty()) sync_errors[0] = ::fsync(staged[0].fd) == 0 ? 0 : errno;
    for (auto& t : syncs) t.join();
    for (size_t i = 0; i < staged.size(); ++i) {
      Staged& s = staged[i];
      if (sync_errors[i] != 0) fail(s.path, "sync", sync_errors[i]);
      const int fd = s.fd;
      s.fd = -1;
      if (::close(fd) != 0) fail(s.path, "close", errno);
    }
    for (Staged& s : staged) {
      if (::rename(s.tmp.c_str(), s.target.c_str()) != 0) fail(s.path, "rename", errno);
      s.tmp.clear();
    }
  } catch (...) {
    discard(staged);
    throw;
  }
}

}  // namespace sdc
