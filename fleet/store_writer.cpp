#include "fleet/store_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "fleet/fleet_sdc_tally.hpp"
#include "host/atomic_file.hpp"
#include "host/byte_digest.hpp"
#include "host/error.hpp"
#include "host/time.hpp"
#include "scheduler/consensus/consensus.hpp"

namespace sdc {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTables[] = {"results", "sites", "devices", "quarantine", "jobs"};

// One NDJSON object: columns appended in the order written, then end().
class Row {
 public:
  explicit Row(std::string& out) : out_(out) {
    out_ += '{';
    integer("schema_version", kStoreSchemaVersion);
  }
  Row& text(const char* k, std::string_view v) {
    key(k);
    out_ += '"';
    for (const char c : v) {
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
        out_ += escaped;
      } else {
        out_ += c;
      }
    }
    out_ += '"';
    return *this;
  }
  // Empty text is null: the columns written this way have no meaningful empty value.
  Row& text_or_null(const char* k, std::string_view v) { return v.empty() ? null(k) : text(k, v); }
  Row& integer(const char* k, int64_t v) {
    key(k);
    append(v);
    return *this;
  }
  Row& integer(const char* k, std::optional<uint64_t> v) { return v ? integer(k, static_cast<int64_t>(*v)) : null(k); }
  Row& number(const char* k, double v) {  // NaN and infinities: null
    if (!std::isfinite(v)) return null(k);
    key(k);
    append(v);
    return *this;
  }
  Row& boolean(const char* k, bool v) {
    key(k);
    out_ += v ? "true" : "false";
    return *this;
  }
  Row& null(const char* k) {
    key(k);
    out_ += "null";
    return *this;
  }
  Row& ints(const char* k, const std::vector<int>& v) {
    key(k);
    out_ += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out_ += ',';
      append(v[i]);
    }
    out_ += ']';
    return *this;
  }
  void end() { out_ += "}\n"; }

 private:
  void key(const char* k) {
    if (out_.back() != '{') out_ += ',';
    out_ += '"';
    out_ += k;
    out_ += "\":";
  }
  template <typename T>
  void append(T v) {  // the shortest text that reads back as v
    char buf[32];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }
  std::string& out_;
};

std::string hex64(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(v));
  return text;
}

// A host name as the start of a file name: only letters, digits, '.', '-' and '_' are kept, and it
// never starts hidden ('.' or '_').
std::string file_host(std::string_view host) {
  std::string h;
  for (const char c : host) h += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
  if (h.empty() || h.front() == '.' || h.front() == '_') h.insert(0, "h");
  return h;
}

std::string key_of(const std::string& identity) {
  return digest_hex(digest_host_bytes(identity.data(), identity.size())).substr(0, 16);
}

// What a results row holds besides its device and result.
struct RunColumns {
  std::string run_key, host, mode, level;
  std::optional<uint64_t> size_bytes, iterations;
  uint64_t run_seed = 0;
  std::optional<bool> injected;  // unknown for a history's rows
};

struct DeviceColumns {
  std::string_view uuid, pci_bus_id, model, driver, backend;
};

struct ResultColumns {
  std::string_view probe, outcome;
  const std::optional<std::string>& class_key;
  uint64_t seed = 0;
  int attempt = 0;
  double duration_s = 0;
  uint64_t checked = 0, mismatches = 0;
  const std::optional<Digest128>& digest;
  const std::optional<Digest128>& golden_digest;
  BurnConditions conditions;
};

// The column order docs/fleet.md lists, for rows from a report and from a history alike.
void add_result_row(std::string& out, const RunColumns& run, const StoreStamp& at, const DeviceColumns& d,
                    const ResultColumns& r) {
  Row row(out);
  row.text("run_key", run.run_key)
      .text("time", at.time)
      .text("host", run.host)
      .text("mode", run.mode)
      .text("device_uuid", d.uuid)
      .text("pci_bus_id", d.pci_bus_id)
      .text("model", d.model)
      .text("driver", d.driver)
      .text("backend", d.backend);
  if (r.class_key) {
    row.text("class_key", *r.class_key);
  } else {
    row.null("class_key");
  }
  row.text("probe", r.probe)
      .text("family", probe_family(std::string(r.probe)))
      .text("level", run.level)
      .integer("size_bytes", run.size_bytes)
      .integer("iterations", run.iterations)
      .text("run_seed", hex64(run.run_seed))
      .text("seed", hex64(r.seed))
      .integer("attempt", r.attempt)
      .text("outcome", r.outcome)
      .number("duration_s", r.duration_s)
      .integer("checked", static_cast<int64_t>(r.checked))
      .integer("mismatches", static_cast<int64_t>(r.mismatches))
      .text_or_null("digest", r.digest ? digest_hex(*r.digest) : "")
      .text_or_null("golden_digest", r.golden_digest ? digest_hex(*r.golden_digest) : "");
  if (run.injected) {
    row.boolean("injected", *run.injected);
  } else {
    row.null("injected");
  }
  row.number("temperature_c", r.conditions.temperature_c)
      .number("sm_clock_mhz", r.conditions.sm_clock_mhz)
      .number("power_w", r.conditions.power_w)
      .number("power_limit_w", r.conditions.power_limit_w)
      .end();
}

