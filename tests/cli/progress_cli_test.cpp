// Progress through the real binary, as an operator sees it: with stderr a terminal (a pseudo-terminal
// here) `fleet sdc`, `fleet goodput` and `coverage` draw a self-overwriting line and erase it at the
// end, before any error; with stderr a file they write nothing there, and stdout is the same either way.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace sdc::test {
namespace {

namespace fs = std::filesystem;

struct Ran {
  int code = -1;
  std::string err, out;
};

std::string slurp(const fs::path& p) {
  std::ostringstream s;
  s << std::ifstream(p, std::ios::binary).rdbuf();
  return s.str();
}

class ProgressCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("progress_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The binary with `args`, stdout to a file; stderr on a pseudo-terminal (read from its master side)
  // when `tty`, else to a file.
  Ran sdcprobe(const std::vector<std::string>& args, bool tty) const {
    const std::string binary = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";
    const std::string out_path = (dir_ / "stdout").string(), err_path = (dir_ / "stderr").string();
    std::vector<std::string> words = {binary};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    int master = -1;
    const pid_t pid = tty ? ::forkpty(&master, nullptr, nullptr, nullptr) : ::fork();
    if (pid == 0) {
      ::dup2(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), STDOUT_FILENO);
      if (!tty) ::dup2(::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), STDERR_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    Ran r;
    if (pid < 0) return r;
    if (tty) {
      // Until the child's side closes (EIO on Linux).
      char buf[4096];
      for (ssize_t n; (n = ::read(master, buf, sizeof buf)) != 0;) {
        if (n > 0) {
          r.err.append(buf, static_cast<size_t>(n));
        } else if (errno != EINTR) {
          break;
        }
      }
      ::close(master);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (!tty) r.err = slurp(err_path);
    r.out = slurp(out_path);
    return r;
  }

  // Copies of the committed qualify report as `nodes` nodes' (their own host names).
  std::vector<std::string> fleet_reports(int nodes) const {
    const nlohmann::json report =
        nlohmann::json::parse(std::ifstream(fs::path(SDC_SOURCE_DIR) / "tests/fuzz/fleet/qualify_faults.json"));
    std::vector<std::string> paths;
    for (int n = 0; n < nodes; ++n) {
      nlohmann::json j = report;
      j["host"] = "node-" + std::to_string(n);
      paths.push_back((dir_ / ("node-" + std::to_string(n) + ".json")).string());
      std::ofstream(paths.back()) << j.dump();
    }
    return paths;
  }

  fs::path dir_;
};

// Each "\r...\x1b[K" of a terminal's stderr, the text between; what is left over after them.
struct Lines {
  std::vector<std::string> drawn;
  std::string rest;
};
Lines progress_lines(const std::string& err) {
  Lines l;
  size_t at = 0;
  while (at < err.size() && err[at] == '\r') {
    const size_t end = err.find("\x1b[K", at);
    if (end == std::string::npos) break;
    l.drawn.push_back(err.substr(at + 1, end - at - 1));
    at = end + 3;
  }
  l.rest = err.substr(at);
  return l;
}

// Progress, and only progress: lines that start with `prefix`, the last one erased, nothing else.
void expect_progress_only(const std::string& err, const std::string& prefix) {
  const Lines l = progress_lines(err);
  ASSERT_GE(l.drawn.size(), 2u) << err;
  EXPECT_EQ(l.rest, "") << err;
  EXPECT_EQ(l.drawn.back(), "") << "the line is erased at the end: " << err;
  for (size_t i = 0; i + 1 < l.drawn.size(); ++i) EXPECT_EQ(l.drawn[i].rfind(prefix, 0), 0u) << l.drawn[i];
}

TEST_F(ProgressCli, FleetSdcOnATerminalOnlyAndStdoutTheSame) {
  std::vector<std::string> args = {"fleet", "sdc", "--threads", "1"};
  for (const auto& p : fleet_reports(3)) args.push_back(p);
  const Ran tty = sdcprobe(args, true);
  const Ran file = sdcprobe(args, false);
  EXPECT_EQ(tty.code, 1) << tty.out << tty.err;  // the report's planted faults
  // One thread: the first file read draws the first line, at once.
  expect_progress_only(tty.err, "fleet sdc: ");
  EXPECT_EQ(progress_lines(tty.err).drawn.front().rfind("fleet sdc: 1/3 files, ", 0), 0u) << tty.err;
  EXPECT_NE(tty.err.find(" results"), std::string::npos) << tty.err;

  EXPECT_EQ(file.code, tty.code);
  EXPECT_EQ(file.err, "");
  EXPECT_FALSE(file.out.empty());
  EXPECT_EQ(file.out, tty.out);
}

TEST_F(ProgressCli, FleetSdcErasesTheLineBeforeAnError) {
  std::vector<std::string> args = {"fleet", "sdc", "--threads", "1"};
  args.push_back(fleet_reports(1).front());
  const std::string bad = (dir_ / "zz-bad.json").string();
  std::ofstream(bad) << "{\"tool\": \"sdcprobe\"}";
  args.push_back(bad);
  const Ran tty = sdcprobe(args, true);
  EXPECT_EQ(tty.code, 2) << tty.err;
  const Lines l = progress_lines(tty.err);
  ASSERT_GE(l.drawn.size(), 2u) << tty.err;
  EXPECT_EQ(l.drawn.front().rfind("fleet sdc: 1/2 files", 0), 0u) << tty.err;
  EXPECT_EQ(l.drawn.back(), "") << tty.err;
  // The terminal writes "\n" as "\r\n".
  EXPECT_EQ(l.rest.rfind("sdcprobe: error: " + bad + ": host: missing\r\n", 0), 0u) << l.rest;

  const Ran file = sdcprobe(args, false);
  EXPECT_EQ(file.code, 2);
  EXPECT_EQ(file.err, "sdcprobe: error: " + bad + ": host: missing\n");
}

TEST_F(ProgressCli, FleetGoodputOnATerminalOnlyAndStdoutTheSame) {
  const fs::path data = fs::path(SDC_SOURCE_DIR) / "tests/goodput/data/fleet_22.05";
  std::string until;
  std::ifstream(data / "until") >> until;
  const std::vector<std::string> args = {"fleet",   "goodput",
                                         "--sacct", (data / "sacct.json").string(),
                                         "--logs",  (data / "logs/{job_id}/events.rank*.jsonl").string(),
                                         "--until", until};
  const Ran tty = sdcprobe(args, true);
  const Ran file = sdcprobe(args, false);
  EXPECT_EQ(tty.code, 0) << tty.err;
  expect_progress_only(tty.err, "fleet goodput: ");
  EXPECT_NE(tty.err.find("/7 jobs, "), std::string::npos) << tty.err;  // the fixture's seven jobs
  EXPECT_NE(tty.err.find(" log files"), std::string::npos) << tty.err;

  EXPECT_EQ(file.code, 0);
  EXPECT_EQ(file.err, "");
  EXPECT_FALSE(file.out.empty());
  EXPECT_EQ(file.out, tty.out);
}

TEST_F(ProgressCli, CoverageOnATerminalOnly) {
  const std::vector<std::string> args = {"coverage", "--probes", "alu.fma32", "--models", "bitflip", "--trials", "5"};
  const Ran tty = sdcprobe(args, true);
  const Ran file = sdcprobe(args, false);
  EXPECT_EQ(tty.code, 0) << tty.out << tty.err;
  expect_progress_only(tty.err, "coverage: ");
  EXPECT_EQ(progress_lines(tty.err).drawn.front().rfind("coverage: 1/5 trials", 0), 0u) << tty.err;

  EXPECT_EQ(file.code, 0);
  EXPECT_EQ(file.err, "");
  // The same counts; the first line holds the campaign's seconds.
  ASSERT_NE(file.out.find('\n'), std::string::npos) << file.out;
  EXPECT_EQ(file.out.substr(file.out.find('\n')), tty.out.substr(tty.out.find('\n')));
}

}  // namespace
}  // namespace sdc::test
