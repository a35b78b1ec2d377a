// Hostile input through the real binary: numbers, golden files, injections and report paths. Bad
// input is one `sdcprobe: error:` line naming the field, exit 2; nothing is a pass that tested
// nothing; no report path is clobbered.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/mutate.hpp"

namespace {

namespace fs = std::filesystem;
using sdc::fuzz::lines_of;
using sdc::fuzz::ProcessResult;

const std::string kBinary = std::string(SDC_BINARY_DIR) + "/cli/sdcprobe";

class InputCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sdcprobe-input-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ProcessResult sdcprobe(std::vector<std::string> args) const {
    args.insert(args.begin(), kBinary);
    return sdc::fuzz::run_process(args, dir_.string(), 600);
  }
  // Exit 2 with exactly one stderr line: "sdcprobe: error: ..." containing `needle`.
  void expect_input_error(const std::vector<std::string>& args, const std::string& needle) const {
    const ProcessResult r = sdcprobe(args);
    std::string cmd;
    for (const auto& a : args) cmd += " '" + a + "'";
    ASSERT_TRUE(r.exited) << cmd;
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out << r.err;
    const auto lines = lines_of(r.err);
    ASSERT_EQ(lines.size(), 1u) << cmd << "\n" << r.err;
    EXPECT_EQ(lines[0].rfind("sdcprobe: error: ", 0), 0u) << cmd << "\n" << r.err;
    EXPECT_NE(lines[0].find(needle), std::string::npos) << cmd << "\n" << r.err;
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(dir_ / name) << text; }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

const std::vector<std::string> kRun = {"--backend", "cpu", "run", "alu.fma32", "--iterations", "4"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

TEST_F(InputCliTest, SeedsAreDecimalOrHexInRangeAndNothingElse) {
  for (const char* bad : {"-1", "18446744073709551616", "1e26", "077", "", "0x", "12abc"}) {
    expect_input_error(with(kRun, {"--seed", bad}), "--seed: expected a decimal or 0x-hex integer");
  }
  const ProcessResult hex = sdcprobe(with(kRun, {"--seed", "0x10"}));
  EXPECT_EQ(hex.code, 0) << hex.out << hex.err;
  EXPECT_NE(hex.out.find("seed 0x0000000000000010"), std::string::npos) << hex.out;
  const ProcessResult max = sdcprobe(with(kRun, {"--seed", "18446744073709551615"}));
  EXPECT_EQ(max.code, 0) << max.out << max.err;
  EXPECT_NE(max.out.find("seed 0xffffffffffffffff"), std::string::npos) << max.out;
}

// Found by coverage-guided fuzzing: CLI11's size parser read 077 as octal, wrapped -1 and saturated 2^64.
TEST_F(InputCliTest, SizesFollowTheNumberGrammarWithBinarySuffixes) {
  const std::vector<std::string> run = {"--backend", "cpu", "run", "mem.own_address", "--iterations", "1"};
  const std::vector<std::string> record = {"--backend", "cpu", "golden", "record", "--out", path("g.json")};
  const std::vector<std::string> sweep = {"--backend", "cpu", "sweep", "--once", "--state-dir", path("state")};
  for (const auto& command : {run, record, sweep}) {
    for (const char* bad : {"077", "-1", "18446744073709551616", "17179869184G", "1e3", "4KB", "4k", "", "0x", "K"}) {
      expect_input_error(with(command, {"--size", bad}), "--size: expected bytes as a decimal or 0x-hex integer");
    }
    // Fewer than one 8-byte word tests nothing; more than 2^48 is beyond the golden file's range.
    for (const char* small : {"0", "7", "0x7"}) {
      expect_input_error(with(command, {"--size", small}), "--size: must be at least 8 bytes");
    }
    expect_input_error(with(command, {"--size", "262145G"}), "--size: must be at most 281474976710656 bytes");
  }
  EXPECT_FALSE(fs::exists(path("g.json")));
  // K, M and G are binary; hex and decimal give the same run.
  for (const char* size : {"4K", "0x1000", "4096"}) {
    const ProcessResult r = sdcprobe(with(run, {"--size", size, "--seed", "1", "--json", path("out.json")}));
    ASSERT_EQ(r.code, 0) << size << "\n" << r.out << r.err;
    const auto report = nlohmann::json::parse(std::ifstream(path("out.json")));
    EXPECT_EQ(report["results"][0]["params"]["bytes"], 4096) << size << ": " << report["results"][0]["params"];
  }
}

TEST_F(InputCliTest, NanAndNegativeNumbersAreRefused) {
  expect_input_error({"--backend", "cpu", "qualify", "--probe-timeout", "nan"}, "--probe-timeout");
  expect_input_error({"--backend", "cpu", "qualify", "--probe-timeout", "inf"}, "--probe-timeout");
  expect_input_error({"--backend", "cpu", "qualify", "--burn", "nan"}, "--burn");
  expect_input_error({"--backend", "cpu", "qualify", "--burn", "-60"}, "--burn");
  write("log.jsonl", "{\"t\":0,\"event\":\"alloc_granted\"}\n{\"t\":5,\"event\":\"job_end\"}\n");
  expect_input_error({"goodput", path("log.jsonl"), "--gap-threshold", "nan"}, "--gap-threshold");
  expect_input_error({"coverage", "--trials", "-1"}, "--trials");
  expect_input_error({"coverage", "--gemm-n", "100"}, "--gemm-n");
  expect_input_error({"coverage", "--gemm-n", "65536"}, "--gemm-n");
  expect_input_error({"coverage", "--gemm-bounds", "gpu"}, "--gemm-bounds");
  expect_input_error(with(kRun, {"--iterations", "-1"}), "--iterations");
  expect_input_error(with(kRun, {"--iterations", "4294967299"}), "--iterations");
  expect_input_error({"--cpu-devices", "-1", "devices"}, "--cpu-devices");
  expect_input_error({"--backend", "cpu", "sweep", "--once", "--budget", "109500d"}, "--budget");
}

TEST_F(InputCliTest, CliParseErrorsAreOneLineWithThePrefix) {
  expect_input_error({"run"}, "probes is required");
  expect_input_error({"--backend", "gpu", "devices"}, "--backend");
  expect_input_error({"qualify", "--no-such-option"}, "--no-such-option");
}

TEST_F(InputCliTest, AnInjectionThatMatchesNothingIsAnInputError) {
  expect_input_error(with(kRun, {"--inject", "device=99,model=bitflip"}), "field 'device': '99' matches no device");
  expect_input_error(with(kRun, {"--inject", "probe=alu.fam32,model=bitflip"}), "field 'probe'");
  expect_input_error(with(kRun, {"--inject", "model=bitflip;;model=stuck"}), "clause 2 is empty");
  expect_input_error(with(kRun, {"--inject", ""}), "--inject");
  expect_input_error(with(kRun, {"--inject", "model=bitflip,bit=010"}), "field 'bit'");
  // A matching one still injects, and is caught.
  const ProcessResult r = sdcprobe(with(kRun, {"--inject", "device=0,probe=alu.*,model=bitflip,bit=0x3"}));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
}

TEST_F(InputCliTest, GoodputOfADirectorySaysSo) {
  expect_input_error({"goodput", "/"}, "/: cannot read the file: Is a directory");
  expect_input_error({"goodput", dir_.string()}, "Is a directory");
}

// Every reader of an input file words its failures one way: the flag or field, the path, "cannot
// read the file" and the system's reason; exit 2. /proc/self/mem opens, but its first page is not
// mapped: the first read fails with EIO, a real read error.
TEST_F(InputCliTest, EveryReaderWordsAnUnreadableFileOneWay) {
  write("log.jsonl", "{\"t\":0,\"event\":\"alloc_granted\"}\n{\"t\":5,\"event\":\"job_end\"}\n");
  fs::create_directory(dir_ / "adir");
  const std::string sacct = std::string(SDC_SOURCE_DIR) + "/tests/goodput/data/sacct_requeue_22.05.json";
  struct Reader {
    std::string what;
    std::vector<std::string> args;  // "@" is the path
    bool lists_directories;         // a directory is a list of inputs, not an input
  };
  const std::vector<Reader> readers = {
      {"event log", {"goodput", "@"}, false},
      {"event log", {"goodput", path("log.jsonl"), "@"}, false},
      {"--sacct", {"goodput", path("log.jsonl"), "--sacct", "@"}, false},
      {"--sacct", {"fleet", "goodput", "--sacct", "@"}, false},
      {"job summary", {"fleet", "goodput", "--sacct", sacct, "@"}, true},
      {"report", {"fleet", "sdc", "@"}, true},
      {"--golden", {"--backend", "cpu", "qualify", "--golden", "@"}, false},
      {"--seed fleet needs the site secret FLEET_SECRET= in",
       {"/usr/bin/env", "SDCPROBE_DEFAULTS_FILE=@", kBinary, "--backend", "cpu", "run", "alu.fma32", "--seed", "fleet"},
       false},
  };
  const std::vector<std::pair<std::string, std::string>> failures = {
      {path("missing"), "No such file or directory"},
      {path("adir"), "Is a directory"},
      {"/proc/self/mem", "Input/output error"},
  };
  for (const Reader& reader : readers) {
    for (const auto& [file, why] : failures) {
      if (reader.lists_directories && file == path("adir")) continue;
      std::vector<std::string> args;
      for (const std::string& a : reader.args) {
        const size_t at = a.find('@');
        args.push_back(at == std::string::npos ? a : a.substr(0, at) + file);
      }
      if (args[0] != "/usr/bin/env") args.insert(args.begin(), kBinary);
      const ProcessResult r = sdc::fuzz::run_process(args, dir_.string(), 600);
      ASSERT_TRUE(r.exited) << args[1] << " " << file;
      EXPECT_EQ(r.code, 2) << args[1] << " " << file << "\n" << r.err;
      EXPECT_EQ(r.err, "sdcprobe: error: " + reader.what + " " + file + ": cannot read the file: " + why + "\n")
          << args[1] << " " << file;
    }
  }
}

// A FIFO or /dev/stdin on a pipe can be read once: each reader that takes a stream reads it once,
// and reads what a file of the same bytes gives it. A reader that opened it twice would wait for a
// writer that is gone (the timeout ends it) or see it empty.
TEST_F(InputCliTest, FifosAreReadOnceWithTheFilesResult) {
  const ProcessResult simulated = sdcprobe({"simulate", "--out", path("log.jsonl"), "--days", "2", "--seed", "3"});
  ASSERT_EQ(simulated.code, 0) << simulated.err;
  const ProcessResult report = sdcprobe(with(kRun, {"--json", path("report.json")}));
  ASSERT_EQ(report.code, 0) << report.err;
  const std::string data = std::string(SDC_SOURCE_DIR) + "/tests/goodput/data/";
  struct Case {
    std::vector<std::string> inputs;  // each becomes a FIFO fed by its own writer
    std::vector<std::string> args;    // "@N" is input N
  };
  const std::vector<Case> cases = {
      {{path("log.jsonl")}, {"goodput", "@0", "--json"}},
      {{path("log.jsonl")}, {"goodput", "@0"}},
      {{data + "sacct_requeue_events.rank0.jsonl", data + "sacct_requeue_22.05.json"},
       {"goodput", "@0", "--sacct", "@1", "--json"}},
      {{path("report.json")}, {"fleet", "sdc", "@0"}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<std::string> from_files, from_fifos;
    std::string writers;
    for (const std::string& a : cases[c].args) {
      const size_t i = a[0] == '@' ? std::stoul(a.substr(1)) : SIZE_MAX;
      from_files.push_back(i == SIZE_MAX ? a : cases[c].inputs[i]);
      from_fifos.push_back(i == SIZE_MAX ? a : path("fifo" + std::to_string(c) + "." + std::to_string(i)));
    }
    for (size_t i = 0; i < cases[c].inputs.size(); ++i) {
      const std::string fifo = path("fifo" + std::to_string(c) + "." + std::to_string(i));
      ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
      writers += "cat '" + cases[c].inputs[i] + "' > '" + fifo + "' & ";
    }
    const ProcessResult file = sdcprobe(from_files);
    ASSERT_EQ(file.code, 0) << file.err;
    std::string command = writers + kBinary;
    for (const std::string& a : from_fifos) command += " '" + a + "'";
    const ProcessResult fifo =
        sdc::fuzz::run_process({"/bin/sh", "-c", command + "; rc=$?; wait; exit $rc"}, dir_.string(), 30);
    EXPECT_FALSE(fifo.timed_out) << "a FIFO opened twice, or never: " << command;
    if (fifo.timed_out) continue;
    EXPECT_EQ(fifo.code, 0) << command << "\n" << fifo.err;
    EXPECT_EQ(fifo.out, file.out) << command;
  }
  // The same through /dev/stdin on a pipe, and through "-".
  const ProcessResult file = sdcprobe({"goodput", path("log.jsonl"), "--json"});
  for (const char* name : {"/dev/stdin", "-"}) {
    const ProcessResult piped = sdc::fuzz::run_process(
        {"/bin/sh", "-c", "cat log.jsonl | " + kBinary + " goodput " + name + " --json"}, dir_.string(), 30);
    EXPECT_FALSE(piped.timed_out) << name;
    EXPECT_EQ(piped.code, 0) << name << "\n" << piped.err;
    EXPECT_EQ(piped.out, file.out) << name;
  }
}

std::string golden(const std::string& extra) {
  return R"({"format":"sdcprobe-golden","version":2,"seed":1,"level":"quick",)" + extra + R"("entries":[]})";
}

TEST_F(InputCliTest, GoldenValuesGetTheCliRanges) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {golden(R"("iterations":0,)"), "iterations: expected an integer in [1, 1073741824], got 0"},
      {golden(R"("iterations":4294967299,)"), "iterations: expected an integer in [1, 1073741824], got 4294967299"},
      {golden(R"("size_bytes":4,)"), "size_bytes: expected an integer in [8, "},
      {golden(R"("size_bytes":18446744073709551615,)"), "size_bytes: expected an integer in [8, "},
      {R"({"format":5,"version":2,"seed":1,"level":"quick","entries":[]})", "format: must be the string"},
      {R"({"format":"sdcprobe-golden","version":4294967297,"seed":1,"level":"quick","entries":[]})", "version"},
      {R"({"format":"sdcprobe-golden","version":2,"seed":1,"level":"quick","entries":[)"
       R"({"class":"c","probe":"p","digest":"0123456789abcdef0123456789abcdef"},)"
       R"({"class":"c","probe":"p","digest":"0123456789abcdef0123456789abcdee"}]})",
       "entries[1]: a second entry"},
  };
  for (const auto& [text, message] : cases) {
    write("golden.json", text);
    expect_input_error({"--backend", "cpu", "qualify", "--golden", path("golden.json")}, message);
  }
  const ProcessResult r = sdcprobe({"--backend", "cpu", "qualify", "--golden", path("golden.json")});
  EXPECT_EQ(r.err.find("--size"), std::string::npos) << r.err;
}

TEST_F(InputCliTest, ReportsAreWrittenThroughLinksAndIntoFifos) {
  write("real.json", "old");
  fs::create_symlink("real.json", dir_ / "link.json");
  const ProcessResult r = sdcprobe(with(kRun, {"--json", path("link.json")}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  std::ifstream in(dir_ / "real.json");
  EXPECT_EQ(nlohmann::json::parse(in)["mode"], "run");
  // "-" is standard output: the table, then the JSON report.
  const ProcessResult dash = sdcprobe(with(kRun, {"--json", "-"}));
  ASSERT_EQ(dash.code, 0) << dash.err;
  EXPECT_NE(dash.out.find("\"mode\": \"run\""), std::string::npos) << dash.out;
  EXPECT_FALSE(fs::exists(dir_ / "-"));
  // A FIFO is written, not replaced (the reader is a shell in the background).
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  const ProcessResult fifo = sdc::fuzz::run_process(
      {"/bin/sh", "-c",
       "cat fifo > from_fifo.json & " + kBinary + " --backend cpu run alu.fma32 --iterations 4 --json fifo; wait"},
      dir_.string(), 600);
  ASSERT_EQ(fifo.code, 0) << fifo.out << fifo.err;
  struct stat st {};
  ASSERT_EQ(::lstat(path("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  std::ifstream from(dir_ / "from_fifo.json");
  EXPECT_EQ(nlohmann::json::parse(from)["mode"], "run");
}

}  // namespace
