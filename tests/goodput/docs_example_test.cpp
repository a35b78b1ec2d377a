// docs/goodput.md's worked example: its log, run through the ledger, gives the numbers worked out by
// hand there, and the JSON shown there.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "goodput/analyze.hpp"
#include "goodput/report.hpp"

namespace sdc::goodput {
namespace {

std::string fenced_block(const std::string& doc, const std::string& language) {
  const std::string open = "```" + language + "\n";
  const size_t begin = doc.find(open);
  if (begin == std::string::npos) return "";
  const size_t end = doc.find("```", begin + open.size());
  return doc.substr(begin + open.size(), end - begin - open.size());
}

TEST(GoodputDocs, WorkedExampleAddsUp) {
  std::ifstream file(std::string(SDC_SOURCE_DIR) + "/docs/goodput.md");
  ASSERT_TRUE(file) << "docs/goodput.md";
  std::stringstream doc;
  doc << file.rdbuf();
  std::istringstream log(fenced_block(doc.str(), "jsonl"));
  const Analysis a = analyze(log);
  const Breakdown& b = a.breakdown;
  constexpr int64_t kMin = 60'000'000'000;
  EXPECT_EQ(b.wall_ns, 138 * kMin);
  EXPECT_EQ(b.productive_ns, 50 * kMin);
  EXPECT_EQ(b[Category::kQueue], (CategoryNs{13 * kMin, 8 * kMin}));
  EXPECT_EQ(b[Category::kRestartWarmup], (CategoryNs{11 * kMin, 5 * kMin}));
  EXPECT_EQ(b[Category::kDetectionTeardown], (CategoryNs{15 * kMin, 8 * kMin}));
  EXPECT_EQ(b[Category::kRework], (CategoryNs{42 * kMin, 32 * kMin}));
  EXPECT_EQ(b[Category::kBlockingOverhead], (CategoryNs{7 * kMin, 2 * kMin}));
  EXPECT_EQ(b.sdc_lost_ns(), 55 * kMin);
  // The JSON shown in the document is what --json prints for this log.
  EXPECT_EQ(nlohmann::json::parse(json_report(a).dump()), nlohmann::json::parse(fenced_block(doc.str(), "json")));
}

}  // namespace
}  // namespace sdc::goodput
