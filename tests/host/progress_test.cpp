// The progress line: its text, and when it is drawn, on a clock the test moves.
#include "host/progress.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace sdc {
namespace {

int64_t fake_now = 0;
int64_t fake_clock() { return fake_now; }

// What has been written to `f` so far.
std::string written(FILE* f) {
  std::fflush(f);
  std::string text(static_cast<size_t>(std::ftell(f)), '\0');
  std::rewind(f);
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fseek(f, 0, SEEK_END);
  return text;
}

TEST(ProgressLine, CountsRateAndTimeLeft) {
  ProgressState s{"fleet sdc", "files", "results", 1000, 450000, 96000, 2.0};
  EXPECT_EQ(progress_line(s), "fleet sdc: 1000/450000 files, 96000 results, 500 files/s, 15 min left");
  s.done = 449000;
  s.elapsed_s = 449;
  EXPECT_EQ(progress_line(s), "fleet sdc: 449000/450000 files, 96000 results, 1000 files/s, 1 s left");
  s.done = 10;
  s.elapsed_s = 10;
  EXPECT_EQ(progress_line(s), "fleet sdc: 10/450000 files, 96000 results, 1.0 files/s, 125.0 h left");
}

TEST(ProgressLine, NoRateInTheFirstIntervalNoTimeLeftWithoutTotalNoItemsUnlessNamed) {
  EXPECT_EQ(progress_line({"coverage", "trials", "", 1, 500, 0, 0.0}), "coverage: 1/500 trials");
  EXPECT_EQ(progress_line({"coverage", "trials", "", 3, 500, 0, 0.249}), "coverage: 3/500 trials");
  EXPECT_EQ(progress_line({"x", "jobs", "log files", 30, 0, 7, 3.0}), "x: 30 jobs, 7 log files, 10 jobs/s");
  // Nothing done yet: a rate of 0 and no time left (it would be infinite).
  EXPECT_EQ(progress_line({"x", "jobs", "", 0, 9, 0, 1.0}), "x: 0/9 jobs, 0.0 jobs/s");
}

TEST(Progress, FirstAddDrawsThenAtMostEveryIntervalThenFinishErases) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  fake_now = 5'000'000'000;
  Progress p("fleet sdc", f, fake_clock);
  p.start("files", 4, "results");
  p.add(1, 10);  // at once: a short run shows where it is too
  EXPECT_EQ(written(f), "\rfleet sdc: 1/4 files, 10 results\x1b[K");
  fake_now += kProgressInterval_ns - 1;
  p.add(1, 10);  // too soon: counted, not drawn
  EXPECT_EQ(written(f), "\rfleet sdc: 1/4 files, 10 results\x1b[K");
  fake_now += 1;
  p.add(1, 5);
  EXPECT_EQ(written(f),
            "\rfleet sdc: 1/4 files, 10 results\x1b[K"
            "\rfleet sdc: 3/4 files, 25 results, 12 files/s, 0 s left\x1b[K");
  const std::string before_finish = written(f);
  p.finish();
  EXPECT_EQ(written(f), before_finish + "\r\x1b[K");
  // After the end no line, however late, until another phase starts.
  fake_now += 10 * kProgressInterval_ns;
  p.add(1, 0);
  p.finish();
  EXPECT_EQ(written(f), before_finish + "\r\x1b[K");
  p.start("jobs", 2);
  p.add(1);
  p.finish();
  EXPECT_EQ(written(f), before_finish + "\r\x1b[K\rfleet sdc: 1/2 jobs\x1b[K\r\x1b[K");
  std::fclose(f);
}

// fleet sdc's and fleet goodput's threads add at once: no count is lost, one line is drawn at a time.
TEST(Progress, ThreadsAddingAtOnceLoseNoCount) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  fake_now = 0;
  Progress p("fleet sdc", f, fake_clock);
  p.start("files", 0, "results");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&p] {
      for (int i = 0; i < 10000; ++i) p.add(1, 3);
    });
  }
  for (auto& t : threads) t.join();
  const std::string first = written(f);
  EXPECT_EQ(first.substr(0, 14), "\rfleet sdc: 1 ") << first;  // the clock stood still: one line
  EXPECT_EQ(first.find('\r', 1), std::string::npos) << first;
  fake_now = kProgressInterval_ns;
  p.add(0);
  EXPECT_EQ(written(f).substr(first.size()), "\rfleet sdc: 40000 files, 120000 results, 160000 files/s\x1b[K");
  p.finish();
  std::fclose(f);
}

TEST(Progress, NothingDrawnNothingErased) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("coverage", f, fake_clock);
    p.start("trials", 0);
    p.finish();
  }
  EXPECT_EQ(written(f), "");
  std::fclose(f);
}

TEST(Progress, WithoutATerminalWritesNothingAndReadsNoClock) {
  Progress p("coverage", nullptr, []() -> int64_t {
    ADD_FAILURE() << "clock read";
    return 0;
  });
  EXPECT_FALSE(p.shown());
  p.start("trials", 3);
  for (int i = 0; i < 3; ++i) p.add(1);
  p.finish();
}

}  // namespace
}  // namespace sdc
