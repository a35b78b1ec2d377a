// Child processes (subprocess.hpp).
#include "host/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

extern char** environ;

namespace sdc {
namespace {

using Clock = std::chrono::steady_clock;

int milliseconds_until(Clock::time_point t) {
  if (t == Clock::time_point::max()) return -1;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, int pipe_fd,
                           const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment is built before fork: only async-signal-safe calls may follow it.
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    const bool replaced = std::any_of(env.begin(), env.end(), [&](const auto& kv) {
      return var.compare(0, kv.first.size() + 1, kv.first + "=") == 0;
    });
    if (!replaced) vars.push_back(var);
  }
  for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  int fds[2] = {-1, -1};
  if (pipe_fd >= 0 && ::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (pipe_fd >= 0) {
      if (pipe_fd != STDOUT_FILENO) ::dup2(STDERR_FILENO, STDOUT_FILENO);
      if (fds[1] == pipe_fd) {
        ::fcntl(pipe_fd, F_SETFD, 0);  // dup2 onto itself would leave close-on-exec set
      } else {
        ::dup2(fds[1], pipe_fd);
      }
    }
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also here, so that kill(-pid) works whichever side runs first
  if (pipe_fd >= 0) {
    ::close(fds[1]);
    out_ = fds[0];
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill_now();
    wait();
  }
  if (out_ >= 0) ::close(out_);
}

void ChildProcess::kill_now() { ::kill(-pid_, SIGKILL); }

int ChildProcess::wait() {
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

Wake wait_readable(int fd, int stop_fd, Clock::time_point until) {
  for (;;) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, stop_fd >= 0 ? 2 : 1, milliseconds_until(until));
    if (n < 0 && errno == EINTR) {
      // A signal handler wrote to stop_fd; poll again to see it.
      continue;
    }
    if (n < 0) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (stop_fd >= 0 && (fds[1].revents & POLLIN)) return Wake::kStop;
    if (n == 0) return Wake::kTimeout;
    return Wake::kReadable;
  }
}

std::map<pid_t, uint64_t> cpu_wait_by_thread(pid_t pid) {
  std::map<pid_t, uint64_t> waits;
  std::error_code ec;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (std::filesystem::directory_iterator it(tasks, ec), end; !ec && it != end; it.increment(ec)) {
    // schedstat: time on a CPU, time runnable waiting for one, timeslices (all since the thread began).
    std::ifstream stat(it->path() / "schedstat");
    uint64_t on_cpu = 0, waiting = 0;
    if (stat >> on_cpu >> waiting) waits[static_cast<pid_t>(std::stol(it->path().filename().string()))] = waiting;
  }
  return waits;
}

double longest_cpu_wait_s(const std::map<pid_t, uint64_t>& before, const std::map<pid_t, uint64_t>& after) {
  uint64_t longest = 0;
  for (const auto& [tid, waiting] : after) {
    const auto then = before.find(tid);
    const uint64_t since = then == before.end() ? 0 : then->second;
    if (waiting > since) longest = std::max(longest, waiting - since);
  }
  return static_cast<double>(longest) * 1e-9;
}

std::string describe_wait_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int run_shell_command(const std::string& shell_command, double timeout_s, int stop_fd) {
  ChildProcess child({"/bin/sh", "-c", shell_command}, STDOUT_FILENO);
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    const Wake wake = wait_readable(child.out(), stop_fd, until);
    if (wake != Wake::kReadable) {
      child.kill_now();
      child.wait();
      return -1;
    }
    char buf[4096];
    const ssize_t n = ::read(child.out(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // its output is not ours to show: the command's exit code is the answer
  }
  const int status = child.wait();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace sdc
