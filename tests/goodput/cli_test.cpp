// The goodput, plan and simulate subcommands, driven through their CLI11 wiring as `sdcprobe` does,
// without the binary.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "goodput/commands.hpp"
#include "host/error.hpp"
#include "tests/goodput/cli_run.hpp"

namespace sdc::goodput {
namespace {

// Parses `args` like cli/main.cpp does, including its mapping of errors to exit code 2.
CliResult run_cli(std::vector<std::string> args) {
  CLI::App app{"test"};
  app.require_subcommand(1);
  int exit_code = 0;
  sdc::cli::add_goodput_commands(app, exit_code);
  return run_cli_app(app, exit_code, args);
}

std::string temp_path(const std::string& name) { return testing::TempDir() + "goodput_cli_" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GoodputCli, SimulateThenGoodputReproducesTheGroundTruth) {
  const std::string log = temp_path("run.jsonl"), truth = temp_path("truth.json"), svg = temp_path("run.svg");
  const CliResult sim = run_cli({"simulate", "--out", log, "--truth", truth, "--days", "3", "--nodes", "512",
                                 "--failure-rate", "0.004", "--sdc-rate", "0.001", "--seed", "3", "--rfc3339", "0.1"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("Ground truth"), std::string::npos);
  const CliResult got = run_cli({"goodput", log, "--json", "--svg", svg});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  const auto j = nlohmann::json::parse(got.out);
  const auto t = nlohmann::json::parse(slurp(truth));
  EXPECT_EQ(j["wall_ns"], t["wall_ns"]);
  EXPECT_EQ(j["productive_ns"], t["productive_ns"]);
  EXPECT_EQ(j["sdc_lost_ns"], t["sdc_lost_ns"]);
  EXPECT_EQ(j["categories"], t["categories"]);
  int64_t sum = j["productive_ns"];
  for (const char* k : {"queue", "detection_teardown", "restart_warmup", "rework", "blocking_overhead"}) {
    sum += j["categories"][k]["ns"].get<int64_t>();
  }
  EXPECT_EQ(sum, j["wall_ns"].get<int64_t>());
  EXPECT_GT(j["sdc_lost_ns"].get<int64_t>(), 0);
  const std::string picture = slurp(svg);
  EXPECT_EQ(picture.rfind("<svg", 0), 0u);
  EXPECT_NE(picture.find("detection &amp; teardown"), std::string::npos);
}

TEST(GoodputCli, TextReportHasTableSdcAndWorkList) {
  const std::string log = temp_path("small.jsonl");
  std::ofstream(log) << "{\"t\":0,\"event\":\"job_eligible\"}\n{\"t\":1000000000,\"event\":\"alloc_granted\"}\n"
                        "{\"t\":3000000000,\"event\":\"step_begin\",\"step\":1}\n"
                        "{\"t\":9000000000,\"event\":\"step_end\",\"step\":1}\n"
                        "{\"t\":9000000000,\"event\":\"probe_begin\"}\n{\"t\":10000000000,\"event\":\"probe_end\"}\n"
                        "{\"t\":10000000000,\"event\":\"job_end\"}\n";
  const CliResult r = run_cli({"goodput", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ETTR): 0.6000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SDC time lost: 1.000s (10.00% of wall"), std::string::npos) << r.out;
  // Ranked: warm-up 2 s, then queue 1 s and blocking overhead 1 s (ties in category order).
  const size_t warm = r.out.find("1. restart & warm-up: 2.000s (20.00%)");
  const size_t queue = r.out.find("2. queue: 1.000s");
  const size_t blocking = r.out.find("3. blocking overhead: 1.000s");
  EXPECT_NE(warm, std::string::npos) << r.out;
  EXPECT_LT(warm, queue);
  EXPECT_LT(queue, blocking);
  EXPECT_NE(r.out.find("owner: launcher"), std::string::npos);
}

TEST(GoodputCli, BadInputExitsTwoNamingTheLine) {
  const std::string log = temp_path("bad.jsonl");
  std::ofstream(log) << "{\"t\":0,\"event\":\"alloc_granted\"}\n{\"t\":10,\"event\":\"step_end\",\"step\":1}\n"
                        "{\"t\":20,\"event\":\"job_end\"}\n";
  const CliResult strict = run_cli({"goodput", log});
  EXPECT_EQ(strict.exit_code, 2);
  EXPECT_EQ(strict.err, "line 2: step_end without step_begin");
  const CliResult lenient = run_cli({"goodput", log, "--lenient", "--json"});
  EXPECT_EQ(lenient.exit_code, 0) << lenient.err;
  EXPECT_EQ(nlohmann::json::parse(lenient.out)["diagnostics"]["skipped_lines"], 1);
  EXPECT_EQ(run_cli({"goodput", temp_path("missing.jsonl")}).exit_code, 2);
  EXPECT_EQ(run_cli({"goodput"}).exit_code, 2);  // the events file is required
}

TEST(GoodputCli, PlanPrintsClosedFormsMonteCarloAndOptima) {
  const CliResult r = run_cli({"plan", "--trials", "8", "--days", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"], 16384);
  EXPECT_NEAR(j["mttf_s"].get<double>() / 3600, 54.0 * 24 / 419, 1e-9);
  EXPECT_GT(j["daly_interval_s"].get<double>(), 0);
  EXPECT_EQ(j["monte_carlo"]["trials"], 8);
  EXPECT_GT(j["monte_carlo"]["mean_ettr"].get<double>(), 0.5);
  EXPECT_GT(j["optimal_probe_interval_s"].get<double>(), 0);
  const CliResult text = run_cli({"plan", "--trials", "4", "--days", "2"});
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("Meta ETTR model (Kokolis et al. 2024)"), std::string::npos);
  EXPECT_NE(text.out.find("Optimal probe interval"), std::string::npos);
  EXPECT_EQ(run_cli({"plan", "--ckpt-interval", "0"}).exit_code, 2);
}

}  // namespace
}  // namespace sdc::goodput
