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

inline Outcome sdcprobe(const std::string& args) {
  const std::string cmd = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace sdc::test
