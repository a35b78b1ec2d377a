// Per-rank files merged into one timeline, and Slurm's accounting (`sacct --json`) merged with a
// loop's log (docs/goodput.md, "Several ranks" and "Slurm accounting").
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "goodput/merge.hpp"
#include "goodput/sacct.hpp"
#include "host/error.hpp"

namespace sdc::goodput {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kS = 1'000'000'000;
const fs::path kData = fs::path(SDC_SOURCE_DIR) / "tests/goodput/data";

class MergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sdcprobe-merge-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // What read_sacct_json says of `text` written to s.json: its error, or "(no error)".
  std::string sacct_error(const std::string& text) {
    try {
      read_sacct_json(write("s.json", text));
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  // One event per line: "T EVENT [STEP]" with T in seconds.
  std::string log(const std::vector<std::string>& lines, const std::string& extra = "") {
    std::string out;
    for (const auto& l : lines) {
      std::istringstream in(l);
      int64_t t = 0;
      std::string event;
      in >> t >> event;
      out += "{\"t\":" + std::to_string(t * kS) + ",\"event\":\"" + event + "\"";
      int64_t step = 0;
      if (in >> step) out += ",\"step\":" + std::to_string(step);
      out += extra + "}\n";
    }
    return out;
  }
  std::string thrown(const std::vector<std::string>& paths, const std::vector<SlurmRecord>* records = nullptr) {
    try {
      analyze_files(paths, {}, false, records, "sacct.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir_;
};

TEST_F(MergeTest, RankOneFaultCountsAndRankZeroDyingStepsAreDropped) {
  const auto r0 = write("events.rank0.jsonl",
                        log({"0 process_start", "0 step_begin 0", "10 step_end 0", "10 step_begin 1", "20 step_end 1",
                             "20 step_begin 2", "30 step_end 2", "30 step_begin 3", "60 fault_detected",
                             "70 process_start", "70 step_begin 3", "80 step_end 3", "80 job_end"}));
  const auto r1 = write("events.rank1.jsonl", log({"0 process_start", "25 fault_detected", "26 step_end 2"}));
  const Breakdown b = analyze_files({r0, r1}).breakdown;
  // Rank 1's fault at 25 stops the job in step 2 (in flight for 5 of the median 10): steps 0-1 are
  // lost too (no checkpoint), 20 + 5 of rework; 25-70 detection & teardown; step 3 at 30 dropped.
  EXPECT_EQ(b.wall_ns, 80 * kS);
  EXPECT_EQ(b[Category::kRework].ns, 25 * kS);
  EXPECT_EQ(b[Category::kDetectionTeardown].ns, 45 * kS);
  EXPECT_EQ(b.productive_ns, 10 * kS);
  // Rank 0 alone: its steps 0-2 kept until its own fault, which finds step 3 in flight.
  const Breakdown alone = analyze_files({r0}).breakdown;
  EXPECT_EQ(alone[Category::kDetectionTeardown].ns, 30 * kS);
}

TEST_F(MergeTest, RanksFromFieldsOrNamesAndTheirErrors) {
  const auto a = write("a.jsonl", log({"0 process_start", "1 job_end"}, ",\"rank\":0"));
  const auto b = write("b.jsonl", log({"0 process_start"}));
  EXPECT_NE(thrown({a, b}).find("b.jsonl: rank unknown"), std::string::npos);
  const auto c = write("events.rank1.jsonl", log({"0 process_start"}, ",\"rank\":2"));
  EXPECT_EQ(analyze_files({a, c}).breakdown.wall_ns, 1 * kS);  // the field wins over the name
  // A later event's rank is not the file's: here rank 0's own sdc_detected names suspect rank 2.
  const auto own = write("own.jsonl", log({"0 process_start", "0 step_begin 0", "10 step_end 0"}, ",\"rank\":0") +
                                          log({"12 sdc_detected"}, ",\"rank\":2") + log({"13 job_end"}));
  const Breakdown sdc = analyze_files({own, c}).breakdown;
  EXPECT_EQ(sdc.wall_ns, 13 * kS);
  EXPECT_EQ(sdc[Category::kRework].ns, 10 * kS);  // the SDC discards step 0: rank 0's own event
  const auto back = write("events.rank3.jsonl", log({"5 fault_detected", "4 fault_detected"}));
  EXPECT_NE(thrown({a, back}).find("events.rank3.jsonl: line 2: time goes backwards"), std::string::npos);
  const auto three = write("events.rank3.x.jsonl", log({"2 fault_detected"}));
  EXPECT_NE(thrown({c, three}).find("no file of rank 0"), std::string::npos);
  // The same file twice is read once; a pattern that matches nothing is an error.
  EXPECT_EQ(expand_event_paths({a, (dir_ / "." / "a.jsonl").string()}).size(), 1u);
  EXPECT_EQ(expand_event_paths({(dir_ / "events.rank*.jsonl").string()}).size(), 3u);
  EXPECT_THROW(expand_event_paths({(dir_ / "none*.jsonl").string()}), InputError);
}

// The files are read once: rank 0's streamed, the others' faults held. Neither the order they are
// given in nor a rank 0 log split over two files changes the timeline; with several bad files, the
// first given reports its error, as when every file was read whole before the merge.
TEST_F(MergeTest, OnePassMergeIsTheSameInAnyOrder) {
  const std::vector<std::string> lines = {
      "0 process_start",  "0 step_begin 0",    "10 step_end 0",    "10 ckpt_begin 0",
      "12 ckpt_end 0",    "12 ckpt_commit 0",  "12 step_begin 1",  "20 step_end 1",
      "20 step_begin 2",  "60 fault_detected", "70 process_start", "70 restore_begin",
      "75 restore_end 0", "75 step_begin 1",   "85 step_end 1",    "85 job_end"};
  const auto r0 = write("events.rank0.jsonl", log(lines));
  const auto r1 = write("events.rank1.jsonl", log({"0 process_start", "5 step_begin 0", "25 fault_detected"}));
  const auto r2 = write("events.rank2.jsonl", log({"0 process_start", "26 fault_detected", "86 step_end 9"}));
  const Analysis given = analyze_files({r0, r1, r2});
  EXPECT_EQ(given.breakdown.wall_ns, 85 * kS);
  // Rank 1's fault at 25 stops the job, not rank 0's own at 60: 25-70 is detection & teardown; rank
  // 2's at 26 is the same incident.
  EXPECT_EQ(given.breakdown[Category::kDetectionTeardown].ns, 45 * kS);
  // Alone, rank 0's fault at 60 finds step 2 hung since 20: rework for the median step (8 s), then
  // detection & teardown to 70.
  EXPECT_EQ(analyze_files({r0}).breakdown[Category::kDetectionTeardown].ns, 42 * kS);
  for (const std::vector<std::string>& order : {std::vector<std::string>{r2, r1, r0}, {r1, r0, r2}}) {
    const Analysis a = analyze_files(order);
    EXPECT_TRUE(a.breakdown.same_labels(given.breakdown));
    EXPECT_EQ(a.breakdown.rollbacks, given.breakdown.rollbacks);
    EXPECT_EQ(a.stats.events, given.stats.events);
  }
  // Rank 0's log in two files, before and after the fault: one is held whole, and merged by time.
  const std::vector<std::string> before(lines.begin(), lines.begin() + 9), after(lines.begin() + 9, lines.end());
  const auto a = write("a.jsonl", log(before, ",\"rank\":0")), b = write("b.jsonl", log(after, ",\"rank\":0"));
  for (const std::vector<std::string>& order : {std::vector<std::string>{a, b, r1, r2}, {r2, b, r1, a}}) {
    EXPECT_TRUE(analyze_files(order).breakdown.same_labels(given.breakdown));
  }

  const auto bad0 = write("bad.rank0.jsonl", log({"0 process_start", "1 step_begin 0"}) + "{\n");
  const auto bad1 = write("bad.rank1.jsonl", "x\n");
  EXPECT_EQ(thrown({bad0, bad1}), bad0 + ": line 3: not valid JSON");
  EXPECT_EQ(thrown({bad1, bad0}), bad1 + ": line 1: not valid JSON");
}

TEST_F(MergeTest, RealSacctRecordsOfARequeuedJob) {
  // Slurm 22.05's `sacct -j 1 --duplicates --json` for a job requeued while running, trimmed to
  // the fields read, and the job's own GoodputLog; both from deploy.slurm_sacct_real's setup.
  const auto records = read_sacct_json((kData / "sacct_requeue_22.05.json").string());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].eligible_s, 1796100245);
  EXPECT_EQ(records[0].start_s, 1796100245);
  EXPECT_EQ(records[0].end_s, 1796100246);
  EXPECT_EQ(records[1].start_s, 1796100272);
  const Analysis a =
      analyze_files({(kData / "sacct_requeue_events.rank0.jsonl").string()}, {}, false, &records, "sacct.json");
  // Queue by hand: Start1 - Eligible1 = 0, then from the first allocation's release to Start2.
  // Slurm's End1 (1796100246 s) is cut to whole seconds; the loop's last event of that allocation
  // (its step 3 begin, 1796100246.128768320) lies in that second, so the release is there.
  EXPECT_EQ(a.breakdown[Category::kQueue].ns, 1796100272 * kS - 1796100246128768320);
  // The wall runs from Eligible1 to the later of End2 and the loop's last event before its job_end
  // (step 4's end), which the scheduler's End replaces.
  EXPECT_EQ(a.breakdown.wall_ns, 1796100272708556994 - 1796100245 * kS);
}

TEST_F(MergeTest, SacctPlacementAndErrors) {
  const std::vector<SlurmRecord> records = {{100, 110, 200}, {205, 230, 300}};
  const auto loop =
      write("events.rank0.jsonl", log({"112 process_start", "115 step_begin 0", "125 step_end 0", "125 step_begin 1",
                                       "232 process_start", "240 step_begin 1", "250 step_end 1", "250 job_end"}));
  std::vector<std::string> paths = {loop};
  const Breakdown b = analyze_files(paths, {}, false, &records, "sacct.json").breakdown;
  // Queue: 100-110 and 200-230 (the first allocation ends in step 1: rework 125-135, detection &
  // teardown 135-200); the wall ends at the last End (300), not the loop's job_end at 250.
  EXPECT_EQ(b[Category::kQueue].ns, 40 * kS);
  EXPECT_EQ(b.wall_ns, 200 * kS);
  EXPECT_EQ(b[Category::kRework].ns, 10 * kS);
  EXPECT_EQ(b[Category::kDetectionTeardown].ns, 65 * kS);
  // Past End by more than its second and Slurm's default KillWait (30 s), before the next Start.
  const std::vector<SlurmRecord> apart = {{100, 110, 200}, {205, 300, 400}};
  const auto outside = write("late.rank0.jsonl", log({"112 process_start", "231 step_begin 0"}));
  EXPECT_NE(thrown({outside}, &apart).find("late.rank0.jsonl: line 2: time 231000000000 ns lies outside"),
            std::string::npos);
  // The largest End read is placed without overflow: an event inside the allocation belongs to it.
  const std::vector<SlurmRecord> last_second = {{100, 110, 9223372035}};
  EXPECT_EQ(thrown({loop}, &last_second), "(no error)");
  // An event made from a sacct record is named by that record, not by a "line 0".
  const auto ended = write("ended.rank0.jsonl", log({"112 process_start", "115 job_end"}));
  // (The loop's job_end stays while the last record is still running.)
  const std::vector<SlurmRecord> two = {{100, 110, 120, 1}, {125, 130, 0, 2}};
  EXPECT_EQ(thrown({ended}, &two), "sacct.json: jobs[1]: alloc_released after job_end");
  const std::vector<SlurmRecord> open_ended = {{100, 110, 0}};
  EXPECT_EQ(analyze_files(paths, {}, false, &open_ended, "sacct.json").breakdown.wall_ns, 150 * kS);
}

// A fault in the last second of an allocation requeued within that second: the 1 s rule puts it in
// the next record; the attempt's slurm_restart keeps it in its own, and the gap between them is queue.
TEST_F(MergeTest, SlurmRestartPlacesAFastRequeuesFaultInItsRecord) {
  const std::vector<SlurmRecord> records = {{100, 110, 200}, {201, 201, 300}};
  auto run = [&](const std::string& name, const std::string& first, const std::string& second) {
    const auto path = write(
        name, log({"112 process_start"}, first) +
                  log({"115 step_begin 0", "150 step_end 0", "150 step_begin 1", "200 fault_detected"}) +
                  log({"202 process_start"}, second) + log({"205 step_begin 1", "210 step_end 1", "210 job_end"}));
    std::vector<std::string> paths = {path};
    return analyze_files(paths, {}, false, &records, "sacct.json").breakdown;
  };
  const Breakdown with = run("with.rank0.jsonl", ",\"slurm_restart\":0", ",\"slurm_restart\":1");
  const Breakdown without = run("without.rank0.jsonl", "", "");
  EXPECT_EQ(with[Category::kQueue].ns, 11 * kS);                       // 100-110, then 200-201 between the records
  EXPECT_NE(without[Category::kQueue].ns, with[Category::kQueue].ns);  // the 1 s rule moves the fault
  for (const Breakdown* b : {&with, &without}) {
    EXPECT_TRUE(b->balanced());
    EXPECT_EQ(b->wall_ns, 200 * kS);
  }
  // Requeued within the same second: Start (cut down) is before the fault; the next allocation is
  // taken to start at the fault's release, with no queue between them.
  const std::vector<SlurmRecord> same_second = {{100, 110, 200}, {200, 200, 300}};
  const auto fast =
      write("fast.rank0.jsonl",
            log({"112 process_start"}, ",\"slurm_restart\":0") +
                log({"115 step_begin 0", "150 step_end 0", "150 step_begin 1", "185 step_end 1", "185 step_begin 2"}) +
                "{\"t\":" + std::to_string(200 * kS + kS / 2) + ",\"event\":\"fault_detected\"}\n" +
                log({"201 process_start"}, ",\"slurm_restart\":1") + log({"205 step_begin 0", "210 job_end"}));
  const Breakdown b = analyze_files({fast}, {}, false, &same_second, "sacct.json").breakdown;
  EXPECT_EQ(b[Category::kQueue].ns, 10 * kS);
  EXPECT_EQ(b[Category::kRestartWarmup].ns, 10 * kS - kS / 2);  // 110-115, then 200.5-205 in allocation 2
  EXPECT_EQ(b[Category::kDetectionTeardown].ns, 0);             // step 2 was cut short, not hung
  EXPECT_TRUE(b.balanced());
  EXPECT_EQ(b.wall_ns, 200 * kS);
  // A record the job does not have is an error naming the line.
  const auto past = write("past.rank0.jsonl", log({"112 process_start"}, ",\"slurm_restart\":2"));
  EXPECT_NE(thrown({past}, &records).find("past.rank0.jsonl: line 1: slurm_restart 2 names no record"),
            std::string::npos);
}

// Slurm's End is when it requeued the job; the job's processes then log their teardown (here a
// checkpoint on SIGTERM taking 12 s) until they exit, at most KillWait later. That teardown is
// the record's own, by slurm_restart and by the 1 s rule alike: the allocation is released after
// it, and only the wait from there to the next Start is queue.
TEST_F(MergeTest, TheTeardownAfterSlurmsEndBelongsToItsRecord) {
  const std::vector<SlurmRecord> records = {{100, 110, 200}, {205, 260, 300}};
  auto run = [&](const std::string& name, const std::string& first, const std::string& second) {
    const auto path = write(
        name, log({"112 process_start"}, first) +
                  log({"115 step_begin 0", "150 step_end 0", "150 step_begin 1", "200 fault_detected",
                       "201 ckpt_begin 1", "212 ckpt_end 1", "212 teardown_end"}) +
                  log({"262 process_start"}, second) + log({"265 step_begin 1", "290 step_end 1", "290 job_end"}));
    return analyze_files({path}, {}, false, &records, "sacct.json").breakdown;
  };
  const Breakdown with = run("with.rank0.jsonl", ",\"slurm_restart\":0", ",\"slurm_restart\":1");
  const Breakdown without = run("without.rank0.jsonl", "", "");
  for (const Breakdown* b : {&with, &without}) {
    EXPECT_TRUE(b->balanced());
    EXPECT_EQ(b->wall_ns, 200 * kS);
    EXPECT_EQ((*b)[Category::kQueue].ns, 10 * kS + 48 * kS);  // 100-110, then 212-260
  }
  EXPECT_EQ(with[Category::kQueue].ns, without[Category::kQueue].ns);
}

TEST_F(MergeTest, SacctJsonIsCheckedField_ByField) {
  EXPECT_NE(sacct_error("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(sacct_error("{\"jobs\":{}}").find("no \"jobs\" array"), std::string::npos);
  EXPECT_NE(sacct_error("{\"jobs\":[]}").find("no job records"), std::string::npos);
  const std::string t = "\"time\":{\"eligible\":1,\"start\":2,\"end\":3}";
  EXPECT_NE(
      sacct_error("{\"jobs\":[{\"job_id\":1," + t + "},{\"job_id\":2," + t + "}]}").find("jobs[1]: job 2 after job 1"),
      std::string::npos);
  EXPECT_NE(sacct_error("{\"jobs\":[{\"job_id\":1,\"time\":{\"eligible\":1,\"start\":\"2\",\"end\":3}}]}")
                .find("jobs[0].time.start must be an integer"),
            std::string::npos);
  EXPECT_NE(sacct_error("{\"jobs\":[{\"job_id\":1,\"time\":{\"eligible\":1,\"start\":5,\"end\":3}}]}")
                .find("end before start"),
            std::string::npos);
  EXPECT_NE(
      sacct_error("{\"jobs\":[{\"job_id\":1,\"time\":{\"eligible\":-1,\"start\":5,\"end\":6}}]}").find("out of range"),
      std::string::npos);
  EXPECT_NE(sacct_error("{\"jobs\":[{\"job_id\":1," + t +
                        "},{\"job_id\":1,\"time\":{\"eligible\":1,\"start\":2,\"end\":4}}]}")
                .find("overlap"),
            std::string::npos);
  // Found by coverage-guided fuzzing: an End whose + 1 s overflowed nanoseconds in the merge, and
  // job ids that skipped the one-job check.
  EXPECT_NE(sacct_error("{\"jobs\":[{\"job_id\":1,\"time\":{\"eligible\":1,\"start\":5,\"end\":9223372036}}]}")
                .find("jobs[0].time.end 9223372036 is out of range (0 to 9223372035 Unix seconds)"),
            std::string::npos);
  for (const std::string id : {"-1", "1.5", "\"1\""}) {
    EXPECT_NE(sacct_error("{\"jobs\":[{\"job_id\":" + id + "," + t + "},{\"job_id\":2," + t + "}]}")
                  .find("jobs[0].job_id is missing or not a non-negative integer"),
              std::string::npos)
        << id;
  }
  for (const std::string id : {"0", "9223372036854775808"}) {
    EXPECT_NE(sacct_error("{\"jobs\":[{\"job_id\":" + id + "," + t + "},{\"job_id\":2," + t + "}]}")
                  .find("jobs[1]: job 2 after job " + id),
              std::string::npos)
        << id;
  }
  // Later Slurm versions write times as {"set": true, "number": N}; an unset end is a running job.
  const auto records = read_sacct_json(write(
      "n.json",
      "{\"jobs\":[{\"job_id\":7,\"time\":{\"eligible\":{\"set\":true,\"infinite\":false,\"number\":10},\"start\":"
      "{\"set\":true,\"infinite\":false,\"number\":12},\"end\":{\"set\":false,\"infinite\":false,\"number\":0}}}]}"));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].eligible_s, 10);
  EXPECT_EQ(records[0].start_s, 12);
  EXPECT_EQ(records[0].end_s, 0);
}

// sacct's JSON is cut into its records and each is parsed alone: strings and keys that look like
// structure, members around "jobs" (checked, then dropped) and the file's end are all read as JSON.
TEST_F(MergeTest, SacctJsonIsReadOneRecordAtATime) {
  const std::string t = "\"time\":{\"eligible\":1,\"start\":2,\"end\":3}";
  const std::string tricky = "\"name\":\"a]}\\\"{[,\"";  // "a]}\"{[," inside a string
  const auto records = read_sacct_json(write(
      "ok.json", " {\"meta\": {\"jobs\": 5, \"x\": [\"]\"]}, \"jo\\u0062s\" :\n [ {\"job_id\":1," + tricky + "," + t +
                     "} ,\r\n {\"job_id\":1,\"time\":{\"eligible\":3,\"start\":4,\"end\":6}}], \"errors\": [], \"n\": "
                     "-1.5e3 }\n"));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].start_s, 2);
  EXPECT_EQ(records[1].job_index, 1u);
  EXPECT_EQ(records[1].end_s, 6);

