// Fleet SDC over simulated fleets: reports built as qualify and sweep write them, for many hosts of
// virtual devices, read back through the report reader and analysed.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "fleet/fleet_sdc_analysis.hpp"
#include "fleet/fleet_sdc_ingest.hpp"
#include "fleet/fleet_sdc_output.hpp"
#include "fleet/fleet_topology.hpp"
#include "host/error.hpp"
#include "kernels/common/random.hpp"
#include "probes/result.hpp"
#include "scheduler/consensus/consensus.hpp"
#include "scheduler/consensus/fleet_seed.hpp"
#include "scheduler/consensus/golden.hpp"
#include "scheduler/sweep/history.hpp"
#include "tests/cli/run_sdcprobe.hpp"
#include "tests/fleet/sim_fleet.hpp"

namespace sdc {
namespace {

// `hosts` single-GPU nodes, `hours` hourly sweeps with the fleet seed of each hour; `bad_host`'s GPU
// hands back a consistent wrong digest and passes its own checks.
FleetTally single_gpu_fleet(int hosts, int hours, int bad_host, bool only_bad_host = false) {
  FleetTally tally;
  for (int h = 0; h < hosts; ++h) {
    if (only_bad_host && h != bad_host) continue;
    const std::string host = "node" + std::to_string(h);
    for (int t = 0; t < hours; ++t) {
      const FleetSeed seed = fleet_seed("site-secret", SeedPeriod::kHour, kDay0 + 3600 * t);
      ingest_report_text(host + ".json",
                         report(host, kDay0 + 3600 * t + 60, seed.seed, {gpu(host, 0)}, {deterministic(h == bad_host)}),
                         tally);
    }
  }
  return tally;
}

TEST(FleetSdc, ConsistentWrongDigestIsNamedAtFleetScaleNotOnItsOwnNode) {
  // On its own node the device has no peer: every vote is "no_peers" and nothing is found.
  const FleetTally alone = single_gpu_fleet(200, 24, 17, true);
  const FleetAnalysis own = analyze_fleet(alone, {});
  EXPECT_TRUE(own.suspects.empty());
  EXPECT_EQ(own.count(FleetVoteKind::kNoPeers), own.votes.size());
  EXPECT_EQ(own.exit_code(), 2);

  const FleetTally tally = single_gpu_fleet(200, 24, 17);
  const FleetAnalysis a = analyze_fleet(tally, {});
  ASSERT_EQ(a.suspects.size(), 1u);
  EXPECT_EQ(a.suspects[0].device->host, "node17");
  EXPECT_EQ(a.suspects[0].device->uuid, "GPU-node17-0");
  EXPECT_EQ(a.suspects[0].device->pci_bus_id, "00000000:10:00.0");
  EXPECT_EQ(a.suspects[0].votes_lost, 48u);
  EXPECT_EQ(a.suspects[0].largest_majority, 199u);
  EXPECT_FALSE(a.suspects[0].own_checks_failed);
  EXPECT_EQ(a.count(FleetVoteKind::kMajority), 48u);
  EXPECT_EQ(a.count(FleetVoteKind::kInconclusive), 0u);
  EXPECT_EQ(a.exit_code(), 1);
  // The lost votes are failures of its families, so the rates see them too.
  uint64_t failures = 0;
  for (const auto& r : a.rates) failures += r.failures;
  EXPECT_EQ(failures, 48u);
  const nlohmann::json j = fleet_json(tally, a, {});
  EXPECT_EQ(j["suspects"][0]["majority_size"], 199);
  EXPECT_NE(fleet_markdown(tally, a, {}).find("GPU-node17-0"), std::string::npos);
  EXPECT_NE(fleet_svg(a).find("node17 GPU-node17-0"), std::string::npos);
}

TEST(FleetSdc, EvenSplitIsInconclusiveAndTwoDevicesNeverOutvoteOne) {
  FleetTally tally;
  const uint64_t seed = 7;
  ingest_report_text("a", report("a", kDay0, seed, {gpu("a", 0), gpu("a", 1)}, {deterministic(), deterministic(true)}),
                     tally);
  const FleetAnalysis a = analyze_fleet(tally, {});
  EXPECT_EQ(a.count(FleetVoteKind::kInconclusive), 2u);
  EXPECT_TRUE(a.suspects.empty());
  EXPECT_EQ(a.exit_code(), 1);
}

TEST(FleetSdc, RepeatedSeedsCountEachDeviceOnceHoweverManyDevicesAgree) {
  // A daily seed under hourly sweeps: every device runs it again and again. 100 single-GPU nodes
  // hand back the right digest once; 65 others a wrong one three times each. Counting runs would
  // give the wrong digest 195 of 295; each device once, the right one wins 100 of 165.
  const auto dir = std::filesystem::temp_directory_path() / ("fleet_repeat_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const uint64_t seed = fleet_seed("site-secret", SeedPeriod::kDay, kDay0).seed;
  FleetTally tally;
  for (int h = 0; h < 165; ++h) {
    const std::string host = "r" + std::to_string(h);
    const bool wrong = h >= 100;
    for (int run = 0; run < (wrong ? 3 : 1); ++run) {
      const std::string text =
          report(host, kDay0 + 3600 * run, seed, {gpu(host, 0)}, {{{"gemm.exact.fp32", false, wrong}}});
      ingest_report_text(host, text, tally);
      std::ofstream(dir / (host + "-" + std::to_string(run) + ".json")) << text;
    }
  }
  const FleetAnalysis a = analyze_fleet(tally, {});
  ASSERT_EQ(a.votes.size(), 1u);
  EXPECT_EQ(a.votes[0].kind, FleetVoteKind::kMajority);
  EXPECT_EQ(*a.votes[0].winner, right_digest("gemm.exact.fp32", seed));
  EXPECT_EQ(a.votes[0].devices, 165u);
  EXPECT_EQ(a.votes[0].majority_devices, 100u);
  EXPECT_EQ(a.votes[0].majority_hosts, 100u);
  // Each minority digest names its first kMaxNamedPerDigest devices; the rest are counted.
  EXPECT_EQ(a.suspects.size(), kMaxNamedPerDigest);
  Digest128 bad = right_digest("gemm.exact.fp32", seed);
  bad.lo ^= 0x5a5a;
  const DigestTally& wrong = a.votes[0].tally->digests.at({bad.hi, bad.lo});
  EXPECT_EQ(wrong.devices(), 65u);
  EXPECT_EQ(wrong.runs, 195u);
  EXPECT_TRUE(wrong.truncated());

  // The same files read by two threads, whose tallies are merged: the same counts.
  const FleetTally merged = ingest_fleet({dir.string()}, 2);
  const FleetAnalysis b = analyze_fleet(merged, {});
  ASSERT_EQ(b.votes.size(), 1u);
  EXPECT_EQ(b.votes[0].devices, 165u);
  EXPECT_EQ(b.votes[0].majority_devices, 100u);
  EXPECT_EQ(b.votes[0].majority_hosts, 100u);
  EXPECT_EQ(b.suspects.size(), kMaxNamedPerDigest);
  for (const auto& s : b.suspects) EXPECT_GE(std::stoi(s.device->host.substr(1)), 100) << s.device->host;
  std::filesystem::remove_all(dir);
}

TEST(FleetSdc, PlantedLemonIsFoundAtTheStatedFdr) {
  // 250 nodes x 8 GPUs, 30 daily reports of one day-long sweep each; failures are Poisson draws at
  // the fleet's base rate, the lemon's at 300 times it.
  std::mt19937_64 rng(29);
  const double base = 1e-3, lemon = 0.3;  // failures per device-day
  FleetTally tally;
  for (int h = 0; h < 250; ++h) {
    const std::string host = "n" + std::to_string(h);
    std::vector<DeviceIdentity> devices;
    for (int i = 0; i < 8; ++i) devices.push_back(gpu(host, i));
    for (int day = 0; day < 30; ++day) {
      std::vector<std::vector<SimResult>> results(8);
      for (int i = 0; i < 8; ++i) {
        const bool is_lemon = h == 123 && i == 5;
        std::poisson_distribution<int> draws(is_lemon ? lemon : base);
        const int n = draws(rng);
        results[i].push_back({"mem.march_c", n > 0, false, false, 86400.0});
        for (int k = 1; k < n; ++k) results[i].push_back({"mem.march_c", true, false, false, 0.0});
      }
      ingest_report_text(host, report(host, kDay0 + 86400 * day, day, devices, results), tally);
    }
  }
  FleetOptions options;
  options.fdr = 0.01;
  const FleetAnalysis a = analyze_fleet(tally, options);
  ASSERT_EQ(a.lemon_devices.size(), 1u);
  EXPECT_EQ(a.lemon_devices[0].device->uuid, "GPU-n123-5");
  EXPECT_LE(a.lemon_devices[0].q, 0.01);
  ASSERT_EQ(a.lemon_nodes.size(), 1u);
  EXPECT_EQ(a.lemon_nodes[0].host, "n123");
  EXPECT_EQ(a.devices_tested, 2000u);
  ASSERT_EQ(a.rates.size(), 1u);
  EXPECT_GT(a.rates[0].failures, 0u);
  EXPECT_LT(a.rates[0].rate_lo, a.rates[0].rate);
  EXPECT_GT(a.rates[0].rate_hi, a.rates[0].rate);
  EXPECT_NE(fleet_prometheus(a).find("sdcprobe_fleet_lemon_devices 1"), std::string::npos);
  // The rate's interval is Garwood's (Poisson), not Clopper-Pearson's (a binomial fraction).
  EXPECT_NE(fleet_prometheus(a).find("# HELP sdcprobe_fleet_failures_per_device_hour_upper95 Garwood exact 95% upper "
                                     "bound of the rate."),
            std::string::npos);
}

TEST(FleetSdc, CleanFleetOfTenThousandDevicesHasNoFalseSuspect) {
  // 1,250 nodes x 8 GPUs, 3 hourly sweeps, with the sporadic failures of a healthy fleet (one in
  // a thousand results): no suspect, no inconclusive vote, no lemon.
  std::mt19937_64 rng(10000);
  std::bernoulli_distribution sporadic(1e-3);
  FleetTally tally;
  for (int h = 0; h < 1250; ++h) {
    const std::string host = "c" + std::to_string(h);
    std::vector<DeviceIdentity> devices;
    for (int i = 0; i < 8; ++i)
      devices.push_back(gpu(host, i, h % 2 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB"));
    for (int t = 0; t < 3; ++t) {
      std::vector<std::vector<SimResult>> results(8);
      for (auto& r : results) {
        r = deterministic();
        r.push_back({"mem.march_c", sporadic(rng), false, false, 600.0});
      }
      ingest_report_text(host, report(host, kDay0 + 3600 * t, 100 + t, devices, results), tally);
    }
  }
  const FleetAnalysis a = analyze_fleet(tally, {});
  EXPECT_EQ(a.devices_tested, 10000u);
  EXPECT_TRUE(a.suspects.empty());
  EXPECT_EQ(a.count(FleetVoteKind::kInconclusive), 0u);
  EXPECT_EQ(a.count(FleetVoteKind::kAgreed), 12u);  // 2 classes x 2 probes x 3 seeds
  EXPECT_TRUE(a.lemon_devices.empty());
  EXPECT_TRUE(a.lemon_nodes.empty());
}

TEST(FleetSdc, GoldenFromTheFleetEqualsOneRecordedOnACleanNode) {
  const uint64_t seed = fleet_seed("site-secret", SeedPeriod::kDay, kDay0).seed;
  FleetTally tally;
  for (int h = 0; h < 60; ++h) {  // 119 of 120 devices agree: 99.2%
    const std::string host = "g" + std::to_string(h);
    ingest_report_text(
        host, report(host, kDay0, seed, {gpu(host, 0), gpu(host, 1)}, {deterministic(), deterministic(h == 3)}), tally);
  }
  FleetOptions options;
  options.golden_min_nodes = 5;
  const GoldenFile fleet = fleet_golden(analyze_fleet(tally, options), options);

  // The same probes on a known-good node of the class, through the golden recorder's path.
  std::vector<ProbeResult> results;
  const DeviceIdentity clean = gpu("clean", 0);
  for (const char* p : kProbes) {
    ProbeResult r;
    r.probe = p;
    r.device_uuid = clean.uuid;
    r.seed = seed;
    r.digest = right_digest(p, seed);
    results.push_back(r);
  }
  const GoldenFile recorded =
      golden_from_outcome(vote(consensus_records({clean}, results, "clean", 0)), seed, Level::kStandard, {}, {});
  EXPECT_EQ(golden_to_json(fleet), golden_to_json(recorded));

  options.golden_min_nodes = 61;  // more nodes than the fleet has
  EXPECT_THROW(fleet_golden(analyze_fleet(tally, options), options), InputError);
}

TEST(FleetSdc, FaultsInOneRowLookLikeOneLocationAndAcrossSmsSpread) {
  FleetTally tally;
  const std::vector<DeviceIdentity> devices = {gpu("loc", 0), gpu("loc", 1)};
  for (int run = 0; run < 3; ++run) {
    SimResult mem{"mem.walking_bits", true, false, false, 60.0};
    mem.records.push_back({{"byte_offset", (uint64_t{5} << 21) + 64 + 8 * run}, {"bits", {7}}});
    SimResult alu{"alu.fma32", true, false, false, 60.0};
    alu.records.push_back({{"unit", 3 + 40 * run}, {"lane", 9}, {"bits", {run}}});
    ingest_report_text("loc", report("loc", kDay0 + 3600 * run, run, devices, {{mem}, {alu}}), tally);
  }
  const FleetAnalysis a = analyze_fleet(tally, {});
  ASSERT_EQ(a.locations.size(), 2u);
  EXPECT_EQ(a.locations[0].pattern, "one_location");
  EXPECT_EQ(a.locations[0].same_row, 3u);
  EXPECT_EQ(a.locations[0].top_page, 5);
  EXPECT_EQ(a.locations[0].top_bit, 7);
  EXPECT_EQ(a.locations[0].top_bit_sites, 3u);
  EXPECT_EQ(a.locations[1].pattern, "spread");
  EXPECT_EQ(a.locations[1].top_unit_sites, 1u);
  EXPECT_EQ(a.locations[1].top_lane, 9);  // one lane on three SMs: still spread across the chip
  EXPECT_EQ(a.locations[1].top_lane_sites, 3u);
}

TEST(FleetSdc, HistoriesCountTowardRatesAndRefailuresAfterRelease) {
  const auto dir = std::filesystem::temp_directory_path() / ("fleet_history_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / kHistoryFile).string();
  {
    History h(path);
    const DeviceIdentity d = gpu("hist", 0);
    auto result = [&](const std::string& outcome, double at) {
      ResultRecord r;
      r.recorded_at = at;
      r.device_uuid = d.uuid;
      r.probe = "mem.march_c";
      r.outcome = outcome;
      r.duration_s = 600;
      return r;
    };
    RunRecord run{0, "sweep", "hist", 1, "standard", "test", kDay0, 0, "running"};
    const int64_t id = h.begin_run(run);
    h.record(id, {d}, {result("fail", kDay0 + 10), result("pass", kDay0 + 20)}, kDay0 + 30);
    h.quarantine(d.uuid, "test", kDay0 + 40);
    h.release(d.uuid, "operator", kDay0 + 50);
    h.record(id, {d}, {result("fail", kDay0 + 60)}, kDay0 + 70);
    h.finish_run(id, "complete", kDay0 + 80);
  }
  const FleetTally tally = ingest_fleet({dir.string()}, 2);
  EXPECT_EQ(tally.histories, 1u);
  const FleetAnalysis a = analyze_fleet(tally, {});
  ASSERT_EQ(a.refailed.size(), 1u);
  EXPECT_EQ(a.refailed[0]->uuid, "GPU-hist-0");
  ASSERT_EQ(a.rates.size(), 1u);
  EXPECT_EQ(a.rates[0].failures, 2u);
  EXPECT_DOUBLE_EQ(a.rates[0].device_hours, 0.5);
  std::filesystem::remove_all(dir);
}

TEST(FleetSdc, HistoriesVoteAsReportsDoAndNameTheDeviceWithAConsistentWrongDigest) {
  // Six nodes' sweep histories, two GPUs each, three hourly passes with the fleet seed; GPU 1 of
  // node3 hands back a wrong digest every time and passes its own checks. One node sent a report
  // of the first hour instead, and one history predates the digests (schema 2).
  const auto dir = std::filesystem::temp_directory_path() / ("fleet_histories_" + std::to_string(::getpid()));
  std::vector<std::string> inputs;
  for (int n = 0; n < 6; ++n) {
    const std::string host = "node" + std::to_string(n);
    const auto node_dir = dir / host;
    std::filesystem::create_directories(node_dir);
    inputs.push_back(node_dir.string());
    History h((node_dir / kHistoryFile).string());
    const std::vector<DeviceIdentity> devices = {gpu(host, 0), gpu(host, 1)};
    for (int t = 0; t < 3; ++t) {
      const double at = kDay0 + 3600 * t;
      const uint64_t seed = fleet_seed("site-secret", SeedPeriod::kHour, static_cast<int64_t>(at)).seed;
      const int64_t id =
          h.begin_run({0, "sweep", host, seed, "standard", "test", at, 0, "running", std::nullopt, std::nullopt});
      for (const DeviceIdentity& d : devices) {
        std::vector<ResultRecord> records;
        for (const char* p : kProbes) {
          ProbeResult r;
          r.probe = p;
          r.device_uuid = d.uuid;
          r.seed = seed;
          r.params = {{"n", 256}};
          r.outcome = Outcome::kPass;
          r.duration_s = 60;
          r.digest = right_digest(p, seed);
          if (n == 3 && d.index == 1) r.digest->lo ^= 0x5a5a;
          records.push_back(to_record(r, 0, ""));
        }
        h.record(id, {d}, records, at + 60);
      }
      h.finish_run(id, "complete", at + 120);
    }
  }
  const uint64_t seed0 = fleet_seed("site-secret", SeedPeriod::kHour, kDay0).seed;
  std::ofstream(dir / "reporter.json") << report("reporter", kDay0 + 60, seed0, {gpu("reporter", 0)},
                                                 {deterministic()});
  inputs.push_back((dir / "reporter.json").string());
  const std::string old = (dir / "old.db").string();
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(old.c_str(), &raw), SQLITE_OK);
    const std::string v2 =
        history_migrations()[0] + history_migrations()[1] +
        "PRAGMA user_version=2;"
        "INSERT INTO runs(mode, host, seed, level, version, started_at, status) "
        "VALUES('sweep', 'old', 5, 'standard', '0.1.0', 1796083200, 'complete');"
        "INSERT INTO devices(uuid, backend, idx, name, pci_bus_id, first_seen, last_seen) "
        "VALUES('GPU-old-0', 'cuda', 0, 'NVIDIA H100 80GB HBM3', '00000000:10:00.0', 1796083200, 1796083200);"
        "INSERT INTO results(run_id, recorded_at, device_uuid, probe, outcome, checked, mismatches, syndrome, "
        "duration_s, seed, attempt, fault, reason) "
        "VALUES(1, 1796083260, 'GPU-old-0', 'gemm.exact.fp32', 'pass', 1000, 0, '', 60, 5, 0, '', '');";
    ASSERT_EQ(sqlite3_exec(raw, v2.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  inputs.push_back(old);

  const FleetTally tally = ingest_fleet(inputs, 2);
  EXPECT_EQ(tally.histories, 7u);
  EXPECT_EQ(tally.reports, 1u);
  EXPECT_EQ(tally.results_without_digests, 1u);
  const FleetAnalysis a = analyze_fleet(tally, {});
  ASSERT_EQ(a.suspects.size(), 1u);
  EXPECT_EQ(a.suspects[0].device->host, "node3");
  EXPECT_EQ(a.suspects[0].device->uuid, "GPU-node3-1");
  EXPECT_EQ(a.suspects[0].device->pci_bus_id, "00000000:11:00.0");
  EXPECT_EQ(a.suspects[0].votes_lost, 6u);         // 2 probes x 3 hours
  EXPECT_EQ(a.suspects[0].largest_majority, 12u);  // 11 history GPUs and the reporter's in the first hour
  EXPECT_EQ(a.count(FleetVoteKind::kMajority), 6u);
  EXPECT_EQ(a.votes.size(), 6u);  // the report's votes are the histories' of its hour
  EXPECT_EQ(a.devices_tested, 14u);
  EXPECT_EQ(fleet_json(tally, a, {})["inputs"]["history_results_without_digests"], 1);
  std::filesystem::remove_all(dir);
}

TEST(FleetSdc, BadReportsNameTheFileAndTheField) {
  const std::string good = report("h", kDay0, 1, {gpu("h", 0)}, {deterministic()});
  auto error_of = [](const std::string& text) {
    FleetTally t;
    try {
      ingest_report_text("bad.json", text, t);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto edit = [&](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = nlohmann::json::parse(good);
    f(j);
    return j.dump();
  };
  EXPECT_NE(error_of("{").find("bad.json: (file): not JSON"), std::string::npos);
  EXPECT_EQ(error_of(edit([](auto& j) { j.erase("started_at"); })), "bad.json: started_at: missing");
  EXPECT_NE(error_of(edit([](auto& j) { j["results"][1]["digest"] = "xyz"; })).find("bad.json: results[1].digest"),
            std::string::npos);
  EXPECT_EQ(error_of(edit([](auto& j) { j["results"][0]["device_uuid"] = "GPU-nope"; })),
            "bad.json: results[0].device_uuid: names no device of the report");
  EXPECT_NE(error_of(edit([](auto& j) { j["results"][0]["outcome"] = "maybe"; })).find("results[0].outcome"),
            std::string::npos);
  EXPECT_NE(error_of(edit([](auto& j) { j["tool"] = "other"; })).find("bad.json: tool"), std::string::npos);
  EXPECT_NE(error_of(edit([](auto& j) { j["devices"][0]["compute_units"] = -1; })).find("devices[0].compute_units"),
            std::string::npos);
}

// Reference values computed independently (50-digit decimal arithmetic, bisection of the Poisson and
// binomial tails; tests/fleet/intervals_reference.py), checked to 1e-12 relative.
TEST(FleetStatistics, ExactIntervalsAgreeWithReferenceValuesTo1e12) {
  const auto near = [](double got, double want) { EXPECT_NEAR(got / want, 1.0, 1e-12) << got << " vs " << want; };
  EXPECT_EQ(garwood_interval(0).first, 0.0);
  near(garwood_interval(0).second, 3.68887945411393630285);  // -ln(0.025)
  near(garwood_interval(1).first, 2.53178079842898754037e-2);
  near(garwood_interval(1).second, 5.57164339093889859723);
  near(garwood_interval(10).first, 4.79538869613243363569);
  near(garwood_interval(10).second, 1.83903560420177787203e+1);
  near(garwood_interval(1000).first, 9.38973018407695215624e+2);
  near(garwood_interval(1000).second, 1.06395213601630198028e+3);
  near(clopper_pearson_exact(3, 10).first, 6.67395111777344671146e-2);
  near(clopper_pearson_exact(3, 10).second, 6.52452850059997295038e-1);
  // Closed forms at the edges: 1 - 0.025^(1/n) and 0.025^(1/n).
  near(clopper_pearson_exact(0, 10000000).second, -std::expm1(std::log(0.025) / 1e7));
  near(clopper_pearson_exact(10000000, 10000000).first, std::exp(std::log(0.025) / 1e7));
  EXPECT_THROW(clopper_pearson_exact(2, 1), std::invalid_argument);

  // A fleet rate is the Garwood interval over the device-hours: 7 failures in 2.5e6 device-seconds.
  FleetTally tally;
  std::vector<SimResult> results = {{"mem.march_c", false, false, false, 2.5e6}};
  for (int i = 0; i < 7; ++i) results.push_back({"mem.march_c", true, false, false, 0.0});
  ingest_report_text("r", report("r", kDay0, 1, {gpu("r", 0)}, {results}), tally);
  const FleetAnalysis a = analyze_fleet(tally, {});
  ASSERT_EQ(a.rates.size(), 1u);
  const double hours = 2.5e6 / 3600;
  near(a.rates[0].rate_lo, garwood_interval(7).first / hours);
  near(a.rates[0].rate_hi, garwood_interval(7).second / hours);
}

TEST(FleetStatistics, PoissonTailAndBenjaminiHochberg) {
  EXPECT_NEAR(poisson_upper_tail(1, 1.0), 1 - std::exp(-1.0), 1e-12);
  EXPECT_NEAR(poisson_upper_tail(3, 0.5), 1 - std::exp(-0.5) * (1 + 0.5 + 0.125), 1e-12);
  EXPECT_NEAR(poisson_upper_tail(10, 1e-3), std::exp(-1e-3) * std::pow(1e-3, 10) / 3628800.0, 1e-40);
  EXPECT_DOUBLE_EQ(poisson_upper_tail(0, 5.0), 1.0);
  // Large k and mu, against mpmath's regularized incomplete gamma at 50 digits
  // (mpmath.gammainc(k, 0, mu, regularized=True)): a hand-summed series loses 1e-9 of it.
  EXPECT_NEAR(poisson_upper_tail(1005000, 1e6) / 2.934034048031641098826e-7, 1.0, 1e-12);
  EXPECT_NEAR(poisson_upper_tail(1000200, 1e6) / 0.4208732385191467589158, 1.0, 1e-12);
  EXPECT_NEAR(poisson_upper_tail(500, 100) / 3.808754228926463620214e-178, 1.0, 1e-12);
  const std::vector<double> q = bh_q_values({0.01, 0.04, 0.03, 0.5});
  EXPECT_NEAR(q[0], 0.04, 1e-12);
  EXPECT_NEAR(q[1], 0.04 * 4 / 3, 1e-12);
  EXPECT_NEAR(q[2], 0.04 * 4 / 3, 1e-12);
  EXPECT_NEAR(q[3], 0.5, 1e-12);
}

// Through the binary: 201 devices whose faults spread over SMs, in hosts that sort first, and one
// whose memory faults all sit in one row, in the host that sorts last. The JSON lists 200 of the 202
// and says so; the one-location device comes first, as in the Markdown.
// Burns at rising temperatures: a GPU that fails only from 80 C is listed with that temperature; one
// that fails as often at random temperatures is not, nor is any device of a clean fleet of 200.
TEST(FleetSdc, TemperatureTriggeredDeviceIsNamedAndRandomFailuresAreNot) {
  std::mt19937_64 rng(7);
  FleetTally tally;
  for (int h = 0; h < 50; ++h) {
    const std::string host = "node" + std::to_string(h);
    std::vector<DeviceIdentity> devices;
    for (int g = 0; g < 4; ++g) devices.push_back(gpu(host, g));
    for (int p = 0; p < 16; ++p) {
      std::vector<std::vector<SimResult>> results(4);
      for (int g = 0; g < 4; ++g) {
        const double celsius = 50.5 + 3 * p;  // 50.5 to 95.5
        const bool triggered = h == 0 && g == 0 && celsius >= 80;
        // Six failures, one in each of six temperatures spread over the range.
        const bool random = h == 1 && g == 0 && (p == 1 || p == 4 || p == 7 || p == 10 || p == 12 || p == 15);
        SimResult burn{"gemm.burn.bf16", triggered || random, false, false, 10.0};
        burn.params = {{"samples",
                        {{{"temperature_c", celsius}, {"power_w", 650.0 + std::uniform_real_distribution<>(0, 50)(rng)},
                          {"power_limit_w", 700.0}, {"under_load", true}}}}};
        results[g].push_back(burn);
      }
      ingest_report_text(host + ".json", report(host, kDay0 + 3600 * p, 1, devices, results), tally);
    }
  }
  const FleetAnalysis a = analyze_fleet(tally, {});
  ASSERT_EQ(a.temperature_triggered.size(), 1u);
  const TriggeredDevice& t = a.temperature_triggered[0];
  EXPECT_EQ(t.device->uuid, "GPU-node0-0");
  EXPECT_EQ(t.trigger_c, 80);
  EXPECT_EQ(t.failures, 6u);
  EXPECT_EQ(t.passes_below, 10u);
  EXPECT_DOUBLE_EQ(t.p, 1.0 / 8008);  // all 6 failures among the 6 hottest of 16: 1 / C(16, 6)
  EXPECT_EQ(a.exit_code(), 1);
  // Every band of 10 degrees is there, and the failures of both failing GPUs are in theirs.
  ASSERT_EQ(a.temperature_bands.size(), 5u);
  uint64_t failures = 0;
  for (const auto& b : a.temperature_bands) {
    EXPECT_EQ(b.devices, 200u);
    failures += b.failures;
  }
  EXPECT_EQ(failures, 12u);
  EXPECT_EQ(a.temperature_bands.back().band, 90);
  ASSERT_EQ(a.power_bands.size(), 1u);
  EXPECT_EQ(a.power_bands[0].band, 90);
}

TEST(FleetSdc, LocationsListOneLocationDevicesFirstWithTheirTotal) {
  const auto dir = std::filesystem::temp_directory_path() / ("fleet_locations_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "reports");
  for (int h = 0; h <= 201; ++h) {
    char name[16];
    std::snprintf(name, sizeof name, "a%03d", h);
    const std::string host = h == 201 ? "z-row" : name;
    std::vector<SimResult> results;
    for (int run = 0; run < 2; ++run) {
      SimResult r = h == 201 ? SimResult{"mem.walking_bits", true, false, false, 60.0}
                             : SimResult{"alu.fma32", true, false, false, 60.0};
      if (h == 201) {
        r.records.push_back({{"byte_offset", (uint64_t{5} << 21) + 64 + 8 * run}, {"bits", {7}}});
      } else {
        r.records.push_back({{"unit", 3 + 40 * run}, {"lane", 9}, {"bits", {run}}});
      }
      results.push_back(r);
    }
    std::ofstream((dir / "reports" / (host + ".json")).string()) << report(host, kDay0, 1, {gpu(host, 0)}, {results});
  }
  const std::string json = (dir / "fleet.json").string();
  const test::Outcome o = test::sdcprobe("fleet sdc " + (dir / "reports").string() + " --json " + json);
  EXPECT_EQ(o.code, 1) << o.out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["locations"].size(), 200u);
  EXPECT_EQ(j["locations_total"], 202);
  EXPECT_EQ(j["locations_cut"], true);
  EXPECT_EQ(j["locations"][0]["host"], "z-row");
  EXPECT_EQ(j["locations"][0]["pattern"], "one_location");
  EXPECT_EQ(j["locations"][1]["host"], "a000");
  EXPECT_EQ(j["locations"][1]["pattern"], "spread");
  const size_t table = o.out.find("## Where on the chip");
  ASSERT_NE(table, std::string::npos) << o.out;
  EXPECT_LT(o.out.find("| z-row |", table), o.out.find("| a000 |", table));
  std::filesystem::remove_all(dir);
}

// Single-GPU nodes in racks of 8, each rack on a switch of 4 racks and a power domain of 2, one
// day-long sweep per node; each node's failures are Poisson draws at `per_node` expected failures,
// or `planted[i]` for the nodes of rack R0 when given.
struct RackFleet {
  std::vector<std::string> reports;  // one per node
  std::string topology;
};
RackFleet rack_fleet(std::mt19937_64& rng, int racks, double per_node, const std::vector<int>& planted = {}) {
  RackFleet f;
  std::poisson_distribution<int> draws(per_node);
  for (int r = 0; r < racks; ++r) {
    for (int n = 0; n < 8; ++n) {
      char host[32];
      std::snprintf(host, sizeof host, "r%02dn%d", r, n);
      f.topology += std::string(host) + " rack=R" + std::to_string(r) + " switch=S" + std::to_string(r / 4) + " pdu=P" +
                    std::to_string(r / 2) + "\n";
      const int failures = r == 0 && !planted.empty() ? planted[n] : draws(rng);
      std::vector<SimResult> results = {{"mem.march_c", false, false, false, 86400.0}};
      for (int k = 0; k < failures; ++k) results.push_back({"mem.march_c", true, false, false, 0.0});
      f.reports.push_back(report(host, kDay0, 1, {gpu(host, 0)}, {results}));
    }
  }
  return f;
}

// Through the binary: rack R0's 8 nodes each fail at about 3x the fleet's rate (15 failures where
// 4.8 are expected), none of them improbably often alone; the rack is named, its nodes are not.
TEST(FleetTopology, PlantedRackAtThreeTimesTheRateIsNamedAndNoneOfItsNodes) {
  const auto dir = std::filesystem::temp_directory_path() / ("fleet_rack_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "reports");
  std::mt19937_64 rng(3);
  const RackFleet f = rack_fleet(rng, 20, 0.6, {2, 2, 2, 2, 2, 2, 2, 1});
  for (size_t i = 0; i < f.reports.size(); ++i)
    std::ofstream((dir / "reports" / (std::to_string(i) + ".json")).string()) << f.reports[i];
  const std::string topology = (dir / "topology.txt").string(), json = (dir / "fleet.json").string();
  std::ofstream(topology) << "# node groups\n" << f.topology;
  const std::string base = "fleet sdc " + (dir / "reports").string() + " --json " + json;
  const test::Outcome o = test::sdcprobe(base + " --topology " + topology);
  EXPECT_EQ(o.code, 1) << o.out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["inputs"]["groups"], 20 + 5 + 10);
  EXPECT_EQ(j["inputs"]["nodes_without_group"], 0);
  // The rack first (smallest p); the power domain and switch above it may carry its excess too.
  ASSERT_GE(j["lemons"]["groups"].size(), 1u) << j["lemons"].dump(2);
  EXPECT_EQ(j["lemons"]["groups"][0]["group"], "rack=R0");
  for (const auto& g : j["lemons"]["groups"]) {
    const std::string name = g["group"];
    EXPECT_TRUE(name == "rack=R0" || name == "pdu=P0" || name == "switch=S0") << name;
  }
  EXPECT_EQ(j["lemons"]["groups"][0]["nodes"], 8);
  EXPECT_EQ(j["lemons"]["groups"][0]["failures"], 15);
  EXPECT_LE(j["lemons"]["groups"][0]["q_value"].get<double>(), 0.01);
  for (const auto& n : j["lemons"]["nodes"]) EXPECT_NE(n["host"].get<std::string>().rfind("r00", 0), 0u) << n;
  EXPECT_TRUE(j["lemons"]["devices"].empty()) << j["lemons"].dump(2);
  EXPECT_NE(o.out.find("- group rack=R0 (8 nodes): 15 failures"), std::string::npos) << o.out;

  // The same fleet as Slurm's topology.conf names it: leaf switches of one rack each, one spine.
  std::ofstream(topology) << "# topology.conf\nSwitchName=spine Switches=leaf[00-19]\n"
                          << "SwitchName=leaf00 Nodes=r00n[0-7] LinkSpeed=100\n"
                          << "SwitchName=leaf01 Nodes=r01n[0-3],r01n[4-7]\n";
  for (int r = 2; r < 20; ++r) {
    char line[64];
    std::snprintf(line, sizeof line, "SwitchName=leaf%02d Nodes=r%02dn[0-7]\n", r, r);
    std::ofstream(topology, std::ios::app) << line;
  }
  const test::Outcome s = test::sdcprobe(base + " --topology " + topology);
  EXPECT_EQ(s.code, 1) << s.out;
  std::ifstream in2(json);
  const nlohmann::json k = nlohmann::json::parse(in2);
  EXPECT_EQ(k["inputs"]["groups"], 21);  // the spine holds every node: no fleet left to compare it with
  ASSERT_EQ(k["lemons"]["groups"].size(), 1u) << k["lemons"].dump(2);
  EXPECT_EQ(k["lemons"]["groups"][0]["group"], "switch=leaf00");

  // Without a topology the fleet has no lemon at all: only the rack test sees it.
  const test::Outcome none = test::sdcprobe(base);
  EXPECT_EQ(none.code, 1) << none.out;  // failures were seen
  std::ifstream in3(json);
  const nlohmann::json l = nlohmann::json::parse(in3);
  EXPECT_TRUE(l["lemons"]["nodes"].empty());
  EXPECT_TRUE(l["lemons"]["groups"].empty());
  std::filesystem::remove_all(dir);
}

// 200 seeded clean fleets of 12 racks (21 groups each, 4,200 group tests at an FDR of 0.01): at
// most 2 false groups in all.
TEST(FleetTopology, CleanFleetsGiveAtMostTwoFalseGroups) {
  std::mt19937_64 rng(200);
  size_t false_groups = 0, tested = 0;
  for (int fleet = 0; fleet < 200; ++fleet) {
    const RackFleet f = rack_fleet(rng, 12, 0.6);
    FleetTally tally;
    for (size_t i = 0; i < f.reports.size(); ++i) ingest_report_text(std::to_string(i), f.reports[i], tally);
    FleetOptions options;
    options.topology = parse_topology("t", f.topology);
    const FleetAnalysis a = analyze_fleet(tally, options);
    false_groups += a.lemon_groups.size();

    tested += a.groups_tested;
  }
  EXPECT_EQ(tested, 200u * 21);
  EXPECT_LE(false_groups, 2u);
}

// A rack of two models: its A100 node is the whole A100 stratum (a point mass at its failures), so
// the rack's p is the binomial tail of its H100 failures alone, through the convolution of strata.
TEST(FleetTopology, MixedGroupConvolvesItsModels) {
  FleetTally tally;
  Topology topology;
  const auto node = [&](const std::string& host, const std::string& model, int failures, const std::string& rack) {
    std::vector<SimResult> results = {{"mem.march_c", false, false, false, 3600.0}};
    for (int k = 0; k < failures; ++k) results.push_back({"mem.march_c", true, false, false, 0.0});
    ingest_report_text(host, report(host, kDay0, 1, {gpu(host, 0, model)}, {results}), tally);
    topology[host] = {"rack=" + rack};
  };
  for (int i = 0; i < 4; ++i) node("a" + std::to_string(i), "NVIDIA H100 80GB HBM3", 3, "R0");
  for (int i = 0; i < 12; ++i) node("b" + std::to_string(i), "NVIDIA H100 80GB HBM3", i % 2, "R1");
  node("odd", "NVIDIA A100-SXM4-80GB", 2, "R0");
  FleetOptions options;
  options.topology = topology;
  const FleetAnalysis a = analyze_fleet(tally, options);
  ASSERT_EQ(a.groups_tested, 2u);
  ASSERT_EQ(a.lemon_groups.size(), 1u);
  EXPECT_EQ(a.lemon_groups[0].host, "rack=R0");
  EXPECT_EQ(a.lemon_groups[0].failures, 14u);
  EXPECT_EQ(a.lemon_groups[0].model, "mixed");
  // P(Bin(18, 4/16) >= 12), summed here term by term.
  double tail = 0;
  for (int j = 12; j <= 18; ++j) {
    double c = 1;
    for (int i = 0; i < j; ++i) c = c * (18 - i) / (i + 1);
    tail += c * std::pow(0.25, j) * std::pow(0.75, 18 - j);
  }
  EXPECT_NEAR(a.lemon_groups[0].p / tail, 1.0, 1e-9);
}

TEST(FleetTopology, BadTopologyNamesTheLineAndWritesNothing) {
  const auto dir = std::filesystem::temp_directory_path() / ("fleet_topo_bad_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream((dir / "r.json").string())
      << report("h", kDay0, 1, {gpu("h", 0), gpu("h", 1)}, {deterministic(), deterministic()});
  const std::string topology = (dir / "t.txt").string(), json = (dir / "out.json").string();
  const auto run = [&](const std::string& text) {
    std::ofstream(topology) << text;
    return test::sdcprobe("fleet sdc " + (dir / "r.json").string() + " --json " + json + " --topology " + topology);
  };
  const test::Outcome a = run("h rack=R1\nh2 rack\n");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(a.out, "sdcprobe: error: --topology " + topology + ": line 2: 'rack' is not KIND=NAME\n");
  const test::Outcome b = run("\n\nSwitchName=s1 Nodes=h[08-01]\n");
  EXPECT_EQ(b.code, 2);
  EXPECT_EQ(b.out, "sdcprobe: error: --topology " + topology + ": line 3: range '08-01' runs backwards\n");
  EXPECT_EQ(run("h\n").code, 2);
  EXPECT_EQ(run("# nothing\n").code, 2);
  EXPECT_FALSE(std::filesystem::exists(json));
  EXPECT_EQ(run("h rack=R1\n").code, 0);
  std::filesystem::remove_all(dir);
}

TEST(FleetTopology, HostlistsExpandAsSlurmWritesThem) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expand_hostlist("n[01-03,10]"), (V{"n01", "n02", "n03", "n10"}));
  EXPECT_EQ(expand_hostlist("gpu7,a[1-2]"), (V{"gpu7", "a1", "a2"}));
  EXPECT_EQ(expand_hostlist("r[1-2]n[0-1]"), (V{"r1n0", "r1n1", "r2n0", "r2n1"}));
  EXPECT_EQ(expand_hostlist("x[9-11].ib"), (V{"x9.ib", "x10.ib", "x11.ib"}));
  for (const char* bad : {"", "n[", "n]", "n[1-]", "n[a-b]", "n[[1]]", "n[]", "a,,b", "n[2-1]", "n[0-999999]", "n@1"})
    EXPECT_THROW(expand_hostlist(bad), std::invalid_argument) << bad;
  const Topology t = parse_topology("t", "SwitchName=s1 Nodes=n[1-2]\nn1 rack=R1 # comment\nn1 pdu=P1 rack=R1\n");
  EXPECT_EQ(t.at("n1"), (V{"pdu=P1", "rack=R1", "switch=s1"}));
  EXPECT_EQ(t.at("n2"), (V{"switch=s1"}));
  // topology.conf(5)'s example (tests/fuzz/corpus/topology): s3 links s0-s2, so holds dev0-dev17.
  std::ifstream in(std::string(SDC_FUZZ_CORPUS) + "/topology/slurm_topology_conf_man_example.conf");
  const Topology man = parse_topology("man", std::string(std::istreambuf_iterator<char>(in), {}));
  EXPECT_EQ(man.size(), 18u);
  EXPECT_EQ(man.at("dev0"), (V{"switch=s0", "switch=s3"}));
  EXPECT_EQ(man.at("dev17"), (V{"switch=s2", "switch=s3"}));
  try {
    parse_topology("t", "SwitchName=a Nodes=n1\nSwitchName=b Switches=a,c\n");
    ADD_FAILURE() << "an undefined switch was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "t: line 2: switch 'c' is not defined");
  }
}

// An empty folder holds no report: exit 2 naming it, and none of the outputs is written.
TEST(FleetSdc, NoReportFoundWritesNothing) {
  const auto dir = std::filesystem::temp_directory_path() / ("fleet_empty_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "empty");
  std::ofstream((dir / "empty" / "notes.txt").string()) << "not a report\n";
  const std::string out = (dir / "out").string();
  const test::Outcome o = test::sdcprobe("fleet sdc " + (dir / "empty").string() + " --json " + out + ".json" +
                                         " --markdown " + out + ".md --svg " + out + ".svg --prom " + out + ".prom");
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_EQ(o.out, "sdcprobe: error: no JSON report or history.db in " + (dir / "empty").string() + "\n");
  for (const char* ext : {".json", ".md", ".svg", ".prom"}) EXPECT_FALSE(std::filesystem::exists(out + ext)) << ext;
  std::filesystem::remove_all(dir);
}

// Results, but no vote with two devices and no failure: nothing was tested. Exit 2 naming the
// inputs, and no report that could read as a clean fleet.
TEST(FleetSdc, CouldNotTestWritesNothing) {
  const auto dir = std::filesystem::temp_directory_path() / ("fleet_untested_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "in");
  std::ofstream((dir / "in" / "a.json").string()) << report("a", kDay0, 1, {gpu("a", 0)}, {deterministic()});
  std::ofstream((dir / "in" / "b.json").string()) << report("b", kDay0, 2, {gpu("b", 0)}, {deterministic()});
  const std::string out = (dir / "out").string(), in = (dir / "in").string();
  const std::string outputs =
      " --json " + out + ".json --markdown " + out + ".md --svg " + out + ".svg --prom " + out + ".prom";
  const test::Outcome o = test::sdcprobe("fleet sdc " + in + outputs + " --golden-out " + out + ".golden");
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_EQ(o.out, "sdcprobe: fleet sdc: could not test: no vote had two devices and nothing failed in " + in +
                       "; no report written\n");
  for (const char* ext : {".json", ".md", ".svg", ".prom", ".golden"})
    EXPECT_FALSE(std::filesystem::exists(out + ext)) << ext;
  // The same seed on both nodes: a vote of two devices, and the report is written.
  std::ofstream((dir / "in" / "b.json").string()) << report("b", kDay0, 1, {gpu("b", 0)}, {deterministic()});
  EXPECT_EQ(test::sdcprobe("fleet sdc " + in + outputs).code, 0);
  for (const char* ext : {".json", ".md", ".svg", ".prom"}) EXPECT_TRUE(std::filesystem::exists(out + ext)) << ext;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sdc
