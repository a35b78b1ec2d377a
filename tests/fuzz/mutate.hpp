// Seeded mutation fuzzing for the tests: a mutator, boundary tokens, the corpus reader, and a child
// process runner that tells an exit from a signal or a hang. Header-only, so any test target can
// include "tests/fuzz/mutate.hpp" (the project root is on every test's include path).
//
// Every case is a pure function of (seed, case number): a failure prints both, and rerunning the
// test replays it exactly.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace sdc::fuzz {

// Numbers and words at the edges parsers get wrong: signs, octal, overflow, exponents, NaN, empty.
inline const std::vector<std::string>& boundary_tokens() {
  static const std::vector<std::string> tokens = {"",
                                                  "0",
                                                  "-0",
                                                  "-1",
                                                  "1",
                                                  "7",
                                                  "8",
                                                  "010",
                                                  "077",
                                                  "0x",
                                                  "0x10",
                                                  "0xffffffffffffffff",
                                                  "0x10000000000000000",
                                                  "00",
                                                  "2147483647",
                                                  "2147483648",
                                                  "4294967295",
                                                  "4294967296",
                                                  "4294967299",
                                                  "9223372036854775807",
                                                  "9223372036854775808",
                                                  "18446744073709551615",
                                                  "18446744073709551616",
                                                  "1e26",
                                                  "1e308",
                                                  "1e309",
                                                  "nan",
                                                  "-nan",
                                                  "inf",
                                                  "-inf",
                                                  "0.5",
                                                  "1.5",
                                                  " ",
                                                  "\t",
                                                  ",",
                                                  ";",
                                                  "=",
                                                  "*",
                                                  "?",
                                                  "\"",
                                                  "{",
                                                  "}",
                                                  "[",
                                                  "]",
                                                  "\\",
                                                  "\xff",
                                                  "\xc3\xa9",
                                                  "1K",
                                                  "1G",
                                                  "1.2.3",
                                                  "+1",
                                                  "0b101",
                                                  "1_0",
                                                  "-9223372036854775808",
                                                  "null",
                                                  "true",
                                                  "[]",
                                                  "{}"};
  return tokens;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::mt19937_64& rng() { return rng_; }
  // A uniform index in [0, n); 0 when n is 0.
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  const std::string& pick(const std::vector<std::string>& v) { return v[below(v.size())]; }

  // One to `max_edits` edits of `text`: flip a bit, replace, insert or delete a byte, insert or
  // substitute a token (from `dictionary` or the boundary tokens), duplicate or delete a span,
  // truncate.
  std::string mutate(std::string text, const std::vector<std::string>& dictionary = {}, int max_edits = 4) {
    const int edits = 1 + static_cast<int>(below(static_cast<size_t>(max_edits)));
    for (int e = 0; e < edits; ++e) {
      const size_t at = below(text.size() + 1);
      const std::string& token = !dictionary.empty() && below(2) == 0 ? pick(dictionary) : pick(boundary_tokens());
      switch (below(9)) {
        case 0:
          if (!text.empty()) text[std::min(at, text.size() - 1)] ^= static_cast<char>(1u << below(8));
          break;
        case 1:
          if (!text.empty()) text[std::min(at, text.size() - 1)] = static_cast<char>(below(256));
          break;
        case 2: text.insert(at, 1, static_cast<char>(below(256))); break;
        case 3:
          if (!text.empty()) text.erase(std::min(at, text.size() - 1), 1);
          break;
        case 4: text.insert(at, token); break;
        case 5: {  // replace a run of digits or word characters with a token
          size_t end = at;
          while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
          text.replace(at, end - at, token);
          break;
        }
        case 6: {
          const size_t len = below(text.size() - at + 1);
          text.insert(at, text.substr(at, len));
          break;
        }
        case 7: text.erase(at, below(text.size() - at + 1)); break;
        case 8: text.resize(at); break;
      }
    }
    return text;
  }

 private:
  std::mt19937_64 rng_;
};

// The files of a corpus directory, sorted by name.
inline std::vector<std::string> read_corpus(const std::string& dir) {
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> texts;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    texts.push_back(s.str());
  }
  return texts;
}

// The lines of a corpus file, without empty lines and lines starting with '#'.
inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  }
  return lines;
}

struct ProcessResult {
  bool exited = false;     // false: killed by a signal, or by the timeout
  bool timed_out = false;  // killed by run_process after timeout_s
  int code = -1;           // exit status when exited
  int signal = 0;          // the signal that ended it, when not exited
  std::string out, err;
};

// Runs argv (no shell) in `cwd` with stdin from /dev/null; kills it with SIGKILL after timeout_s.
// The timeout only separates a hang from an answer: it is generous, never a speed assertion.
inline ProcessResult run_process(const std::vector<std::string>& argv, const std::string& cwd, double timeout_s) {
  int out_pipe[2], err_pipe[2];
  ProcessResult r;
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) return r;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group, so a timeout ends any workers it started too
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    const int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    if (::chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::setpgid(pid, pid);  // as the child does: whichever runs first
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(-pid, SIGKILL);
      r.timed_out = true;
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::kill(-pid, SIGKILL);  // workers it left behind
  r.exited = !r.timed_out && WIFEXITED(status);
  if (r.exited) r.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

// The lines of `text`, without the final newline's empty line.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

}  // namespace sdc::fuzz