void add_device_row(std::string& out, const std::string& run_key, const StoreStamp& at, const std::string& host,
                    const DeviceIdentity& d, bool identity_known) {
  const auto known = [&](uint64_t v) { return identity_known ? std::optional<uint64_t>(v) : std::nullopt; };
  Row row(out);
  row.text_or_null("run_key", run_key)
      .text("time", at.time)
      .text("host", host)
      .text("uuid", d.uuid)
      .text("pci_bus_id", d.pci_bus_id)
      .text("model", d.name)
      .text("backend", d.backend)
      .integer("compute_units", known(static_cast<uint64_t>(d.compute_units)))
      .text_or_null("compute_capability", d.compute_capability)
      .integer("memory_bytes", known(d.memory_bytes))
      .text("driver", d.driver_version)
      .text("runtime_version", d.runtime_version)
      .text_or_null("open_error", d.open_error)
      .end();
}

double number_or_nan(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_number() ? it->get<double>() : NAN;
}

BurnConditions unread_conditions() {
  BurnConditions c;
  c.temperature_c = c.sm_clock_mhz = c.power_w = c.power_limit_w = NAN;
  return c;
}

BurnConditions conditions_of(const nlohmann::json& sample) {
  BurnConditions c;
  c.temperature_c = number_or_nan(sample, "temperature_c");
  c.sm_clock_mhz = number_or_nan(sample, "sm_clock_mhz");
  c.power_w = number_or_nan(sample, "power_w");
  c.power_limit_w = number_or_nan(sample, "power_limit_w");
  return c;
}

// The identity of a report's run: what tells it from every other run, and nothing the JSON report
// does not keep exactly.
std::string run_identity(const RunReport& report) {
  std::string id = report.host + '\x1f' + report.started_at + '\x1f' + report.mode + '\x1f' +
                   std::to_string(report.rank) + '\x1f' + std::to_string(report.seed);
  for (const auto& r : report.results) {
    char duration[32];
    char* end = std::to_chars(duration, duration + sizeof duration, r.duration_s).ptr;
    id += '\x1e' + r.device_uuid + '\x1f' + r.probe + '\x1f' + outcome_name(r.outcome) + '\x1f' +
          std::to_string(r.report.checked) + '\x1f' + std::to_string(r.report.mismatches) + '\x1f' +
          std::string(duration, end) + '\x1f' + (r.digest ? digest_hex(*r.digest) : "");
  }
  return id;
}

}  // namespace

StoreStamp::StoreStamp(double unix_s) {
  const int64_t us = std::llround(unix_s * 1e6);
  const std::string whole = format_utc(static_cast<double>(us / 1000000));
  char fraction[16];
  std::snprintf(fraction, sizeof fraction, ".%06lldZ", static_cast<long long>(us % 1000000));
  time = whole.substr(0, 19) + fraction;
  day = whole.substr(0, 10);
}

std::string StoreStamp::compact() const {
  std::string c;
  for (const char ch : time.substr(0, 19)) {
    if (ch != '-' && ch != ':') c += ch;
  }
  return c + "Z";
}


BurnConditions result_conditions(const nlohmann::json& params) {
  if (!params.is_object()) return unread_conditions();
  const auto wrong = params.find("wrong_results");
  if (wrong != params.end() && wrong->is_array() && !wrong->empty() && wrong->front().is_object()) {
    const auto at = wrong->front().find("conditions");
    if (at != wrong->front().end() && at->is_object()) return conditions_of(*at);
  }
  const auto samples = params.find("samples");
  if (samples == params.end() || !samples->is_array()) return unread_conditions();
  // Under load before not; then the hotter (a sample without a temperature is never the hotter).
  const auto under_load = [](const nlohmann::json& s) {
    const auto it = s.find("under_load");
    return it != s.end() && it->is_boolean() && it->get<bool>();
  };
  const auto hotter = [](const nlohmann::json& a, const nlohmann::json& b) {
    const double ta = number_or_nan(a, "temperature_c"), tb = number_or_nan(b, "temperature_c");
    return !std::isnan(ta) && (std::isnan(tb) || ta > tb);
  };
  const nlohmann::json* best = nullptr;
  for (const auto& s : *samples) {
    if (!s.is_object()) continue;
    if (best == nullptr || under_load(s) > under_load(*best) ||
        (under_load(s) == under_load(*best) && hotter(s, *best))) {
      best = &s;
    }
  }
  return best ? conditions_of(*best) : unread_conditions();
}

