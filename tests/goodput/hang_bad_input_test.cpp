// Bad input to `sdcprobe hang`: a clear error naming the file, exit 2, never a wrong culprit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "goodput/hang_command.hpp"
#include "host/error.hpp"
#include "tests/goodput/cli_run.hpp"

namespace sdc::goodput {
namespace {

namespace fs = std::filesystem;
const std::string kData = std::string(SDC_SOURCE_DIR) + "/tests/goodput/data/flight_recorder/";

// Parses `args` like cli/main.cpp does, with its mapping of InputError to exit code 2.
CliResult run_hang(std::vector<std::string> args) {
  CLI::App app{"test"};
  int exit_code = 0;
  sdc::cli::add_hang_command(app, exit_code);
  args.insert(args.begin(), "hang");
  return run_cli_app(app, exit_code, args);
}

// A fresh folder holding copies of `files` (paths under kData), each named as its last component.
std::string folder(const std::string& name, const std::vector<std::string>& files) {
  const std::string dir = testing::TempDir() + "hang_bad_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const std::string& f : files) fs::copy_file(kData + f, dir + "/" + fs::path(f).filename().string());
  return dir;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& data) { std::ofstream(path, std::ios::binary) << data; }

void expect_error(const CliResult& r, const std::string& file, const std::string& why) {
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(r.err.rfind(file + ": ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

std::vector<std::string> stop_files() {
  return {"stop/nccl_trace_rank_0", "stop/nccl_trace_rank_1", "stop/nccl_trace_rank_2", "stop/nccl_trace_rank_3"};
}

TEST(HangBadInput, ExitsZeroWithTheReportAndItsJson) {
  const std::string json = testing::TempDir() + "hang_report.json";
  const CliResult r = run_hang({kData + "stop", "--json", json});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hung by rank 2\n"), std::string::npos) << r.out;
  const nlohmann::json report = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(report["verdict"], "culprit");
  EXPECT_EQ(report["culprits"][0]["rank"], 2);
}

// --events: the culprit's host, GPU and PCI bus id from its process_start in the folder's attempt
// (attempt1 here); a bad event log is exit 2 naming its file, line and field.
TEST(HangBadInput, EventsNameWhereTheCulpritRan) {
  const std::string dir = folder("events", {});
  const std::string dumps = dir + "/attempt1";
  fs::create_directories(dumps);
  for (const std::string& f : stop_files()) fs::copy_file(kData + f, dumps + "/" + fs::path(f).filename().string());
  spit(
      dir + "/events.rank2.jsonl",
      R"({"t":1,"event":"process_start","rank":2,"attempt":0,"host":"node3","device":"cpu"})"
      "\n"
      R"({"t":2,"event":"process_start","rank":2,"attempt":1,"host":"node7","device":"GPU-8f2c","pci_bus_id":"00000000:19:00.0"})"
      "\n");
  const std::string json = dir + "/hang.json";
  const CliResult r = run_hang({dumps, "--events", dir + "/events.rank*.jsonl", "--json", json});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  culprit rank 2 (node7, GPU-8f2c, 00000000:19:00.0): never enqueued collective 6"),
            std::string::npos)
      << r.out;
  const nlohmann::json report = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(report["culprits"][0]["host"], "node7");
  EXPECT_EQ(report["culprits"][0]["device"], "GPU-8f2c");
  EXPECT_EQ(report["culprits"][0]["pci_bus_id"], "00000000:19:00.0");

  spit(dir + "/events.rank2.jsonl", R"({"t":1,"event":"process_start","rank":2,"attempt":1,"host":""})"
                                    "\n");
  expect_error(run_hang({dumps, "--events", dir + "/events.rank2.jsonl"}), dir + "/events.rank2.jsonl",
               "line 1: process_start: \"host\" must not be empty");
  expect_error(run_hang({dumps, "--events", dir + "/none.jsonl"}), "event log " + dir + "/none.jsonl",
               "cannot read the file");
}

TEST(HangBadInput, TruncatedPickle) {
  for (size_t keep : {0, 1, 2, 100, 700, 1200}) {
    const std::string dir = folder("truncated", stop_files());
    const std::string file = dir + "/nccl_trace_rank_1";
    spit(file, slurp(file).substr(0, keep));
    expect_error(run_hang({dir}), file,
                 keep == 0   ? "neither a pickle"
                 : keep == 1 ? "not a pickle of protocol 2"
                             : "(truncated?)");
  }
}

TEST(HangBadInput, DumpsOfDifferentJobs) {
  // Rank 3 of another recording, minutes later: its completed collectives were enqueued far apart.
  const std::string dir = folder("jobs", {"stop/nccl_trace_rank_0", "stop/nccl_trace_rank_1", "stop/nccl_trace_rank_2",
                                          "two_stuck/nccl_trace_rank_3"});
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_3", "not a dump of the same job and torch as");
}

TEST(HangBadInput, DumpsOfDifferentVersions) {
  const std::string dir = folder("versions", {"stop_json/nccl_trace_rank_0.json", "stop_json/nccl_trace_rank_1.json"});
  nlohmann::json d = nlohmann::json::parse(slurp(dir + "/nccl_trace_rank_1.json"));
  d["version"] = "2.9";
  spit(dir + "/nccl_trace_rank_1.json", d.dump());
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_1.json", "format version 2.9 against 2.10");
  d["version"] = "1.0";
  spit(dir + "/nccl_trace_rank_1.json", d.dump());
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_1.json", "version: 1.0 is not read (2.x is)");
}

TEST(HangBadInput, RecorderTurnedOff) {
  const std::string dir = folder("off", {"recorder_off/nccl_trace_rank_0"});
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_0", "the recorder was off (TORCH_FR_BUFFER_SIZE=0)");
}

TEST(HangBadInput, NotADump) {
  const std::string dir = folder("not", {});
  spit(dir + "/nccl_trace_rank_0", "rank 0 said nothing\n");
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_0", "neither a pickle (protocol 2 or later) nor JSON");
  spit(dir + "/nccl_trace_rank_0", "{\"entries\": []}");
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_0", "version: missing: not a flight-recorder dump");
  spit(dir + "/nccl_trace_rank_0", "{\"version\": \"2.10\", \"entries\": [");
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_0", "not valid JSON");
}

TEST(HangBadInput, AFieldOfTheWrongType) {
  const std::string dir = folder("field", {"stop_json/nccl_trace_rank_0.json"});
  nlohmann::json d = nlohmann::json::parse(slurp(dir + "/nccl_trace_rank_0.json"));
  d["entries"][2]["collective_seq_id"] = "six";
  spit(dir + "/nccl_trace_rank_0.json", d.dump());
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_0.json", "entries[2].collective_seq_id: must be an integer");
  d["entries"][2].erase("collective_seq_id");
  spit(dir + "/nccl_trace_rank_0.json", d.dump());
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_0.json", "entries[2].collective_seq_id: missing");
}

TEST(HangBadInput, EmptyFolderAndNoFolder) {
  const std::string dir = folder("empty", {});
  spit(dir + "/expected.json", "{}");  // not a dump's name
  expect_error(run_hang({dir}), dir, "no flight-recorder dumps");
  expect_error(run_hang({dir + "/none"}), dir + "/none", "not a folder of flight-recorder dumps");
}

TEST(HangBadInput, RankOutOfRange) {
  std::vector<std::string> files = stop_files();
  const std::string dir = folder("range", files);
  fs::copy_file(dir + "/nccl_trace_rank_3", dir + "/nccl_trace_rank_7");
  expect_error(run_hang({dir, "--world-size", "4"}), dir + "/nccl_trace_rank_7", "rank 7 is outside the job's 4 ranks");
}

TEST(HangBadInput, TwoDumpsOfOneRankOrTwoNamings) {
  const std::string dir = folder("twice", {"stop/nccl_trace_rank_0", "stop_json/nccl_trace_rank_0.json"});
  const CliResult r = run_hang({dir});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("a second dump of rank 0"), std::string::npos) << r.err;
  const std::string names = folder("names", {"stop/nccl_trace_rank_0"});
  fs::copy_file(names + "/nccl_trace_rank_0", names + "/trace_1");
  EXPECT_EQ(run_hang({names}).exit_code, 2);
}

TEST(HangBadInput, PickledObjectsAreRefused) {
  const std::string dir = folder("object", {});
  // pickle.dumps({"version": "2.10", "when": datetime.datetime(2027, 1, 1)}, protocol=2), to its GLOBAL.
  auto str = [](const std::string& v) {
    return 'X' + std::string(1, static_cast<char>(v.size())) + std::string(3, '\0') + v;
  };
  const std::string p =
      std::string("\x80\x02}(", 4) + str("version") + str("2.10") + str("when") + "cdatetime\ndatetime\n";
  spit(dir + "/nccl_trace_rank_0", p);
  expect_error(run_hang({dir}), dir + "/nccl_trace_rank_0", "opcode GLOBAL (0x63) is refused");
}

}  // namespace
}  // namespace sdc::goodput
