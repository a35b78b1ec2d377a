// `sdcprobe hang` on the dumps that tests/goodput/data/flight_recorder/record.py recorded from real
// torch 2.15 gloo jobs: each scenario names exactly the rank of its expected.json, or cannot decide.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "goodput/flight_recorder.hpp"
#include "goodput/hang_attribution.hpp"
#include "goodput/hang_command.hpp"
#include "goodput/run_hangs.hpp"
#include "host/error.hpp"

namespace sdc::goodput {
namespace {

const std::string kData = std::string(SDC_SOURCE_DIR) + "/tests/goodput/data/flight_recorder/";

std::set<int> ranks_of(const std::vector<HangRank>& ranks) {
  std::set<int> s;
  for (const HangRank& r : ranks) s.insert(r.rank);
  return s;
}

class HangScenario : public testing::TestWithParam<const char*> {};

TEST_P(HangScenario, NamesTheExpectedRanks) {
  const std::string dir = kData + GetParam();
  std::ifstream in(dir + "/expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  const HangReport report = attribute_hang(read_fr_dumps(dir));

  EXPECT_EQ(verdict_name(report.verdict), expected["verdict"].get<std::string>());
  EXPECT_EQ(report.world_size, expected["world_size"].get<int>());
  EXPECT_EQ(ranks_of(report.culprits), expected["culprits"].get<std::set<int>>());
  // The only ranks left undecided are those without a dump.
  EXPECT_EQ(ranks_of(report.undecided), expected["no_dump"].get<std::set<int>>());
  for (const HangRank& r : report.undecided) EXPECT_EQ(r.why.rfind("no dump", 0), 0u) << r.why;
  if (expected.contains("seq")) {
    // Where: the first collective the culprit never enqueued, or the one whose sizes differ.
    const std::string group = expected["group"];
    const int64_t seq = expected["seq"];
    const int culprit = expected["culprits"][0];
    bool found = false;
    for (const HangGroup& g : report.groups) {
      found |=
          g.group == group && g.first_incomplete == seq && std::count(g.missing.begin(), g.missing.end(), culprit) == 1;
    }
    for (const HangMismatch& m : report.mismatches) {
      found |= m.group == group && m.seq == seq && m.odd == std::vector<int>{culprit};
    }
    EXPECT_TRUE(found) << hang_report_json(report).dump(1);
  }
}

INSTANTIATE_TEST_SUITE_P(Recorded, HangScenario,
                         testing::Values("clean", "stop", "stop_json", "sleep_in_step", "two_stuck", "killed",
                                         "sizes_differ", "skip", "mesh_stop"));

TEST(Hang, CleanJobNamesNoGroupAndNoMismatch) {
  const HangReport report = attribute_hang(read_fr_dumps(kData + "clean"));
  EXPECT_TRUE(report.groups.empty());
  EXPECT_TRUE(report.mismatches.empty());
  EXPECT_EQ(report.dumped, (std::vector<int>{0, 1, 2, 3}));
}

// Rank 3 stops before its tensor-parallel all-reduce: rank 2 waits in that group, ranks 0 and 1
// in their data-parallel groups behind rank 2 and rank 3. Only rank 3 blocks.
TEST(Hang, NestedGroupsBlameTheRankThatBlocksTheEarliestGroup) {
  const HangReport report = attribute_hang(read_fr_dumps(kData + "mesh_stop"));
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].rank, 3);
  std::map<std::string, std::vector<int>> missing;
  for (const HangGroup& g : report.groups) missing[g.group] = g.missing;
  EXPECT_EQ(missing["2"], std::vector<int>{3});  // tensor-parallel {2, 3}
  EXPECT_EQ(missing["3"], std::vector<int>{2});  // data-parallel {0, 2}: rank 2 waits behind rank 3
  EXPECT_EQ(missing["4"], std::vector<int>{3});  // data-parallel {1, 3}
}

TEST(Hang, SizesThatDifferNameTheOddRankAndTheField) {
  const HangReport report = attribute_hang(read_fr_dumps(kData + "sizes_differ"));
  ASSERT_EQ(report.mismatches.size(), 1u);
  const HangMismatch& m = report.mismatches[0];
  EXPECT_EQ(m.field, "input_sizes");
  EXPECT_EQ(m.seq, 4);
  EXPECT_EQ(m.odd, std::vector<int>{2});
  EXPECT_EQ(m.odd_value, "[[8]]");
  EXPECT_EQ(m.common_value, "[[4]]");
}

TEST(Hang, KilledRankCannotBeDecidedAndSaysWhoWaits) {
  const HangReport report = attribute_hang(read_fr_dumps(kData + "killed"));
  ASSERT_EQ(report.undecided.size(), 1u);
  EXPECT_EQ(report.undecided[0].why,
            "no dump: ranks 0-2 may be waiting for it in collective 6 of process group 0 (default_pg)");
}

TEST(Hang, JsonAndPickleFormsReadTheSame) {
  const std::vector<FrDump> pickled = read_fr_dumps(kData + "stop");
  const std::vector<FrDump> json = read_fr_dumps(kData + "stop_json");
  ASSERT_EQ(pickled.size(), json.size());
  for (size_t r = 0; r < pickled.size(); ++r) {
    EXPECT_EQ(pickled[r].version, json[r].version);
    EXPECT_EQ(pickled[r].last_enqueued, json[r].last_enqueued);
    ASSERT_EQ(pickled[r].entries.size(), json[r].entries.size());
    for (size_t k = 0; k < pickled[r].entries.size(); ++k) {
      EXPECT_EQ(pickled[r].entries[k].seq, json[r].entries[k].seq);
      EXPECT_EQ(pickled[r].entries[k].input_sizes, json[r].entries[k].input_sizes);
      EXPECT_EQ(pickled[r].entries[k].created_ns, json[r].entries[k].created_ns);
    }
  }
  EXPECT_EQ(hang_report_json(attribute_hang(pickled)), hang_report_json(attribute_hang(json)));
}

TEST(Hang, ReadsTheFieldsOfGlooDump) {
  const FrDump d = read_fr_dump(kData + "stop/nccl_trace_rank_2", 2);
  EXPECT_EQ(d.version, "2.10");
  EXPECT_EQ(d.comm_lib_version, "");
  ASSERT_EQ(d.entries.size(), 5u);
  EXPECT_EQ(d.last_enqueued.at("0"), 5);
  const FrEntry& e = d.entries.back();
  EXPECT_EQ(e.group, "0");
  EXPECT_EQ(e.group_desc, "default_pg");
  EXPECT_EQ(e.seq, 5);
  EXPECT_EQ(e.op, "all_reduce");
  EXPECT_EQ(e.input_sizes, "[[4]]");
  EXPECT_EQ(e.input_dtypes, "[\"Float\"]");
  EXPECT_EQ(e.timeout_ms, 3000);
  EXPECT_GT(e.created_ns, 1'700'000'000'000'000'000);
  EXPECT_TRUE(d.config_ranks.empty());  // gloo's pg_config entry "" is not trusted
  EXPECT_EQ(d.largest_rank_named, 3);
}

// Rank 1 was killed: rank 0 went on to collective 38, rank 2 failed inside 37 (rank 1 died before
// sending it the rest). Rank 2 is behind, but may be waiting for rank 1: not named (seen under
// torchrun, python_torch2_goodput_torchrun).
TEST(Hang, ARankBehindBesideAMissingDumpIsNotNamed) {
  auto dump = [](int rank, int64_t last) {
    FrDump d;
    d.path = "rank" + std::to_string(rank);
    d.rank = rank;
    for (int64_t seq = 1; seq <= last; ++seq) {
      FrEntry e;
      e.group = "0";
      e.group_desc = "default_pg";
      e.seq = seq;
      e.op = "all_reduce";
      d.entries.push_back(e);
    }
    d.last_enqueued["0"] = last;
    return d;
  };
  const HangReport report = attribute_hang({dump(0, 38), dump(2, 37)}, 3);
  EXPECT_EQ(report.verdict, HangReport::Verdict::kCannotDecide);
  EXPECT_TRUE(report.culprits.empty());
  ASSERT_EQ(report.undecided.size(), 2u);
  EXPECT_EQ(report.undecided[0].rank, 1);
  EXPECT_EQ(report.undecided[0].why,
            "no dump: ranks 0, 2 may be waiting for it in collectives 37 to 38 of process group 0 (default_pg)");
  EXPECT_EQ(report.undecided[1].rank, 2);
  EXPECT_EQ(report.undecided[1].why,
            "never enqueued collective 38 (all_reduce) of process group 0 (default_pg), which rank 0 enqueued, but it "
            "may be waiting for rank 1, whose dump is missing");
}

// Two ranks each waiting for the other in a different group: no rank is named.
TEST(Hang, RanksWaitingForEachOtherCannotBeDecided) {
  auto dump = [](int rank, std::vector<FrEntry> entries) {
    FrDump d;
    d.path = "rank" + std::to_string(rank);
    d.rank = rank;
    for (FrEntry& e : entries) d.last_enqueued[e.group] = std::max(d.last_enqueued[e.group], e.seq);
    d.entries = std::move(entries);
    return d;
  };
  auto entry = [](const char* group, int64_t seq) {
    FrEntry e;
    e.group = group;
    e.seq = seq;
    e.op = "all_reduce";
    return e;
  };
  // Rank 0 entered group A's second collective, rank 1 group B's: each waits for the other.
  const HangReport report = attribute_hang(
      {dump(0, {entry("A", 1), entry("B", 1), entry("A", 2)}), dump(1, {entry("A", 1), entry("B", 1), entry("B", 2)})},
      2);
  EXPECT_EQ(report.verdict, HangReport::Verdict::kCannotDecide);
  EXPECT_TRUE(report.culprits.empty());
  ASSERT_EQ(report.undecided.size(), 2u);
  EXPECT_NE(report.undecided[0].why.find("wait for each other"), std::string::npos) << report.undecided[0].why;
}

// A world of 4,096 ranks in one group, rank 17 behind: named, with the others as a range.
TEST(Hang, ThousandsOfRanksStayLinearAndShort) {
  std::vector<FrDump> dumps(4096);
  for (int r = 0; r < 4096; ++r) {
    dumps[r].path = "rank" + std::to_string(r);
    dumps[r].rank = r;
    for (int64_t seq = 1; seq <= (r == 17 ? 9 : 10); ++seq) {
      FrEntry e;
      e.group = "0";
      e.group_desc = "default_pg";
      e.seq = seq;
      e.op = "all_reduce";
      dumps[r].entries.push_back(e);
    }
    dumps[r].last_enqueued["0"] = r == 17 ? 9 : 10;
  }
  const HangReport report = attribute_hang(dumps);
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].rank, 17);
  EXPECT_EQ(report.culprits[0].why,
            "never enqueued collective 10 (all_reduce) of process group 0 (default_pg), which ranks 0-16, 18-4095 "
            "enqueued; it waits in no collective");
}