BurnConditions result_conditions(const std::string& path, const ResultRecord& r) {
  if (r.params.find("\"samples\"") == std::string::npos) return unread_conditions();
  const nlohmann::json params = nlohmann::json::parse(r.params, nullptr, false);
  if (params.is_discarded()) {
    throw InputError(path + ": results: params of run " + std::to_string(r.run_id) + ", " + r.probe + " on " +
                     r.device_uuid + ": not JSON");
  }
  return result_conditions(params);
}

std::vector<StoreFile> store_files(const RunReport& report) {
  const StoreStamp at(static_cast<double>(parse_rfc3339_ns(report.started_at)) / 1e9);
  RunColumns run;
  run.run_key = key_of(run_identity(report));
  run.host = report.host;
  run.mode = report.mode;
  run.level = level_name(report.level);
  run.size_bytes = report.size_bytes;
  run.iterations = report.iterations;
  run.run_seed = report.seed;
  run.injected = !report.injections.empty();
  const std::string name = file_host(report.host) + "-" + at.compact() + "-" + run.run_key + ".ndjson";

  std::vector<StoreFile> files = {
      {"devices", at.day, name, ""}, {"sites", at.day, name, ""}, {"results", at.day, name, ""}};
  std::string& devices = files[0].rows;
  std::string& sites = files[1].rows;
  std::string& results = files[2].rows;
  for (const auto& d : report.devices) add_device_row(devices, run.run_key, at, report.host, d, true);
  for (const auto& r : report.results) {
    const auto d = std::find_if(report.devices.begin(), report.devices.end(),
                                [&](const DeviceIdentity& x) { return x.uuid == r.device_uuid; });
    if (d == report.devices.end()) {
      throw InputError("the run's result of " + r.probe + " names device " + r.device_uuid + ", not in its devices");
    }
    const std::optional<std::string> class_key = equivalence_class(*d, r);
    add_result_row(results, run, at, {d->uuid, d->pci_bus_id, d->name, d->driver_version, d->backend},
                   {r.probe, outcome_name(r.outcome), class_key, r.seed, 0, r.duration_s, r.report.checked,
                    r.report.mismatches, r.digest, r.golden_digest, result_conditions(r.params)});
    for (size_t k = 0; k < r.report.records.size(); ++k) {
      const MismatchRecord& m = r.report.records[k];
      const bool memory = is_memory_probe(r.probe);
      const auto located = [&](int v) { return !memory && v >= 0 ? std::optional<uint64_t>(v) : std::nullopt; };
      Row(sites)
          .text("run_key", run.run_key)
          .text("time", at.time)
          .text("host", report.host)
          .text("device_uuid", r.device_uuid)
          .text("probe", r.probe)
          .integer("attempt", 0)
          .integer("record", static_cast<int64_t>(k))
          .integer("element_index", static_cast<int64_t>(m.index))
          .integer("byte_offset", memory ? std::optional<uint64_t>(m.index * 8) : std::nullopt)
          .integer("unit", located(m.unit))
          .integer("lane", located(m.lane))
          .integer("width_bits", m.width_bits)
          .text("expected", hex64(m.expected))
          .text("observed", hex64(m.observed))
          .ints("bits", m.bit_positions())
          .boolean("preempted", m.preempted)
          .end();
    }
  }
  files.erase(std::remove_if(files.begin(), files.end(), [](const StoreFile& f) { return f.rows.empty(); }),
              files.end());
  return files;
}

