#include "scheduler/sweep/history.hpp"

#include <sqlite3.h>

#include <unistd.h>

#include <cstdio>

#include "host/error.hpp"
#include "scheduler/consensus/consensus.hpp"

namespace sdc {
namespace {

// One prepared statement; columns and parameters are numbered as SQLite numbers them.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
    check(sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr), sql);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT), "bind");
    return *this;
  }
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(stmt_, i, v), "bind");
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    check(sqlite3_bind_int64(stmt_, i, v), "bind");
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, std::optional<uint64_t> v) {
    if (v) return bind(i, *v);
    check(sqlite3_bind_null(stmt_, i), "bind");
    return *this;
  }
  // uint64 values (seeds, counts) keep their bits in SQLite's signed 64-bit integers.
  Stmt& bind(int i, uint64_t v) { return bind(i, static_cast<int64_t>(v)); }

  // True while a row is available.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    check(rc, "step");
    return false;
  }
  std::string text(int i) const {
    const unsigned char* t = sqlite3_column_text(stmt_, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  double real(int i) const { return sqlite3_column_double(stmt_, i); }
  int64_t integer(int i) const { return sqlite3_column_int64(stmt_, i); }
  uint64_t u64(int i) const { return static_cast<uint64_t>(sqlite3_column_int64(stmt_, i)); }
  bool null(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }

 private:
  void check(int rc, const char* what) const {
    if (rc == SQLITE_OK) return;
    const int primary = rc & 0xff;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
      throw HistoryBusy("history database " + path_ + " is locked by another process (" + sqlite3_errmsg(db_) + ")");
    }
    throw std::runtime_error("history database " + path_ + ": " + what + ": " + sqlite3_errmsg(db_));
  }

  sqlite3* db_;
  std::string path_;
  sqlite3_stmt* stmt_ = nullptr;
};

void exec(sqlite3* db, const std::string& path, const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return;
  const std::string message = error ? error : sqlite3_errstr(rc);
  sqlite3_free(error);
  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
    throw HistoryBusy("history database " + path + " is locked by another process (" + message + ")");
  }
  throw std::runtime_error("history database " + path + ": " + message);
}

// BEGIN IMMEDIATE takes the write lock up front, so a second writer waits (busy timeout) at the
// start of its transaction instead of failing half-way; rolled back unless committed.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path) : db_(db), path_(path) { exec(db_, path_, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, path_, "COMMIT");
    done_ = true;
  }

 private:
  sqlite3* db_;
  const std::string& path_;
  bool done_ = false;
};

std::string syndrome_summary(const MismatchReport& report) {
  if (report.records.empty()) return "";
  uint64_t any = 0;
  for (const auto& m : report.records) any |= m.syndrome();
  char hex[24];
  std::snprintf(hex, sizeof(hex), "0x%016llx", static_cast<unsigned long long>(any));
  std::string bits;
  for (int b = 0; b < 64; ++b) {
    if ((any >> b) & 1u) bits += (bits.empty() ? "" : ",") + std::to_string(b);
  }
  return std::string(hex) + " bits " + bits;
}

const char* kResultColumns =
    "x.run_id, r.mode, x.recorded_at, x.device_uuid, x.probe, x.outcome, x.checked, x.mismatches, x.syndrome, "
    "x.duration_s, x.seed, x.attempt, x.fault, x.reason, ";
// The columns schema 3 added, or what a database of schema 2 reads as in their place.
const char* kResultVoteColumns = "x.class_key, x.digest, x.golden_digest, x.params";
const char* kResultVoteColumnsBefore3 = "NULL, '', '', '{}'";

const char* result_vote_columns(int version) { return version >= 3 ? kResultVoteColumns : kResultVoteColumnsBefore3; }

// The equivalence class of `r` on its device among `devices`; none when the device is not given.
std::optional<std::string> class_of(const std::vector<DeviceIdentity>& devices, const ResultRecord& r) {
  for (const auto& d : devices) {
    if (d.uuid != r.device_uuid) continue;
    ProbeResult p;
    p.seed = r.seed;
    p.params = nlohmann::json::parse(r.params, nullptr, false);  // to_record's own dump
    if (!p.params.is_object()) p.params = nlohmann::json::object();
    return equivalence_class(d, p);
  }
  return std::nullopt;
}

