#include "host/input_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "host/error.hpp"

namespace sdc {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, const std::string& why) {
  throw InputError(what + " " + path + ": cannot read the file: " + why);
}

}  // namespace

std::ifstream open_input(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, what, std::strerror(errno));
  // A directory opens, and fails only at its first read; a block device would read a disk.
  if (S_ISDIR(st.st_mode)) fail(path, what, std::strerror(EISDIR));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
    fail(path, what, "not a regular file, FIFO or character device");
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, what, errno != 0 ? std::strerror(errno) : "cannot open");
  return in;
}

void check_read(const std::istream& in, const std::string& path, const std::string& what) {
  // A stream keeps no errno: that of the failed read, which ended the reading, is still set.
  if (in.bad()) fail(path, what, errno != 0 ? std::strerror(errno) : "read error");
}

std::string read_rest(std::istream& in, const std::string& path, const std::string& what) {
  std::string text;
  char piece[1 << 16];
  while (in.read(piece, sizeof piece) || in.gcount() > 0) text.append(piece, static_cast<size_t>(in.gcount()));
  check_read(in, path, what);
  return text;
}

std::string read_input(const std::string& path, const std::string& what) {
  std::ifstream in = open_input(path, what);
  return read_rest(in, path, what);
}

}  // namespace sdc