std::vector<StoreFile> store_files(const History& history, const std::string& path) {
  const std::vector<RunRecord> runs = history.runs();
  if (runs.empty()) return {};
  std::map<int64_t, const RunRecord*> run_of;
  for (const auto& run : runs) run_of[run.id] = &run;
  std::map<std::string, DeviceIdentity> device_of;
  for (const auto& d : history.devices()) {
    DeviceIdentity& id = device_of[d.uuid];
    id.uuid = d.uuid;
    id.backend = d.backend;
    id.name = d.name;
    id.pci_bus_id = d.pci_bus_id;
    id.driver_version = d.driver_version;
    id.runtime_version = d.runtime_version;
  }
  // The node's name: its latest run's (a history is one node's).
  const std::string& host = runs.back().host;
  const std::string name =
      file_host(host) + "-history-" +
      key_of(host + '\x1f' + std::to_string(runs.front().id) + '\x1f' + std::to_string(runs.front().started_at)) +
      ".ndjson";
  std::map<std::pair<std::string, std::string>, std::string> rows;  // (table, day) -> rows

  for (const auto& r : history.results()) {
    const auto run = run_of.find(r.run_id);
    if (run == run_of.end())
      throw InputError(path + ": results: run " + std::to_string(r.run_id) + " is not in its runs");
    const auto d = device_of.find(r.device_uuid);
    if (d == device_of.end()) throw InputError(path + ": results: device " + r.device_uuid + " is not in its devices");
    const RunRecord& rr = *run->second;
    const BurnConditions conditions = result_conditions(path, r);
    RunColumns run_columns;
    run_columns.run_key = key_of(rr.host + '\x1f' + std::to_string(rr.id) + '\x1f' + std::to_string(rr.started_at) +
                                 '\x1f' + std::to_string(rr.seed));
    run_columns.host = rr.host;
    run_columns.mode = r.mode.empty() ? rr.mode : r.mode;
    run_columns.level = rr.level;
    run_columns.size_bytes = rr.size_bytes;
    run_columns.iterations = rr.iterations;
    run_columns.run_seed = rr.seed;
    const StoreStamp at(r.recorded_at);
    const DeviceIdentity& id = d->second;
    add_result_row(rows[{"results", at.day}], run_columns, at,
                   {id.uuid, id.pci_bus_id, id.name, id.driver_version, id.backend},
                   {r.probe, r.outcome, r.class_key, r.seed, r.attempt, r.duration_s, r.checked, r.mismatches, r.digest,
                    r.golden_digest, conditions});
  }
  for (const auto& d : history.devices()) {
    const StoreStamp at(d.last_seen);
    add_device_row(rows[{"devices", at.day}], "", at, host, device_of[d.uuid], false);
  }
  for (const auto& q : history.quarantines()) {
    const auto event = [&](const char* what, double when, std::string_view by) {
      const StoreStamp at(when);
      Row(rows[{"quarantine", at.day}])
          .text("time", at.time)
          .text("host", host)
          .text("device_uuid", q.device_uuid)
          .integer("quarantine_id", q.id)
          .text("event", what)
          .text("reason", q.reason)
          .text_or_null("released_by", by)
          .end();
    };
    event("quarantined", q.since, "");
    if (q.released_at > 0) event("released", q.released_at, q.released_by);
  }
  std::vector<StoreFile> files;
  for (auto& [where, text] : rows) files.push_back({where.first, where.second, name, std::move(text)});
  return files;
}

StoreFile job_store_file(const JobRow& job, double at) {
  const StoreStamp stamp(at);
  std::string rows;
  Row row(rows);
  row.text("time", stamp.time)
      .integer("job_id", job.job_id)
      .integer("wall_ns", job.wall_ns)
      .integer("productive_ns", job.productive_ns);
  for (const JobRow::Category& c : job.categories) {
    row.integer((c.key + "_ns").c_str(), c.ns).integer((c.key + "_sdc_ns").c_str(), c.sdc_ns);
  }
  row.text("summary", job.summary).end();
  return {"jobs", stamp.day, "job-" + std::to_string(job.job_id) + ".ndjson", std::move(rows)};
}

void prepare_store(const std::string& dir) {
  const auto fail = [&](const std::string& why) { throw InputError("--store: cannot write " + dir + ": " + why); };
  if (dir.empty()) fail("an empty path");
  for (const char* table : kTables) {
    const fs::path folder = fs::path(dir) / table;
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) fail(ec.message());
    if (!fs::is_directory(folder, ec)) fail(folder.string() + " is not a directory");
    std::string probe = (folder / ".sdcprobe-write-check.XXXXXX").string();
    const int fd = ::mkostemp(probe.data(), O_CLOEXEC);
    if (fd < 0) fail(folder.string() + ": " + std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
  }
}

void publish_store_files(const std::string& dir, const std::vector<StoreFile>& files) {
  std::vector<std::pair<std::string, std::string>> batch;
  for (const bool results : {false, true}) {
    for (const StoreFile& f : files) {
      if ((f.table == "results") != results) continue;
      const fs::path folder = fs::path(dir) / f.table / ("day=" + f.day);
      std::error_code ec;
      fs::create_directories(folder, ec);
      if (ec) throw InputError("cannot write " + folder.string() + ": " + ec.message());
      batch.emplace_back((folder / f.name).string(), f.rows);
    }
  }
  write_files_atomically(batch);
}

}  // namespace sdc