std::optional<Digest128> digest_column(const std::string& hex) {
  if (hex.empty()) return std::nullopt;
  return parse_digest(hex);
}

ResultRecord read_result(const Stmt& s, const std::string& path) {
  ResultRecord r;
  r.run_id = s.integer(0);
  r.mode = s.text(1);
  r.recorded_at = s.real(2);
  r.device_uuid = s.text(3);
  r.probe = s.text(4);
  r.outcome = s.text(5);
  r.checked = s.u64(6);
  r.mismatches = s.u64(7);
  r.syndrome = s.text(8);
  r.duration_s = s.real(9);
  r.seed = s.u64(10);
  r.attempt = static_cast<int>(s.integer(11));
  r.fault = s.text(12);
  r.reason = s.text(13);
  if (!s.null(14)) r.class_key = s.text(14);
  try {
    r.digest = digest_column(s.text(15));
    r.golden_digest = digest_column(s.text(16));
  } catch (const std::invalid_argument& e) {
    throw InputError("history database " + path + ": results: " + r.probe + " on " + r.device_uuid +
                     ": digest: " + e.what());
  }
  r.params = s.text(17);
  return r;
}

}  // namespace

const std::vector<std::string>& history_migrations() {
  static const std::vector<std::string> migrations = {
      // 1: runs, devices and results.
      "CREATE TABLE runs(id INTEGER PRIMARY KEY, mode TEXT NOT NULL, host TEXT NOT NULL, seed INTEGER NOT NULL,"
      " level TEXT NOT NULL, version TEXT NOT NULL, started_at REAL NOT NULL, finished_at REAL NOT NULL DEFAULT 0,"
      " status TEXT NOT NULL);"
      "CREATE TABLE devices(uuid TEXT PRIMARY KEY, backend TEXT NOT NULL, idx INTEGER NOT NULL, name TEXT NOT NULL,"
      " pci_bus_id TEXT NOT NULL, first_seen REAL NOT NULL, last_seen REAL NOT NULL);"
      "CREATE TABLE results(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
      " recorded_at REAL NOT NULL, device_uuid TEXT NOT NULL REFERENCES devices(uuid), probe TEXT NOT NULL,"
      " outcome TEXT NOT NULL, checked INTEGER NOT NULL, mismatches INTEGER NOT NULL, syndrome TEXT NOT NULL,"
      " duration_s REAL NOT NULL, seed INTEGER NOT NULL, attempt INTEGER NOT NULL, fault TEXT NOT NULL,"
      " reason TEXT NOT NULL);"
      "CREATE INDEX results_by_device ON results(device_uuid, recorded_at);",
      // 2: quarantine decisions and the sweep's state (its cursor through the catalogue, its policy).
      "CREATE TABLE quarantine(id INTEGER PRIMARY KEY, device_uuid TEXT NOT NULL REFERENCES devices(uuid),"
      " reason TEXT NOT NULL, since REAL NOT NULL, released_at REAL NOT NULL DEFAULT 0,"
      " released_by TEXT NOT NULL DEFAULT '');"
      "CREATE INDEX quarantine_by_device ON quarantine(device_uuid, released_at);"
      "CREATE TABLE state(key TEXT PRIMARY KEY, value TEXT NOT NULL);",
      // 3: what fleet consensus votes with: each result's equivalence class (NULL in the rows
      // recorded before: their digests were never kept), digests and parameters; each run's --size
      // and --iterations (NULL: the probes' defaults); each device's driver and runtime.
      "ALTER TABLE results ADD COLUMN class_key TEXT;"
      "ALTER TABLE results ADD COLUMN digest TEXT NOT NULL DEFAULT '';"
      "ALTER TABLE results ADD COLUMN golden_digest TEXT NOT NULL DEFAULT '';"
      "ALTER TABLE results ADD COLUMN params TEXT NOT NULL DEFAULT '{}';"
      "ALTER TABLE runs ADD COLUMN size_bytes INTEGER;"
      "ALTER TABLE runs ADD COLUMN iterations INTEGER;"
      "ALTER TABLE devices ADD COLUMN driver_version TEXT NOT NULL DEFAULT '';"
      "ALTER TABLE devices ADD COLUMN runtime_version TEXT NOT NULL DEFAULT '';",
  };
  return migrations;
}

