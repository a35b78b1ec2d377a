// Seeded mutation fuzzing of the fleet report reader and of the store import's reading of a report:
// every mutated report is read (and imported as whole rows) or refused with an InputError naming the
// file, never a crash, hang or other exception (corpus in fuzz/fleet/).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "fleet/fleet_sdc_analysis.hpp"
#include "fleet/fleet_sdc_ingest.hpp"
#include "fleet/fleet_topology.hpp"
#include "fleet/fleet_aggregates.hpp"
#include "fleet/store_import.hpp"
#include "host/error.hpp"
#include "tests/fuzz/aggregates_case.hpp"
#include "tests/fuzz/mutate.hpp"
#include "tests/fuzz/properties.hpp"

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

// The import reads a report as `fleet sdc` does, then as a run: what it accepts becomes rows with
// every column, one results row per result of the report.
TEST(FleetFuzz, MutatedReportsImportAsWholeRowsOrAreRefusedNamingTheFile) {
  const std::vector<std::string> corpus = fuzz::read_corpus(SDC_FLEET_CORPUS);
  ASSERT_FALSE(corpus.empty());
  const std::vector<std::string> dictionary = {
      "\"mode\"", "\"level\"", "\"samples\"", "\"wrong_results\"", "\"injections\"", "null", "[]", "{}",
      "-1",       "1e400",     "\"\""};
  fuzz::Mutator mutator(kSeed);
  size_t imported = 0, refused = 0;
  for (int c = 0; c < kCases; ++c) {
    const std::string text = mutator.mutate(corpus[mutator.below(corpus.size())], dictionary);
    try {
      for (const StoreFile& f : report_store_files("case.json", text)) {
        EXPECT_FALSE(f.rows.empty());
        size_t start = 0;
        for (size_t end; (end = f.rows.find('\n', start)) != std::string::npos; start = end + 1) {
          const nlohmann::json row = nlohmann::json::parse(f.rows.substr(start, end - start), nullptr, false);
          EXPECT_TRUE(row.is_object() && row.value("schema_version", 0) == kStoreSchemaVersion)
              << "seed " << kSeed << " case " << c << ": " << f.rows.substr(start, end - start);
          if (f.table == "results") {
            EXPECT_EQ(row.size(), 30u) << "seed " << kSeed << " case " << c;
          }
        }
        EXPECT_EQ(start, f.rows.size()) << "seed " << kSeed << " case " << c << ": a row without its newline";
      }
      ++imported;
    } catch (const InputError& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).rfind("case.json: ", 0), 0u)
          << "seed " << kSeed << " case " << c << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << kSeed << " case " << c << ": not an InputError: " << e.what();
    }
  }
  EXPECT_GT(imported, 0u);
  EXPECT_GT(refused, 0u);
}

// Mutated aggregate tables (corpus/fleet_aggregates: what DuckDB wrote for a store) are read or
// refused with an InputError naming a file of the folder, never another exception.
TEST(FleetFuzz, MutatedAggregatesAreReadOrRefusedNamingTheFile) {
  const std::vector<std::string> corpus = fuzz::read_corpus(std::string(SDC_FUZZ_CORPUS) + "/fleet_aggregates");
  ASSERT_FALSE(corpus.empty());
  const std::vector<std::string> dictionary = {"null", "-1", "\"\"", "{}", "[]", "== members", "18446744073709551616",
                                               "\"0x\"", "1e400", "true"};
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fleet_aggregates_fuzz_" + std::to_string(::getpid()));
  fuzz::Mutator mutator(kSeed);
  size_t read = 0, refused = 0;
  for (int c = 0; c < kCases / 4; ++c) {
    fuzz::write_aggregates_case(dir, mutator.mutate(corpus[mutator.below(corpus.size())], dictionary));
    try {
      read_fleet_aggregates(dir.string());
      ++read;
    } catch (const InputError& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()).find(dir.string()), std::string::npos)
          << "seed " << kSeed << " case " << c << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << kSeed << " case " << c << ": not an InputError: " << e.what();
    }
  }
  std::filesystem::remove_all(dir);
  EXPECT_GT(read, 0u);
  EXPECT_GT(refused, 0u);
}

// Mutated topologies (corpus/topology: topology.conf(5)'s example and the line format) parse to a
// well-formed topology or are refused naming a line of the text, never a crash or another exception.
TEST(FleetFuzz, MutatedTopologiesParseOrNameTheLine) {
  const std::vector<std::string> corpus = fuzz::read_corpus(std::string(SDC_FUZZ_CORPUS) + "/topology");
  ASSERT_FALSE(corpus.empty());
  const std::vector<std::string> dictionary = {"SwitchName=", "Nodes=", "Switches=", "[",     "]",  ",",
                                               "-",           "=",      "#",         "[0-9]", "\n", "rack="};
  fuzz::Mutator mutator(kSeed);
  size_t parsed = 0, refused = 0;
  for (int c = 0; c < kCases; ++c) {
    const std::string text = mutator.mutate(corpus[mutator.below(corpus.size())], dictionary);
    const uint64_t lines = static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n')) + 1;
    try {
      EXPECT_TRUE(fuzz::topology_well_formed(parse_topology("case", text))) << "seed " << kSeed << " case " << c;
      ++parsed;
    } catch (const InputError& e) {
      ++refused;
      EXPECT_TRUE(fuzz::names_a_topology_line(e.what(), "case", lines))
          << "seed " << kSeed << " case " << c << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << kSeed << " case " << c << ": not an InputError: " << e.what();
    }
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(refused, 0u);
}

}  // namespace
}  // namespace sdc
