// Runs the built `sdcprobe` binary as an operator's script would, for the CLI tests.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace sdc::test {

struct Outcome {
  int code;         // exit status, or -1 when the process did not exit normally
  std::string out;  // stdout and stderr together
};

// Runs a shell command line, stderr joined to stdout.
inline Outcome run_command(const std::string& cmd) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline Outcome sdcprobe(const std::string& args) {
  return run_command(std::string(SDC_BINARY_DIR) + "/cli/sdcprobe " + args);
}

}  // namespace sdc::test
