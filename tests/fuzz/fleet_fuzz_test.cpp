// Seeded mutation fuzzing of the fleet report reader: every mutated report is read or refused with
// an InputError naming the file, never a crash, hang or other exception (corpus in fuzz/fleet/).
#include <gtest/gtest.h>

#include "host/error.hpp"
#include "scheduler/fleet/fleet_sdc_analysis.hpp"
#include "scheduler/fleet/fleet_sdc_ingest.hpp"
#include "tests/fuzz/mutate.hpp"

namespace sdc {
namespace {

constexpr uint64_t kSeed = 0xf1ee7;
constexpr int kCases = 3000;

TEST(FleetFuzz, MutatedReportsAreReadOrRefusedNamingTheFile) {
  const std::vector<std::string> corpus = fuzz::read_corpus(SDC_FLEET_CORPUS);
  ASSERT_FALSE(corpus.empty());
  const std::vector<std::string> dictionary = {"\"digest\"", "\"outcome\"", "\"fail\"", "\"skipped\"", "null",
                                               "[]",         "{}",          "-1",       "1e400",       "\"\""};
  fuzz::Mutator mutator(kSeed);
  size_t read = 0, refused = 0;
  for (int c = 0; c < kCases; ++c) {
    const std::string text = mutator.mutate(corpus[mutator.below(corpus.size())], dictionary);
    FleetTally tally;
    try {
      ingest_report_text("case.json", text, tally);
      analyze_fleet(tally, {});
      ++read;
    } catch (const InputError& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).rfind("case.json: ", 0), 0u)
          << "seed " << kSeed << " case " << c << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << kSeed << " case " << c << ": not an InputError: " << e.what();
    }
  }
  // Both kinds of case were exercised: the mutations neither all break nor all miss the parser.
  EXPECT_GT(read, 0u);
  EXPECT_GT(refused, 0u);
}

}  // namespace
}  // namespace sdc
