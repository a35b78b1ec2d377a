// Fleet SDC analysis over a FleetTally: the vote per (class, probe, parameters) across every node,
// suspects, rates per model x driver x probe family (failures per device-hour with Garwood's 95%
// interval, the share of devices failing with Clopper-Pearson's), lemon devices and nodes by a
// Poisson test at a Benjamini-Hochberg false-discovery rate, devices that failed again after a
// release, where on the chip the faults lie, and a golden file from the fleet's majority.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fleet/fleet_sdc_tally.hpp"
#include "fleet/fleet_topology.hpp"
#include "scheduler/consensus/golden.hpp"

namespace sdc {

struct FleetOptions {
  double fdr = 0.01;                    // the false-discovery rate of the lemon tests
  uint64_t golden_min_nodes = 5;        // --golden-out: a digest's majority spans at least this many hosts
  double golden_min_share = 0.99;       // ... and at least this share of the vote's devices
  std::optional<uint64_t> golden_seed;  // --golden-out: this seed's votes; none: the seed with the most
  Topology topology;                    // --topology: each node's racks, switches, power domains
};

// The memory address model of the location analysis: byte offsets in the probe's buffer, in rows of
// 2 KiB, 16 banks interleaved per row, and 2 MiB pages. Vendors hash addresses across channels and
// banks, so "same bank" is a hint; "same row" and "same page" hold for any linear map.
inline constexpr int kRowShift = 11;
inline constexpr int kBanks = 16;
inline constexpr int kPageShift = 21;

// no_peers: one device only, no evidence either way.
enum class FleetVoteKind { kAgreed, kMajority, kGolden, kInconclusive, kNoPeers };
const char* fleet_vote_kind_name(FleetVoteKind kind);

struct FleetVote {
  const VoteTally* tally = nullptr;
  FleetVoteKind kind = FleetVoteKind::kAgreed;
  std::optional<Digest128> winner;
  uint64_t devices = 0;           // every digest's devices together
  uint64_t majority_devices = 0;  // the winner's
  size_t majority_hosts = 0;      // distinct hosts holding the winner
};

struct FleetSuspect {
  const FleetDevice* device = nullptr;
  uint64_t votes_lost = 0;
  std::set<std::string> probes;
  uint64_t largest_majority = 0;   // devices in the largest majority it lost to
  bool own_checks_failed = false;  // its own checks also failed at least once where it lost
};

struct FleetRate {
  std::string model, driver, family;
  uint64_t devices = 0, failures = 0, devices_failing = 0;
  double device_hours = 0;
  double rate = 0, rate_lo = 0, rate_hi = 0;   // failures per device-hour tested
  double fraction_lo = 0, fraction_hi = 0;     // devices ever failing, of devices
  double ttff_median_h = -1, ttff_max_h = -1;  // hours from first seen to first failure; -1: none failed
};

struct Lemon {
  std::string host;                     // a group's "kind=name" for a group
  const FleetDevice* device = nullptr;  // null for a node or group
  std::string model;
  uint64_t failures = 0;
  double device_hours = 0;
  double expected = 0;  // failures expected at the fleet's rate without it
  double p = 1, q = 1;
  size_t nodes = 0;  // a group's nodes tested
};

struct FaultLocation {
  const FleetDevice* device = nullptr;
  size_t sites = 0, runs = 0;
  int top_unit = -1;
  size_t top_unit_sites = 0, compute_sites = 0;
  int top_lane = -1;
  size_t top_lane_sites = 0;
  int top_bit = -1;
  size_t top_bit_sites = 0;
  size_t memory_sites = 0, same_row = 0, same_bank = 0, same_page = 0;
  int64_t top_row = -1, top_page = -1;
  std::string pattern;  // one_location | spread | too_few
};

// Failures per model in one band of the burn's conditions (results whose conditions were read):
// 10 degrees C of temperature, or 10% of the enforced power limit.
struct BandRate {
  std::string model;
  int64_t band = 0;  // its lower bound: degrees C, or percent of the power limit
  uint64_t devices = 0, results = 0, failures = 0;
  double device_hours = 0, rate = 0, rate_lo = 0, rate_hi = 0;  // failures per device-hour, Garwood's 95%
};

// A device whose failures all came at or above a temperature, having passed below it: a defect with
// its own triggering temperature (Alibaba's Farron study saw SDCs grow exponentially with
// temperature, each defect above its own). Listed with at least kTriggerMinFailures failures and
// p <= kTriggerP, where p is the chance, were its failures spread at random over its results with
// conditions, that none of them fell below trigger_c (the hypergeometric tail).
inline constexpr uint64_t kTriggerMinFailures = 2;
inline constexpr double kTriggerP = 0.01;
struct TriggeredDevice {
  const FleetDevice* device = nullptr;
  int64_t trigger_c = 0;  // the whole degree of its coolest failing result
  uint64_t failures = 0, results_at_or_above = 0, passes_below = 0;
  double p = 1;
};

struct FleetAnalysis {
  std::vector<FleetVote> votes;        // every vote key, in key order
  std::vector<FleetSuspect> suspects;  // most votes lost first
  std::vector<FleetRate> rates;
  std::vector<Lemon> lemon_devices, lemon_nodes;  // q <= fdr, smallest p first
  std::vector<Lemon> lemon_groups;                // --topology groups, one BH over every group of every kind
  size_t devices_tested = 0, nodes_tested = 0, groups_tested = 0;
  size_t nodes_without_group = 0;            // tested nodes the topology does not name (with a topology)
  std::vector<const FleetDevice*> refailed;  // failed, released, failed again
  std::vector<FaultLocation> locations;      // devices with fault sites, one_location first, then spread, too_few
  std::map<std::pair<std::string, int64_t>, uint64_t> failures_by_day;  // own checks and lost votes
  std::vector<BandRate> temperature_bands, power_bands;                  // by model, then band
  std::vector<TriggeredDevice> temperature_triggered;                    // smallest p first
  size_t count(FleetVoteKind kind) const;
  // 1: a suspect, lemon, temperature-triggered device or inconclusive vote; 2: nothing was compared and nothing failed; else 0.
  int exit_code() const;
};

FleetAnalysis analyze_fleet(const FleetTally& tally, const FleetOptions& options);

// The golden file of the fleet's majority: every vote of one seed whose winner holds at least
// golden_min_nodes hosts and golden_min_share of its devices. Throws InputError when none does.
GoldenFile fleet_golden(const FleetAnalysis& analysis, const FleetOptions& options);

// Exact 95% intervals (Boost.Math's inverse incomplete gamma and beta): Garwood's for a Poisson
// mean of k events, Clopper-Pearson's for a binomial proportion k of n.
std::pair<double, double> garwood_interval(uint64_t k, double confidence = 0.95);
std::pair<double, double> clopper_pearson_exact(uint64_t k, uint64_t n, double confidence = 0.95);

// P(X >= k) for X ~ Poisson(mu): Boost.Math's regularized incomplete gamma P(k, mu).
double poisson_upper_tail(uint64_t k, double mu);
// Benjamini-Hochberg q-values (adjusted p-values), in the order given.
std::vector<double> bh_q_values(const std::vector<double>& p);

}  // namespace sdc
