// open_input and read_input word every failure one way, "<what> <path>: cannot read the file:
// <why>", and read a FIFO as the stream it is.
#include "host/input_file.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "host/error.hpp"

namespace sdc {
namespace {

namespace fs = std::filesystem;

class InputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/sdc_input_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::string error_of(const std::string& path) {
  try {
    read_input(path, "--thing");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(InputFileTest, AFileIsReadWhole) {
  std::string text(200'000, 'x');  // more than one piece
  text += "end";
  std::ofstream(path("f"), std::ios::binary) << text;
  EXPECT_EQ(read_input(path("f"), "--thing"), text);
  std::ofstream(path("empty"));
  EXPECT_EQ(read_input(path("empty"), "--thing"), "");
}

TEST_F(InputFileTest, EachFailureIsWordedOneWay) {
  EXPECT_EQ(error_of(path("missing")),
            "--thing " + path("missing") + ": cannot read the file: No such file or directory");
  EXPECT_EQ(error_of(dir_.string()), "--thing " + dir_.string() + ": cannot read the file: Is a directory");
  // Its first page is not mapped: the first read fails with EIO.
  EXPECT_EQ(error_of("/proc/self/mem"), "--thing /proc/self/mem: cannot read the file: Input/output error");
  std::ifstream in = open_input("/proc/self/mem", "--thing");
  char c;
  in.read(&c, 1);
  EXPECT_THROW(check_read(in, "/proc/self/mem", "--thing"), InputError);
  // A socket is not something to read a file from.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path("sock").c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(error_of(path("sock")),
            "--thing " + path("sock") + ": cannot read the file: not a regular file, FIFO or character device");
  ::close(fd);
}

TEST_F(InputFileTest, AFifoIsReadAsAStream) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  std::thread writer([&] { std::ofstream(path("fifo"), std::ios::binary) << "through the pipe"; });
  EXPECT_EQ(read_input(path("fifo"), "--thing"), "through the pipe");
  writer.join();
  EXPECT_EQ(read_input("/dev/null", "--thing"), "");  // a character device
}

}  // namespace
}  // namespace sdc