ResultRecord to_record(const ProbeResult& result, int attempt, std::string fault) {
  ResultRecord r;
  r.device_uuid = result.device_uuid;
  r.probe = result.probe;
  r.outcome = outcome_name(result.outcome);
  r.checked = result.report.checked;
  r.mismatches = result.report.mismatches;
  r.syndrome = syndrome_summary(result.report);
  r.duration_s = result.duration_s;
  r.seed = result.seed;
  r.attempt = attempt;
  r.fault = std::move(fault);
  r.reason = result.reason;
  r.digest = result.digest;
  r.golden_digest = result.golden_digest;
  r.params = result.params.dump();
  return r;
}

History::History(const std::string& path, int busy_timeout_ms, Access access) : path_(path) {
  if (access == Access::kReadOnly) {
    open_read_only(busy_timeout_ms);
    return;
  }
  const int rc =
      sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw InputError("cannot open history database " + path + ": " + why);
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms);
  try {
    // WAL: readers (status, history, the metrics) never block the sweep's writes, and a killed writer
    // leaves the database consistent. FULL syncs each commit, so a recorded result survives power loss.
    {
      Stmt wal(db_, path_, "PRAGMA journal_mode=WAL");
      wal.step();
      if (wal.text(0) != "wal") throw InputError("history database " + path + ": cannot enable WAL mode");
    }
    exec(db_, path_, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON");
    migrate();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

namespace {

// A URI filename for `path` with query `params` ('%', '?' and '#' escaped).
std::string file_uri(const std::string& path, const std::string& params) {
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", static_cast<unsigned char>(c));
      uri += hex;
    } else {
      uri += c;
    }
  }
  return uri + "?" + params;
}

}  // namespace

void History::open_read_only(int busy_timeout_ms) {
  // Opens with URI `params` and reads once (the first read is what needs the -shm file); false with
  // `why` set when that fails.
  std::string why;
  auto try_open = [&](const char* params) {
    int rc = sqlite3_open_v2(file_uri(path_, params).c_str(), &db_,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_busy_timeout(db_, busy_timeout_ms);
      sqlite3_stmt* read = nullptr;
      rc = sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &read, nullptr);
      if (rc == SQLITE_OK) rc = sqlite3_step(read) == SQLITE_ROW ? SQLITE_OK : sqlite3_errcode(db_);
      sqlite3_finalize(read);
      if (rc == SQLITE_OK) return true;
    }
    why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    if ((rc & 0xff) == SQLITE_BUSY) {
      throw HistoryBusy("history database " + path_ + " is locked by another process (" + why + ")");
    }
    return false;
  };
  // A WAL database is read through its -shm index, which a reader creates when no writer has. A
  // reader that may not create it (a read-only directory or mount, another user) reads the file as
  // immutable instead; that is exact when there is no -wal file, since every commit is then in the
  // database file.
  const bool wal_present = ::access((path_ + "-wal").c_str(), F_OK) == 0;
  if (!try_open("mode=ro") && (wal_present || !try_open("mode=ro&immutable=1"))) {
    throw InputError("cannot read history database " + path_ + ": " + why);
  }
  version_ = schema_version();
  if (version_ < kOldestReadable || version_ > kSchemaVersion) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw InputError("history database " + path_ + " has schema version " + std::to_string(version_) +
                     "; this sdcprobe reads versions " + std::to_string(kOldestReadable) + " to " +
                     std::to_string(kSchemaVersion) +
                     (version_ < kSchemaVersion ? " (a sweep of this version migrates it)" : ""));
  }
}

History::~History() { sqlite3_close(db_); }

int History::schema_version() const {
  Stmt s(db_, path_, "PRAGMA user_version");
  s.step();
  return static_cast<int>(s.integer(0));
}