  const std::string path = (dir_ / "s.json").string();
  const std::string job = "{\"job_id\":1," + t + "}";
  const std::string not_json = path + ": not valid JSON (expected `sacct --json` output)";
  EXPECT_EQ(sacct_error(""), not_json);
  EXPECT_EQ(sacct_error("{\"jobs\":[" + job + "]} x"), not_json);
  EXPECT_EQ(sacct_error("{\"jobs\":[" + job + "]"), not_json);
  EXPECT_EQ(sacct_error("{\"jobs\":[" + job + " " + job + "]}"), not_json);
  EXPECT_EQ(sacct_error("{\"meta\":{\"a\":tru},\"jobs\":[" + job + "]}"), not_json);
  EXPECT_EQ(sacct_error("{\"jobs\":[" + job + "],}"), not_json);
  EXPECT_EQ(sacct_error("{\"jobs\":[" + job + ",{\"job_id\":1,]}"), path + ": jobs[1]: not valid JSON");
  EXPECT_EQ(sacct_error("{\"jobs\":[" + job + ",]}"), path + ": jobs[1]: not valid JSON");
  const std::string no_jobs = path + ": no \"jobs\" array (expected `sacct --json` output)";
  EXPECT_EQ(sacct_error("[" + job + "]"), no_jobs);
  EXPECT_EQ(sacct_error("{\"meta\":{\"jobs\":[" + job + "]}}"), no_jobs);
  EXPECT_EQ(sacct_error("{\"jobs\":null}"), no_jobs);
  EXPECT_EQ(sacct_error("{\"jobs\":[" + job + "],\"jobs\":[]}"), path + ": two \"jobs\" arrays");
  // One record is held at a time, up to a bound: a longer one is refused by its place.
  EXPECT_EQ(
      sacct_error("{\"jobs\":[" + job + ",{\"job_id\":1,\"name\":\"" + std::string((64 << 20) + 1, 'x') + "\"}]}"),
      path + ": jobs[1] is longer than 64 MiB");
}

}  // namespace
}  // namespace sdc::goodput