// sdcprobe goodput finds the dumps GoodputLog wrote beside the logs, each culprit's host and GPU in
// its process_start of that attempt, and the attempt's detection & teardown from the ledger.
TEST(Hang, RunHangsBesideTheEventLogs) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "run_hangs";
  fs::remove_all(dir);
  fs::create_directories(dir / "flight_recorder");
  fs::copy(kData + "stop", dir / "flight_recorder" / "attempt0");
  fs::copy(kData + "stop", dir / "flight_recorder" / "requeue1.attempt0");
  fs::create_directories(dir / "flight_recorder" / "attempt1");
  for (const char* f : {"nccl_trace_rank_0", "nccl_trace_rank_1", "nccl_trace_rank_2", "nccl_trace_rank_3"}) {
    fs::copy(kData + "clean/" + f, dir / "flight_recorder" / "attempt1" / f);
  }
  std::vector<std::string> logs;
  for (int r = 0; r < 4; ++r) {
    logs.push_back((dir / ("events.rank" + std::to_string(r) + ".jsonl")).string());
    // Rank 2 runs on node2's GPU in attempt 0, and on node9's after Slurm's requeue.
    std::ofstream(logs.back()) << "{\"t\":1,\"event\":\"process_start\",\"rank\":" << r
                               << ",\"attempt\":0,\"host\":\"node" << r << "\",\"device\":\"GPU-" << r
                               << "\",\"pci_bus_id\":\"00000000:1" << r << ":00.0\"}\n"
                               << "{\"t\":2,\"event\":\"process_start\",\"rank\":" << r
                               << ",\"attempt\":0,\"slurm_restart\":1,\"host\":\"node" << r + 7
                               << "\",\"device\":\"cpu\"}\n";
  }
  const std::vector<RankStart> starts = read_rank_starts(logs);
  ASSERT_EQ(starts.size(), 8u);
  const std::vector<AttemptLoss> attempts = {{-1, 0, 3'100'000'000, 10'050'000'000}, {1, 0, 7, 8}};
  const std::vector<RunHang> hangs = find_run_hangs(logs, starts, attempts);
  ASSERT_EQ(hangs.size(), 3u);
  EXPECT_EQ(hangs[0].report.verdict, HangReport::Verdict::kCulprit);
  ASSERT_EQ(hangs[0].culprit_places.size(), 1u);
  EXPECT_EQ(place_text(hangs[0].culprit_places[0]), "node2, GPU-2, 00000000:12:00.0");
  EXPECT_EQ(hangs[0].timeout_ms, 3000);
  EXPECT_EQ(hangs[0].loss.detection_ns, 3'100'000'000);
  EXPECT_EQ(hangs[1].report.verdict, HangReport::Verdict::kNoHang);
  EXPECT_EQ(hangs[2].slurm_restart, 1);
  EXPECT_EQ(place_text(hangs[2].culprit_places[0]), "node9, cpu");
  EXPECT_EQ(hangs[2].loss.teardown_ns, 8);
  const nlohmann::ordered_json j = run_hangs_json(hangs);
  EXPECT_EQ(j[0]["cause"], "hang");
  EXPECT_EQ(j[0]["attempt"], 0);
  EXPECT_EQ(j[0]["detection_teardown_ns"], 13'150'000'000);
  EXPECT_EQ(j[0]["waited_ns"], 3'100'000'000);
  EXPECT_EQ(j[0]["teardown_ns"], 10'050'000'000);
  EXPECT_EQ(j[0]["culprits"][0]["rank"], 2);
  EXPECT_EQ(j[0]["culprits"][0]["host"], "node2");
  EXPECT_EQ(j[0]["culprits"][0]["device"], "GPU-2");
  EXPECT_EQ(j[0]["culprits"][0]["pci_bus_id"], "00000000:12:00.0");
  EXPECT_EQ(j[2]["slurm_restart"], 1);
  const std::string text = run_hangs_text(hangs);
  EXPECT_EQ(text.substr(0, text.find('\n') + 1), "Hang (" + (dir / "flight_recorder" / "attempt0").string() +
                                                     ", timeout 3 s): rank 2 on node2 (GPU-2, 00000000:12:00.0)\n");
  EXPECT_NE(text.find("  detection & teardown 13.2 s: 3.1 s waiting from the last progress to the fault, 10.1 s of "
                      "teardown\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 2 on node9 (cpu)\n"), std::string::npos) << text;

  // A dump that cannot be read stops sdcprobe goodput with its error (exit 2), naming it.
  fs::create_directories(dir / "flight_recorder" / "attempt2");
  std::ofstream(dir / "flight_recorder" / "attempt2" / "nccl_trace_rank_0") << "\x80\x02}";
  try {
    find_run_hangs(logs, starts, attempts);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(
        std::string(e.what()).rfind((dir / "flight_recorder" / "attempt2" / "nccl_trace_rank_0").string() + ": ", 0),
        0u)
        << e.what();
  }
}

}  // namespace
}  // namespace sdc::goodput
