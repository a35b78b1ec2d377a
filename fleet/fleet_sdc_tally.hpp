// What `sdcprobe fleet sdc` keeps of many nodes' results: a tally whose size grows with the distinct
// (equivalence class, probe, parameters) vote keys (the class holds the seed) and with the devices,
// never with the number of reports. Each ingest thread fills its own tally; merge() joins them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "host/burn_conditions.hpp"
#include "kernels/common/digest.hpp"

namespace sdc {

// Devices named per digest of a vote, with the outcome of their run: beyond these a digest's devices
// are counted exactly (by id, 4 bytes each) but not named as suspects.
inline constexpr size_t kMaxNamedPerDigest = 64;
// Fault sites kept per device for the location analysis: its earliest, by (run start, probe, record).
inline constexpr size_t kMaxSitesPerDevice = 64;

// One mismatch record's place: memory probes by byte offset, compute probes by unit and lane.
struct FaultSite {
  std::string probe;
  double at = 0;             // the run's start, Unix seconds
  int record = 0;            // its place among the result's mismatch records
  int64_t byte_offset = -1;  // memory probes
  int unit = -1;             // SM or core
  int lane = -1;
  std::vector<int> bits;  // flipped bit positions
};

struct FamilyCounts {
  uint64_t results = 0;  // results that ran (not skipped)
  // Device time under test, in whole nanoseconds: an exact sum, the same in whatever order the
  // results are added (by ingest threads here, by an engine over the store).
  int64_t tested_ns = 0;
  uint64_t failures = 0;
  double first_failure = 0;  // Unix seconds; 0: none
  void add(const FamilyCounts& o);
};

// Results that recorded the device's conditions (a burn's temperature and power), in one band.
struct BurnCounts {
  uint64_t results = 0, failures = 0;
  int64_t tested_ns = 0;
  void add(const BurnCounts& o);
};

struct FleetDevice {
  uint32_t id = 0;  // its place in FleetTally::by_id
  std::string host, uuid, pci_bus_id, model, driver, backend;
  double first_seen = 0, last_seen = 0;          // of its runs, Unix seconds
  std::map<std::string, FamilyCounts> families;  // probe family (alu, gemm, mem, sfu, ...) -> counts
  std::vector<FaultSite> sites;  // the earliest kMaxSitesPerDevice
  // Results with conditions by whole degree Celsius, and by power draw in bands of 10% of the
  // enforced limit named by their lower bound (90: 90-100%), as the store's rows give them
  // (result_conditions).
  std::map<int64_t, BurnCounts> by_degree, by_power_pct;
  // From a history: the last release from quarantine, and failures before and after it.
  double released_at = 0;
  uint64_t failures_before_release = 0, failures_after_release = 0;
  // Its model, driver, backend and bus id are those of its earliest record.
  void seen(double at, std::string_view pci_bus_id, std::string_view model, std::string_view driver,
            std::string_view backend);
  // Counts a result whose conditions were read (a field the driver did not answer is NaN: not counted there).
  void add_conditions(const BurnConditions& c, bool failed, int64_t tested_ns);
  // Keeps `site` if it is among the device's kMaxSitesPerDevice earliest.
  void add_site(FaultSite&& site);
  void merge(const FleetDevice& o);
};

struct VoteMember {
  uint32_t device = 0;  // FleetDevice::id
  bool failed = false;  // its own checks failed this run
  double at = 0;
};

struct FleetTally;

class DigestTally {
 public:
  uint64_t runs = 0;  // every result with this digest
  // Distinct devices, each at its earliest run: the first kMaxNamedPerDigest met, ordered by
  // FleetTally::order_members. An engine's aggregates name the earliest kMaxNamedPerDigest.
  std::vector<VoteMember> members;

  // One run of `device`; a device that repeats the seed counts once.
  void add(uint32_t device, bool failed, double at);
  // From an engine's aggregates, which count devices and hosts without listing every device.
  void set_counts(uint64_t devices, uint64_t hosts);
  // Joins `o`, whose device ids `remap` translates to this tally's.
  void merge(DigestTally&& o, const std::vector<uint32_t>& remap);
  // The distinct devices, sorted by id: exact, however many ran. It deduplicates what is pending, so
  // one thread at a time (each ingest thread fills its own tally).
  const std::vector<uint32_t>& device_ids() const;
  uint64_t devices() const { return counted_ ? counted_->first : device_ids().size(); }
  uint64_t hosts(const FleetTally& tally) const;  // the distinct hosts of its devices
  bool truncated() const { return devices() > members.size(); }  // more devices than named

 private:
  std::optional<std::pair<uint64_t, uint64_t>> counted_;  // (devices, hosts), from aggregates
  // Appended as they come and deduplicated (sorted) when they have doubled since the last time, so
  // they never hold more than twice the distinct devices plus 64.
  mutable std::vector<uint32_t> ids_;
  mutable size_t unique_ = 0;  // ids_[0, unique_) are sorted and distinct
  void deduplicate() const;
};

struct VoteTally {
  std::string class_key, probe, model, driver;
  uint64_t seed = 0;  // the run's seed (each probe's is derived from it, and is in the class)
  // level|size_bytes|iterations of the runs: what a golden file records with the seed.
  std::string config;  // also part of the vote key: the parameters the digest depends on
  std::map<std::pair<uint64_t, uint64_t>, DigestTally> digests;  // (hi, lo) -> tally
  std::optional<Digest128> golden;  // the host's IEEE golden digest, where the probe has one
};

// Keeps the larger of the vote's golden digest and `golden`: hosts of one class compute the same
// one, and where a host computed another, every reader of the same results keeps the same.
void keep_golden(VoteTally& vote, const std::optional<Digest128>& golden);

struct FleetTally {
  FleetTally() = default;
  FleetTally(FleetTally&&) = default;
  FleetTally& operator=(FleetTally&&) = default;
  FleetTally(const FleetTally&) = delete;  // by_id points into devices
  FleetTally& operator=(const FleetTally&) = delete;

  std::unordered_map<std::string, FleetDevice> devices;                 // host/uuid -> device
  std::vector<FleetDevice*> by_id;                                      // FleetDevice::id -> device
  std::unordered_map<std::string, VoteTally> votes;                     // class, probe and parameters -> vote
  std::map<std::pair<std::string, int64_t>, uint64_t> failures_by_day;  // (model, UTC day number)
  uint64_t files = 0, reports = 0, histories = 0, results = 0, skipped = 0, with_injections = 0;
  uint64_t results_without_digests = 0;  // history rows from before schema 3: in the rates, in no vote
  // The device of `key` (host/uuid), added with the next id when new.
  FleetDevice& device(const std::string& key);
  void merge(FleetTally&& o);
  // Each digest's members by (earliest run, host, UUID): the order the analysis names them in,
  // whatever order the files were read in.
  void order_members();
};

std::string fleet_device_key(std::string_view host, std::string_view uuid);
// What a vote's key holds besides the class and probe: the level, --size and --iterations, as
// "standard|1048576|" (empty: the probes' default), the same from a report, a history and the store.
std::string vote_config(std::string_view level, std::optional<uint64_t> size_bytes, std::optional<uint64_t> iterations);
// A vote's key in FleetTally::votes: the class (which holds the seed), the probe and the parameters.
std::string vote_key(std::string_view class_key, std::string_view probe, std::string_view config);
// "gemm" for gemm.exact.fp32: the part before the first dot.
std::string probe_family(const std::string& probe);

}  // namespace sdc
