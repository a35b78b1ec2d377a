// Drives subcommands through their CLI11 wiring as `sdcprobe` does, without the binary: parses
// argv like cli/main.cpp, with its mapping of errors to exit code 2, and captures stdout.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "host/error.hpp"

namespace sdc::goodput {

struct CliResult {
  int exit_code;
  std::string out;
  std::string err;
};

// `app` has its subcommands added, writing their status to `exit_code`; argv is "sdcprobe" and `args`.
inline CliResult run_cli_app(CLI::App& app, int& exit_code, const std::vector<std::string>& args) {
  std::vector<const char*> argv{"sdcprobe"};
  for (const auto& a : args) argv.push_back(a.c_str());
  testing::internal::CaptureStdout();
  std::string err;
  try {
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  } catch (const CLI::ParseError& e) {
    exit_code = e.get_exit_code() == 0 ? 0 : 2;
    err = e.what();
  } catch (const InputError& e) {
    exit_code = 2;
    err = e.what();
  }
  return {exit_code, testing::internal::GetCapturedStdout(), err};
}

}  // namespace sdc::goodput
