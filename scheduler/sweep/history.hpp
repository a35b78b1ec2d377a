// The history database: every run and every result per device (keyed by UUID, never the ordinal),
// quarantine decisions and the sweep's state, in SQLite in WAL mode. The schema is versioned
// (PRAGMA user_version) and migrated forward on open, each migration in one transaction. Every write
// is a transaction taken with BEGIN IMMEDIATE: a second writer waits up to the busy timeout, then
// fails with HistoryBusy; it never corrupts the database.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "host/device.hpp"
#include "probes/result.hpp"

struct sqlite3;

namespace sdc {

inline constexpr const char* kDefaultStateDir = "/var/lib/sdcprobe";
inline constexpr const char* kHistoryFile = "history.db";

// Another process held the database for longer than the busy timeout.
class HistoryBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunRecord {
  int64_t id = 0;
  std::string mode;  // sweep | qualify
  std::string host;
  uint64_t seed = 0;
  std::string level;
  std::string version;
  double started_at = 0;   // Unix seconds
  double finished_at = 0;  // 0 while running
  // running | complete | interrupted (a signal, or a process that died mid-pass) | busy (idle check failed)
  // | failed (the pass ended in an error, e.g. a full disk)
  std::string status;
  // --size and --iterations (none: the probes' defaults), which the digests depend on; schema 3 on.
  std::optional<uint64_t> size_bytes = std::nullopt;
  std::optional<uint32_t> iterations = std::nullopt;
};

struct ResultRecord {
  int64_t run_id = 0;
  std::string mode;  // the run's, filled by queries
  double recorded_at = 0;
  std::string device_uuid;
  std::string probe;
  std::string outcome;  // pass | fail | skipped | device_error
  uint64_t checked = 0;
  uint64_t mismatches = 0;
  std::string syndrome;  // OR of the recorded syndromes and their bit positions; empty when none
  double duration_s = 0;
  uint64_t seed = 0;
  int attempt = 0;    // 0: first run; 1: the re-run with a new seed after a failure
  std::string fault;  // first attempts that failed: persistent | transient | device_error
  std::string reason;
  // What the fleet's vote needs (schema 3 on): the device's equivalence class with the probe's
  // parameters and seed (record() fills it from the device), the digest and golden digest where the
  // probe has them, and the parameters as JSON. Rows recorded before schema 3 have no class (nullopt):
  // their digests were never kept.
  std::optional<std::string> class_key;
  std::optional<Digest128> digest, golden_digest;
  std::string params = "{}";
};

struct DeviceRecord {
  std::string uuid;
  std::string backend;
  int index = 0;  // the `gpu` label of the metrics: the position in the last run's device list
  std::string name;
  std::string pci_bus_id;
  double first_seen = 0;
  double last_seen = 0;
  std::string driver_version, runtime_version;  // schema 3 on; empty before
};

struct QuarantineRecord {
  int64_t id = 0;
  std::string device_uuid;
  std::string reason;
  double since = 0;
  double released_at = 0;  // 0 while active
  std::string released_by;
};

struct ProbeTotals {
  uint64_t runs = 0;           // first attempts that ran (not skipped)
  uint64_t failures = 0;       // first attempts that failed or raised a device error
  double last_duration_s = 0;  // of the last first attempt, a skipped one included (the time it had)
};

// A result row for `result` (attempt 0 or 1), with its fault class.
ResultRecord to_record(const ProbeResult& result, int attempt, std::string fault);

class History {
 public:
  static constexpr int kSchemaVersion = 3;
  // The oldest schema kReadOnly reads (as it is: rows without what later versions added).
  static constexpr int kOldestReadable = 2;

  enum class Access { kReadWrite, kReadOnly };

  // Opens `path`, creating and migrating it. Throws InputError when it cannot be opened or is newer
  // than this build, HistoryBusy when another process holds it past `busy_timeout_ms`.
  // kReadOnly (history, status) opens an existing database and never writes it: no WAL switch, no
  // migration, no -wal or -shm file created, so it works on a read-only file or mount and for a
  // user who may not write the state directory. Its schema must then be kOldestReadable to this
  // build's; an older one reads without the newer columns.
  explicit History(const std::string& path, int busy_timeout_ms = 10000, Access access = Access::kReadWrite);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  int schema_version() const;
  std::string integrity_check() const;  // "ok" when PRAGMA integrity_check accepts it

  int64_t begin_run(const RunRecord& run);
  void finish_run(int64_t run_id, const std::string& status, double finished_at);
  // Runs left `running` by a process that died (the caller holds the sweep lock): now `interrupted`.
  int interrupt_stale_runs(double now);
  // The devices (upserted) and the results of one device or pass, in one transaction.
  void record(int64_t run_id, const std::vector<DeviceIdentity>& devices, const std::vector<ResultRecord>& results,
              double now);

  std::vector<RunRecord> runs(double since = 0) const;
  // Newest last. Empty `device_uuid`: every device.
  std::vector<ResultRecord> results(const std::string& device_uuid = "", double since = 0, int64_t run_id = 0) const;
  std::vector<DeviceRecord> devices() const;
  ProbeTotals probe_totals(const std::string& device_uuid, const std::string& probe) const;
  std::vector<std::string> probes_seen(const std::string& device_uuid) const;
  double last_result_at(const std::string& device_uuid) const;  // 0: never tested

  std::optional<QuarantineRecord> active_quarantine(const std::string& device_uuid) const;
  void quarantine(const std::string& device_uuid, const std::string& reason, double now);
  void release(const std::string& device_uuid, const std::string& by, double now);
  double last_release_at(const std::string& device_uuid) const;  // 0: never released
  // Every quarantine decision, oldest first (the fleet store's quarantine events).
  std::vector<QuarantineRecord> quarantines() const;
  // First attempts with fault transient or device_error since `since`.
  std::vector<ResultRecord> transient_faults(const std::string& device_uuid, double since) const;
  // Complete sweep passes since `since` in which the device passed a probe and failed none.
  int clean_sweeps_since(const std::string& device_uuid, double since) const;

  std::string state(const std::string& key, const std::string& fallback = "") const;
  void set_state(const std::string& key, const std::string& value);

 private:
  void migrate();
  void open_read_only(int busy_timeout_ms);

  std::string path_;
  sqlite3* db_ = nullptr;
  int version_ = kSchemaVersion;  // of the open database
};

// The migrations, in order: migrations()[i] takes the schema from version i to i + 1.
const std::vector<std::string>& history_migrations();

}  // namespace sdc
