// write_file_atomically must never change what a path is: links are written through, FIFOs and
// character devices are written directly, and a failure leaves no temporary file behind; nor may
// write_files_atomically, which renames none of its files when one cannot be written.
#include "host/atomic_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <chrono>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "host/error.hpp"

namespace sdc {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/sdc_atomic_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string read(const std::string& p) const {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  size_t entries() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }
  mode_t type_of(const std::string& p) const {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & S_IFMT;
  }

  fs::path dir_;
};

TEST_F(AtomicFileTest, ReplacesARegularFileAndLeavesNoTemporary) {
  write_file_atomically(path("report.json"), "old");
  write_file_atomically(path("report.json"), "new", 0640);
  EXPECT_EQ(read(path("report.json")), "new");
  EXPECT_EQ(fs::status(path("report.json")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, WritesThroughASymbolicLinkAndKeepsTheLink) {
  ASSERT_EQ(::mkdir(path("real").c_str(), 0755), 0);
  write_file_atomically(path("real/report.json"), "old");
  fs::create_symlink("real/report.json", path("link.json"));
  write_file_atomically(path("link.json"), "new");
  EXPECT_EQ(type_of(path("link.json")), S_IFLNK);
  EXPECT_EQ(read(path("real/report.json")), "new");
  // A dangling link (two hops) creates its target.
  fs::create_symlink("link2.json", path("link1.json"));
  fs::create_symlink(path("real/fresh.json"), path("link2.json"));
  write_file_atomically(path("link1.json"), "fresh");
  EXPECT_EQ(type_of(path("link1.json")), S_IFLNK);
  EXPECT_EQ(type_of(path("link2.json")), S_IFLNK);
  EXPECT_EQ(read(path("real/fresh.json")), "fresh");
  EXPECT_EQ(entries(), 4u);  // real, link.json, link1.json, link2.json: no temporary beside the links
  EXPECT_EQ(std::distance(fs::directory_iterator(path("real")), fs::directory_iterator()), 2);
}

TEST_F(AtomicFileTest, WritesAFifoDirectlyAndItStaysAFifo) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  // The read end is open before the write, so the writer's open does not wait; a report larger than
  // the pipe's buffer makes the writer wait for the reading thread.
  const int fd = ::open(path("fifo").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fcntl(fd, F_SETFL, 0), 0);
  std::string got;
  std::atomic<bool> written{false};
  std::thread reader([&] {
    char buf[4096];
    // A FIFO reads as end of file whenever no writer holds it, before the writer opens it too:
    // only an end of file after the write returned is the end of the report.
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        got.append(buf, static_cast<size_t>(n));
      } else if (n < 0 || written.load()) {
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  });
  std::string report(256 * 1024, 'x');
  write_file_atomically(path("fifo"), report);
  written = true;
  reader.join();
  ::close(fd);
  EXPECT_EQ(got.size(), report.size());
  EXPECT_EQ(got, report);
  EXPECT_EQ(type_of(path("fifo")), S_IFIFO);
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, WritesAPipeNamedByProcSelfFd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  write_file_atomically("/proc/self/fd/" + std::to_string(fds[1]), "through the pipe");
  ::close(fds[1]);
  char buf[64] = {};
  EXPECT_EQ(::read(fds[0], buf, sizeof buf), 16);
  EXPECT_STREQ(buf, "through the pipe");
  ::close(fds[0]);
}

TEST_F(AtomicFileTest, CharacterDevicesStayDevices) {
  // Copies of /dev/null and /dev/full, so that a writer that renames cannot damage the machine's.
  if (::mknod(path("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0 ||
      ::mknod(path("full").c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    GTEST_SKIP() << "cannot create device nodes here (not root, or no CAP_MKNOD)";
  }
  write_file_atomically(path("null"), "discarded");
  EXPECT_EQ(type_of(path("null")), S_IFCHR);
  try {
    write_file_atomically(path("full"), "no room");
    FAIL() << "a write to a full device succeeded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path("full")), std::string::npos) << e.what();
  }
  EXPECT_EQ(type_of(path("full")), S_IFCHR);
  EXPECT_EQ(entries(), 2u);
}

TEST_F(AtomicFileTest, RefusesADirectoryAndAMissingDirectory) {
  ASSERT_EQ(::mkdir(path("out").c_str(), 0755), 0);
  EXPECT_THROW(write_file_atomically(path("out"), "x"), InputError);
  EXPECT_TRUE(fs::is_directory(path("out")));
  EXPECT_THROW(write_file_atomically(path("missing/report.json"), "x"), InputError);
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  write_file_atomically(path("report.json"), "old");
  // The file size limit makes the write fail part way, as a full disk would.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{16, 16};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write_file_atomically(path("report.json"), std::string(4096, 'x'));
    } catch (const InputError& e) {
      _exit(std::string(e.what()).find("File too large") != std::string::npos ? 0 : 3);
    }
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read(path("report.json")), "old");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, SeveralFilesAreWrittenWholeAndAFailureRenamesNone) {
  write_files_atomically({{path("a.ndjson"), "a\n"}, {path("b.ndjson"), "b\n"}, {path("c.ndjson"), "c\n"}});
  EXPECT_EQ(read(path("a.ndjson")), "a\n");
  EXPECT_EQ(read(path("c.ndjson")), "c\n");
  EXPECT_EQ(entries(), 3u);
  // The third cannot be written: nothing is renamed (the first keeps its old content, the new file
  // never appears) and no temporary file is left.
  ASSERT_EQ(::mkdir(path("dir").c_str(), 0755), 0);
  try {
    write_files_atomically({{path("a.ndjson"), "new a\n"}, {path("d.ndjson"), "d\n"}, {path("dir"), "x"}});
    FAIL() << "accepted a directory";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path("dir")), std::string::npos) << e.what();
  }
  EXPECT_EQ(read(path("a.ndjson")), "a\n");
  EXPECT_FALSE(fs::exists(path("d.ndjson")));
  EXPECT_EQ(entries(), 4u);
}

TEST_F(AtomicFileTest, DashIsStandardOutput) {
  const bool existed = fs::exists("-");
  ::testing::internal::CaptureStdout();
  write_file_atomically("-", "to stdout\n");
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "to stdout\n");
  EXPECT_EQ(fs::exists("-"), existed);  // no file named "-" in the working directory
}

}  // namespace
}  // namespace sdc