std::string History::integrity_check() const {
  Stmt s(db_, path_, "PRAGMA integrity_check");
  std::string out;
  while (s.step()) out += (out.empty() ? "" : "\n") + s.text(0);
  return out;
}

void History::migrate() {
  const auto& migrations = history_migrations();
  if (schema_version() >= static_cast<int>(migrations.size())) {
    if (schema_version() > kSchemaVersion) {
      throw InputError("history database " + path_ + " has schema version " + std::to_string(schema_version()) +
                       ", newer than this sdcprobe understands (" + std::to_string(kSchemaVersion) + ")");
    }
    return;
  }
  // The version is read again inside the write lock: another process may have migrated meanwhile.
  Transaction tx(db_, path_);
  for (int v = schema_version(); v < static_cast<int>(migrations.size()); ++v) {
    exec(db_, path_, migrations[static_cast<size_t>(v)]);
    exec(db_, path_, "PRAGMA user_version=" + std::to_string(v + 1));
  }
  tx.commit();
}

int64_t History::begin_run(const RunRecord& run) {
  Transaction tx(db_, path_);
  Stmt s(db_, path_,
         "INSERT INTO runs(mode, host, seed, level, version, started_at, status, size_bytes, iterations) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  s.bind(1, run.mode).bind(2, run.host).bind(3, run.seed).bind(4, run.level).bind(5, run.version);
  s.bind(6, run.started_at).bind(7, run.status.empty() ? std::string("running") : run.status);
  s.bind(8, run.size_bytes);
  s.bind(9, run.iterations ? std::optional<uint64_t>(*run.iterations) : std::nullopt);
  s.step();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

void History::finish_run(int64_t run_id, const std::string& status, double finished_at) {
  Transaction tx(db_, path_);
  Stmt s(db_, path_, "UPDATE runs SET status = ?1, finished_at = ?2 WHERE id = ?3");
  s.bind(1, status).bind(2, finished_at).bind(3, run_id).step();
  tx.commit();
}

int History::interrupt_stale_runs(double now) {
  Transaction tx(db_, path_);
  Stmt s(db_, path_, "UPDATE runs SET status = 'interrupted', finished_at = ?1 WHERE status = 'running'");
  s.bind(1, now).step();
  const int changed = sqlite3_changes(db_);
  tx.commit();
  return changed;
}

void History::record(int64_t run_id, const std::vector<DeviceIdentity>& devices,
                     const std::vector<ResultRecord>& results, double now) {
  Transaction tx(db_, path_);
  for (const auto& d : devices) {
    Stmt s(db_, path_,
           "INSERT INTO devices(uuid, backend, idx, name, pci_bus_id, first_seen, last_seen, driver_version, "
           "runtime_version) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8) ON CONFLICT(uuid) DO UPDATE SET "
           "backend = excluded.backend, idx = excluded.idx, name = excluded.name, pci_bus_id = excluded.pci_bus_id, "
           "last_seen = excluded.last_seen, driver_version = excluded.driver_version, "
           "runtime_version = excluded.runtime_version");
    s.bind(1, d.uuid).bind(2, d.backend).bind(3, d.index).bind(4, d.name).bind(5, d.pci_bus_id).bind(6, now);
    s.bind(7, d.driver_version).bind(8, d.runtime_version).step();
  }
  for (const auto& r : results) {
    Stmt s(db_, path_,
           "INSERT INTO results(run_id, recorded_at, device_uuid, probe, outcome, checked, mismatches, syndrome, "
           "duration_s, seed, attempt, fault, reason, class_key, digest, golden_digest, params) "
           "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)");
    s.bind(1, run_id).bind(2, now).bind(3, r.device_uuid).bind(4, r.probe).bind(5, r.outcome).bind(6, r.checked);
    s.bind(7, r.mismatches).bind(8, r.syndrome).bind(9, r.duration_s).bind(10, r.seed).bind(11, r.attempt);
    s.bind(12, r.fault).bind(13, r.reason);
    const std::optional<std::string> class_key = r.class_key ? r.class_key : class_of(devices, r);
    if (class_key) {
      s.bind(14, *class_key);
    } else {
      s.bind(14, std::optional<uint64_t>());
    }
    s.bind(15, r.digest ? digest_hex(*r.digest) : std::string())
        .bind(16, r.golden_digest ? digest_hex(*r.golden_digest) : std::string());
    s.bind(17, r.params).step();
  }
  tx.commit();
}

std::vector<RunRecord> History::runs(double since) const {
  const std::string sql =
      std::string("SELECT id, mode, host, seed, level, version, started_at, finished_at, status, ") +
      (version_ >= 3 ? "size_bytes, iterations" : "NULL, NULL") + " FROM runs WHERE started_at >= ?1 ORDER BY id";
  Stmt s(db_, path_, sql.c_str());
  s.bind(1, since);
  std::vector<RunRecord> out;
  while (s.step()) {
    RunRecord r;
    r.id = s.integer(0);
    r.mode = s.text(1);
    r.host = s.text(2);
    r.seed = s.u64(3);
    r.level = s.text(4);
    r.version = s.text(5);
    r.started_at = s.real(6);
    r.finished_at = s.real(7);
    r.status = s.text(8);
    if (!s.null(9)) r.size_bytes = s.u64(9);
    if (!s.null(10)) r.iterations = static_cast<uint32_t>(s.u64(10));
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<ResultRecord> History::results(const std::string& device_uuid, double since, int64_t run_id) const {
  const std::string sql = std::string("SELECT ") + kResultColumns + result_vote_columns(version_) +
                          " FROM results x JOIN runs r ON r.id = x.run_id WHERE (?1 = '' OR x.device_uuid = ?1)"
                          " AND x.recorded_at >= ?2 AND (?3 = 0 OR x.run_id = ?3) ORDER BY x.id";
  Stmt s(db_, path_, sql.c_str());
  s.bind(1, device_uuid).bind(2, since).bind(3, run_id);
  std::vector<ResultRecord> out;
  while (s.step()) out.push_back(read_result(s, path_));
  return out;
}

std::vector<DeviceRecord> History::devices() const {
  const std::string sql = std::string("SELECT uuid, backend, idx, name, pci_bus_id, first_seen, last_seen, ") +
                          (version_ >= 3 ? "driver_version, runtime_version" : "'', ''") +
                          " FROM devices ORDER BY backend, idx, uuid";
  Stmt s(db_, path_, sql.c_str());
  std::vector<DeviceRecord> out;
  while (s.step()) {
    DeviceRecord d;
    d.uuid = s.text(0);
    d.backend = s.text(1);
    d.index = static_cast<int>(s.integer(2));
    d.name = s.text(3);
    d.pci_bus_id = s.text(4);
    d.first_seen = s.real(5);
    d.last_seen = s.real(6);
    d.driver_version = s.text(7);
    d.runtime_version = s.text(8);
    out.push_back(std::move(d));
  }
  return out;
}

ProbeTotals History::probe_totals(const std::string& device_uuid, const std::string& probe) const {
  Stmt s(db_, path_,
         "SELECT COALESCE(SUM(outcome != 'skipped'), 0), COALESCE(SUM(outcome IN ('fail', 'device_error')), 0), "
         "COALESCE((SELECT duration_s FROM results WHERE device_uuid = ?1 AND probe = ?2 AND attempt = 0 "
         "ORDER BY id DESC LIMIT 1), 0) FROM results WHERE device_uuid = ?1 AND probe = ?2 AND attempt = 0");
  s.bind(1, device_uuid).bind(2, probe);
  s.step();
  return {s.u64(0), s.u64(1), s.real(2)};
}

std::vector<std::string> History::probes_seen(const std::string& device_uuid) const {
  Stmt s(db_, path_, "SELECT DISTINCT probe FROM results WHERE device_uuid = ?1 ORDER BY probe");
  s.bind(1, device_uuid);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

double History::last_result_at(const std::string& device_uuid) const {
  Stmt s(db_, path_, "SELECT COALESCE(MAX(recorded_at), 0) FROM results WHERE device_uuid = ?1");
  s.bind(1, device_uuid).step();
  return s.real(0);
}

std::optional<QuarantineRecord> History::active_quarantine(const std::string& device_uuid) const {
  Stmt s(db_, path_,
         "SELECT id, reason, since FROM quarantine WHERE device_uuid = ?1 AND released_at = 0 ORDER BY id LIMIT 1");
  s.bind(1, device_uuid);
  if (!s.step()) return std::nullopt;
  QuarantineRecord q;
  q.id = s.integer(0);
  q.device_uuid = device_uuid;
  q.reason = s.text(1);
  q.since = s.real(2);
  return q;
}

void History::quarantine(const std::string& device_uuid, const std::string& reason, double now) {
  Transaction tx(db_, path_);
  Stmt s(db_, path_, "INSERT INTO quarantine(device_uuid, reason, since) VALUES(?1, ?2, ?3)");
  s.bind(1, device_uuid).bind(2, reason).bind(3, now).step();
  tx.commit();
}

void History::release(const std::string& device_uuid, const std::string& by, double now) {
  Transaction tx(db_, path_);
  Stmt s(db_, path_,
         "UPDATE quarantine SET released_at = ?2, released_by = ?3 WHERE device_uuid = ?1 AND released_at = 0");
  s.bind(1, device_uuid).bind(2, now).bind(3, by).step();
  tx.commit();
}

double History::last_release_at(const std::string& device_uuid) const {
  Stmt s(db_, path_, "SELECT COALESCE(MAX(released_at), 0) FROM quarantine WHERE device_uuid = ?1");
  s.bind(1, device_uuid).step();
  return s.real(0);
}

std::vector<QuarantineRecord> History::quarantines() const {
  Stmt s(db_, path_, "SELECT id, device_uuid, reason, since, released_at, released_by FROM quarantine ORDER BY id");
  std::vector<QuarantineRecord> out;
  while (s.step()) {
    QuarantineRecord q;
    q.id = s.integer(0);
    q.device_uuid = s.text(1);
    q.reason = s.text(2);
    q.since = s.real(3);
    q.released_at = s.real(4);
    q.released_by = s.text(5);
    out.push_back(std::move(q));
  }
  return out;
}

std::vector<ResultRecord> History::transient_faults(const std::string& device_uuid, double since) const {
  const std::string sql = std::string("SELECT ") + kResultColumns + result_vote_columns(version_) +
                          " FROM results x JOIN runs r ON r.id = x.run_id WHERE x.device_uuid = ?1"
                          " AND x.recorded_at >= ?2 AND x.attempt = 0 AND x.fault IN ('transient', 'device_error')"
                          " ORDER BY x.id";
  Stmt s(db_, path_, sql.c_str());
  s.bind(1, device_uuid).bind(2, since);
  std::vector<ResultRecord> out;
  while (s.step()) out.push_back(read_result(s, path_));
  return out;
}

int History::clean_sweeps_since(const std::string& device_uuid, double since) const {
  Stmt s(db_, path_,
         "SELECT COUNT(*) FROM runs r WHERE r.mode = 'sweep' AND r.status = 'complete' AND r.started_at >= ?2 "
         "AND EXISTS (SELECT 1 FROM results x WHERE x.run_id = r.id AND x.device_uuid = ?1 AND x.outcome = 'pass') "
         "AND NOT EXISTS (SELECT 1 FROM results x WHERE x.run_id = r.id AND x.device_uuid = ?1 "
         "AND x.outcome IN ('fail', 'device_error'))");
  s.bind(1, device_uuid).bind(2, since).step();
  return static_cast<int>(s.integer(0));
}

std::string History::state(const std::string& key, const std::string& fallback) const {
  Stmt s(db_, path_, "SELECT value FROM state WHERE key = ?1");
  s.bind(1, key);
  return s.step() ? s.text(0) : fallback;
}

void History::set_state(const std::string& key, const std::string& value) {
  Transaction tx(db_, path_);
  Stmt s(db_, path_,
         "INSERT INTO state(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  s.bind(1, key).bind(2, value).step();
  tx.commit();
}

}  // namespace sdc
