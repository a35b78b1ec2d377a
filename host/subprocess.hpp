// Child processes for the isolation of probes and the sweep's idle check: fork and exec with a
// pipe, a poll that a stop pipe can interrupt, and the wait status in words.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sdc {

// A child process in its own process group, with the write end of a pipe as its fd `pipe_fd` when
// that is not -1 (a worker: fd 3, its stdout joined to stderr; a shell command: its stdout), and
// `env` added to its environment. It dies with the parent (PR_SET_PDEATHSIG), so a SIGKILLed sweep
// leaves no probe running. The destructor kills and reaps a child still running.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, int pipe_fd,
               const std::vector<std::pair<std::string, std::string>>& env = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The read end of the pipe (-1 without one).
  int out() const { return out_; }
  pid_t pid() const { return pid_; }
  // SIGKILL to its process group.
  void kill_now();
  // The wait status; the child is reaped.
  int wait();

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

// Nanoseconds each thread of process `pid` has spent runnable but waiting for a CPU (the kernel's
// schedstat run delay), by thread id. Empty where the kernel keeps no such count or the process is gone.
std::map<pid_t, uint64_t> cpu_wait_by_thread(pid_t pid);

// The longest any one thread waited for a CPU between two readings, in seconds. A thread that is new
// in `after` counts from zero; one that ended counts nothing.
double longest_cpu_wait_s(const std::map<pid_t, uint64_t>& before, const std::map<pid_t, uint64_t>& after);

enum class Wake { kReadable, kTimeout, kStop };

// Waits until `fd` is readable, `stop_fd` (when not -1) is readable, or `until` has come.
Wake wait_readable(int fd, int stop_fd, std::chrono::steady_clock::time_point until);

// A wait status in words: "exited with code N" or "killed by signal N (name)".
std::string describe_wait_status(int status);

// Runs `shell_command` with /bin/sh -c (the sweep's idle check). Returns its exit code, or -1 when it
// ran past `timeout_s` or `stop_fd` became readable (it is killed then).
int run_shell_command(const std::string& shell_command, double timeout_s, int stop_fd);

}  // namespace sdc
