#include "fleet/fleet_sdc_ingest.hpp"

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "fleet/store_writer.hpp"
#include "host/device.hpp"
#include "host/error.hpp"
#include "host/input_file.hpp"
#include "host/time.hpp"
#include "probes/result.hpp"
#include "scheduler/consensus/consensus.hpp"
#include "scheduler/sweep/history.hpp"

namespace sdc {
namespace {

namespace dom = simdjson::dom;

// Where a field lies, made into text only for an error: "results[3].records[0].".
struct At {
  const At* parent = nullptr;
  const char* array = nullptr;  // null: the top level
  size_t index = 0;
  std::string text() const {
    return (parent ? parent->text() : "") + (array ? array + ("[" + std::to_string(index) + "].") : "");
  }
};

// Reads one report's fields; every error names the file and the field.
class ReportReader {
 public:
  explicit ReportReader(const std::string& name) : name_(name) {}

  InputError bad(const std::string& field, const std::string& why) const {
    return InputError(name_ + ": " + field + ": " + why);
  }

  dom::element field(dom::object o, const char* key, const At& at) const {
    dom::element e;
    if (o[key].get(e) != simdjson::SUCCESS) throw bad(at.text() + key, "missing");
    return e;
  }
  bool has(dom::object o, const char* key) const {
    dom::element e;
    return o[key].get(e) == simdjson::SUCCESS && !e.is_null();
  }
  std::string_view text(dom::element e, const char* key, const At& at) const {
    std::string_view v;
    if (e.get_string().get(v) != simdjson::SUCCESS) throw bad(at.text() + key, "not a string");
    return v;
  }
  std::string_view text(dom::object o, const char* key, const At& at) const { return text(field(o, key, at), key, at); }
  uint64_t unsigned_number(dom::element e, const char* key, const At& at) const {
    uint64_t v;
    if (e.get_uint64().get(v) != simdjson::SUCCESS) throw bad(at.text() + key, "not an unsigned integer");
    return v;
  }
  uint64_t unsigned_number(dom::object o, const char* key, const At& at) const {
    return unsigned_number(field(o, key, at), key, at);
  }
  int64_t integer(dom::object o, const char* key, const At& at, int64_t lo, int64_t hi) const {
    int64_t v;
    if (field(o, key, at).get_int64().get(v) != simdjson::SUCCESS || v < lo || v > hi) {
      throw bad(at.text() + key, "not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return v;
  }
  double seconds(dom::element e, const char* key, const At& at) const {
    double v;
    if (e.get_double().get(v) != simdjson::SUCCESS || !std::isfinite(v) || v < 0) {
      throw bad(at.text() + key, "not a finite number of seconds >= 0");
    }
    return v;
  }
  dom::object object(dom::element e, const At& at) const {
    dom::object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) {
      const std::string where = at.text();
      throw bad(where.empty() ? "(file)" : where.substr(0, where.size() - 1), "not an object");
    }
    return o;
  }
  dom::array array(dom::element e, const char* key, const At& at) const {
    dom::array a;
    if (e.get_array().get(a) != simdjson::SUCCESS) throw bad(at.text() + key, "not an array");
    return a;
  }
  dom::array array(dom::object o, const char* key, const At& at) const { return array(field(o, key, at), key, at); }
  Digest128 digest(std::string_view hex, const char* key, const At& at) const {
    try {
      return parse_digest(std::string(hex));
    } catch (const std::invalid_argument& e) {
      throw bad(at.text() + key, e.what());
    }
  }
  double utc_time(dom::object o, const char* key, const At& at) const {
    const std::string_view t = text(o, key, at);
    try {
      return static_cast<double>(parse_rfc3339_ns(t)) / 1e9;
    } catch (const InputError&) {
      throw bad(at.text() + key, "expected a UTC time like 2026-12-01T15:00:00Z");
    }
  }

 private:
  const std::string& name_;
};

// A result's fields, found in one pass over its object (o[key] scans the object again for each key,
// and a fleet has millions of results). A repeated key keeps its first value, as o[key] would.
enum ResultField { kProbe, kDeviceUuid, kOutcome, kSeed, kDurationS, kRecords, kDigest, kGoldenDigest, kParams };
constexpr std::string_view kResultKeys[] = {"probe",   "device_uuid", "outcome",       "seed",  "duration_s",
                                            "records", "digest",      "golden_digest", "params"};
constexpr size_t kResultFields = sizeof kResultKeys / sizeof kResultKeys[0];

class ResultFields {
 public:
  explicit ResultFields(dom::object o) {
    for (const dom::key_value_pair kv : o) {
      for (size_t f = 0; f < kResultFields; ++f) {
        if (!found_[f] && kv.key == kResultKeys[f]) {
          value_[f] = kv.value;
          found_[f] = true;
          break;
        }
      }
    }
  }
  dom::element get(ResultField f, const ReportReader& r, const At& at) const {
    if (!found_[f]) throw r.bad(at.text() + std::string(kResultKeys[f]), "missing");
    return value_[f];
  }
  bool has(ResultField f) const { return found_[f] && !value_[f].is_null(); }

 private:
  dom::element value_[kResultFields];
  bool found_[kResultFields] = {};
};

// A device of the report: the fields its class depends on, viewed in the parsed document.
struct ReportDevice {
  std::string_view uuid, backend, name, compute_capability, driver_version, runtime_version;
  int compute_units = 0;
  FleetDevice* tallied = nullptr;

  DeviceIdentity identity() const {
    DeviceIdentity d;
    d.backend = backend;
    d.name = name;
    d.compute_units = compute_units;
    d.compute_capability = compute_capability;
    d.driver_version = driver_version;
    d.runtime_version = runtime_version;
    return d;
  }
};

// The vote of `key`, made from the report's prototype when new.
VoteTally& find_vote(FleetTally& tally, std::string&& key, const VoteTally& proto, const std::string& class_key,
                     const std::string& probe, const FleetDevice& device) {
  auto [it, added] = tally.votes.try_emplace(std::move(key));
  VoteTally& vote = it->second;
  if (added) {
    vote.seed = proto.seed;
    vote.config = proto.config;
    vote.class_key = class_key;
    vote.probe = probe;
    vote.model = device.model;
    vote.driver = device.driver;
  }
  return vote;
}

void add_member(VoteTally& vote, const Digest128& digest, const std::optional<Digest128>& golden,
                const FleetDevice& device, bool failed, double at) {
  keep_golden(vote, golden);
  vote.digests[{digest.hi, digest.lo}].add(device.id, failed, at);
}

// Whether two devices fall in one equivalence class (equivalence_class's fields).
bool same_class(const ReportDevice& a, const ReportDevice& b) {
  return a.backend == b.backend && a.name == b.name && a.compute_units == b.compute_units &&
         a.compute_capability == b.compute_capability && a.driver_version == b.driver_version &&
         a.runtime_version == b.runtime_version;
}

// A history's time (seconds, to the nanosecond) to the microsecond, as the fleet store keeps it, so
// that a history read here and through the store gives the same times.
double store_time(double unix_s) { return static_cast<double>(std::llround(unix_s * 1e6)) / 1e6; }

void ingest_file(const std::string& path, FleetTally& tally) {
  ++tally.files;
  if (const std::optional<std::string> text = read_fleet_file(path)) return ingest_report_text(path, *text, tally);
  ingest_history(path, tally);
}

}  // namespace

void ingest_report_text(const std::string& name, std::string_view text, FleetTally& tally) {
  thread_local dom::parser parser;
  const ReportReader r(name);
  const At top_at;
  dom::element doc;
  if (const auto error = parser.parse(text.data(), text.size()).get(doc); error != simdjson::SUCCESS) {
    throw r.bad("(file)", std::string("not JSON: ") + simdjson::error_message(error));
  }
  const dom::object top = r.object(doc, top_at);
  if (r.text(top, "tool", top_at) != "sdcprobe") throw r.bad("tool", "not an sdcprobe report");
  const std::string host(r.text(top, "host", top_at));
  const double at = r.utc_time(top, "started_at", top_at);
  VoteTally proto;
  proto.seed = r.unsigned_number(top, "seed", top_at);
  const auto optional_number = [&](const char* key) {
    return r.has(top, key) ? std::optional<uint64_t>(r.unsigned_number(top, key, top_at)) : std::nullopt;
  };
  proto.config = vote_config(r.text(top, "level", top_at), optional_number("size_bytes"), optional_number("iterations"));
  if (r.has(top, "injections") && r.array(top, "injections", top_at).size() > 0) ++tally.with_injections;

  std::vector<ReportDevice> devices;
  size_t i = 0;
  for (dom::element e : r.array(top, "devices", top_at)) {
    const At at_d{&top_at, "devices", i++};
    const dom::object o = r.object(e, at_d);
    ReportDevice d;
    d.uuid = r.text(o, "uuid", at_d);
    for (const auto& other : devices) {
      if (other.uuid == d.uuid) throw r.bad(at_d.text() + "uuid", "a second device with it");
    }
    const std::string_view pci_bus_id = r.text(o, "pci_bus_id", at_d);
    d.name = r.text(o, "name", at_d);
    d.backend = r.text(o, "backend", at_d);
    d.compute_units = static_cast<int>(r.integer(o, "compute_units", at_d, 0, 1 << 20));
    d.compute_capability = r.text(o, "compute_capability", at_d);
    d.driver_version = r.text(o, "driver_version", at_d);
    d.runtime_version = r.text(o, "runtime_version", at_d);
    FleetDevice& f = tally.device(fleet_device_key(host, d.uuid));
    if (f.uuid.empty()) {
      f.host = host;
      f.uuid = d.uuid;
    }
    f.seen(at, pci_bus_id, d.name, d.driver_version, d.backend);
    d.tallied = &f;
    devices.push_back(d);
  }
  // Results come device by device: the search for a result's device starts at the last one found.
  size_t last_device = 0;
  auto find_device = [&](std::string_view uuid) -> const ReportDevice* {
    for (size_t k = 0; k < devices.size(); ++k) {
      const size_t at_k = (last_device + k) % devices.size();
      if (devices[at_k].uuid == uuid) return &devices[last_device = at_k];
    }
    return nullptr;
  };
  // The last digest read: a node's devices mostly agree, so most digests are parsed once per report.
  std::string_view last_digest_hex;
  Digest128 last_digest{};

  i = 0;
  thread_local ProbeResult result;  // reused: only its probe, seed and params are read
  struct {
    const ReportDevice* device = nullptr;
    std::string probe, library, algorithm;
    uint64_t seed = 0;
    VoteTally* vote = nullptr;
  } last;
  for (dom::element e : r.array(top, "results", top_at)) {
    const At at_r{&top_at, "results", i++};
    const ResultFields o(r.object(e, at_r));
    result.probe = r.text(o.get(kProbe, r, at_r), "probe", at_r);
    const ReportDevice* dev = find_device(r.text(o.get(kDeviceUuid, r, at_r), "device_uuid", at_r));
    if (dev == nullptr) throw r.bad(at_r.text() + "device_uuid", "names no device of the report");
    const std::string_view outcome = r.text(o.get(kOutcome, r, at_r), "outcome", at_r);
    if (outcome != "pass" && outcome != "fail" && outcome != "skipped" && outcome != "device_error") {
      throw r.bad(at_r.text() + "outcome",
                  "expected pass, fail, skipped or device_error, got '" + std::string(outcome) + "'");
    }
    result.seed = r.unsigned_number(o.get(kSeed, r, at_r), "seed", at_r);
    const double duration = r.seconds(o.get(kDurationS, r, at_r), "duration_s", at_r);
    ++tally.results;
    if (outcome == "skipped") {
      ++tally.skipped;
      continue;
    }
    FleetDevice& device = *dev->tallied;
    const bool failed = outcome != "pass";
    FamilyCounts& family = device.families[probe_family(result.probe)];
    const int64_t tested_ns = std::llround(duration * 1e9);
    ++family.results;
    family.tested_ns += tested_ns;
    dom::object burn;
    if (o.has(kParams) && o.get(kParams, r, at_r).get_object().get(burn) == simdjson::SUCCESS &&
        (r.has(burn, "samples") || r.has(burn, "wrong_results"))) {
      // A burn's conditions, read as the store's writer reads them (rare: a few results per run).
      device.add_conditions(result_conditions(nlohmann::json::parse(simdjson::to_string(burn))), failed, tested_ns);
    }
    if (failed) {
      ++family.failures;
      family.first_failure = family.first_failure == 0 ? at : std::min(family.first_failure, at);
      ++tally.failures_by_day[{device.model, static_cast<int64_t>(std::floor(at / 86400))}];
    }
    size_t k = 0;
    for (dom::element m : r.array(o.get(kRecords, r, at_r), "records", at_r)) {
      const At at_m{&at_r, "records", k++};
      const dom::object rec = r.object(m, at_m);
      FaultSite site;
      site.probe = result.probe;
      site.at = at;
      site.record = static_cast<int>(k - 1);
      if (r.has(rec, "byte_offset")) site.byte_offset = r.integer(rec, "byte_offset", at_m, 0, INT64_MAX);
      if (r.has(rec, "unit")) site.unit = static_cast<int>(r.integer(rec, "unit", at_m, 0, 1 << 20));
      if (r.has(rec, "lane")) site.lane = static_cast<int>(r.integer(rec, "lane", at_m, 0, 1 << 20));
      if (r.has(rec, "bits")) {
        size_t b = 0;
        for (dom::element bit : r.array(rec, "bits", at_m)) {
          int64_t v;
          if (bit.get_int64().get(v) != simdjson::SUCCESS || v < 0 || v > 63) {
            throw r.bad(at_m.text() + "bits[" + std::to_string(b) + "]", "not a bit position in [0, 63]");
          }
          ++b;
          site.bits.push_back(static_cast<int>(v));
        }
      }
      device.add_site(std::move(site));
    }
    if (!o.has(kDigest)) continue;
    const std::string_view hex = r.text(o.get(kDigest, r, at_r), "digest", at_r);
    if (last_digest_hex.empty() || hex != last_digest_hex) {
      last_digest = r.digest(hex, "digest", at_r);
      last_digest_hex = hex;
    }
    std::optional<Digest128> golden;
    if (o.has(kGoldenDigest)) {
      golden = r.digest(r.text(o.get(kGoldenDigest, r, at_r), "golden_digest", at_r), "golden_digest", at_r);
    }
    const At at_p{&at_r, nullptr, 0};
    const dom::object params = r.object(o.get(kParams, r, at_r), at_p);
    const std::string_view library = r.has(params, "library_version") ? r.text(params, "library_version", at_p) : "";
    const std::string_view algorithm = r.has(params, "algorithm") ? r.text(params, "algorithm", at_p) : "";
    // A node's devices are mostly of one class and run the same probe: its vote is found once.
    if (last.vote == nullptr || !same_class(*last.device, *dev) || last.probe != result.probe ||
        last.seed != result.seed || last.library != library || last.algorithm != algorithm) {
      result.params = nlohmann::json::object();
      if (r.has(params, "library_version")) result.params["library_version"] = std::string(library);
      if (r.has(params, "algorithm")) result.params["algorithm"] = std::string(algorithm);
      // The class holds the seed; the level, --size and --iterations set the rest of the inputs.
      const std::string class_key = equivalence_class(dev->identity(), result);
      last = {dev,
              result.probe,
              std::string(library),
              std::string(algorithm),
              result.seed,
              &find_vote(tally, vote_key(class_key, result.probe, proto.config), proto, class_key,
                         result.probe, device)};
    }
    add_member(*last.vote, last_digest, golden, device, failed, at);
  }
  ++tally.reports;
}

void ingest_history(const std::string& path, FleetTally& tally) {
  const History history(path, 10000, History::Access::kReadOnly);
  ++tally.histories;
  std::map<int64_t, RunRecord> runs;
  for (auto& run : history.runs()) runs[run.id] = std::move(run);
  std::map<int64_t, VoteTally> protos;  // run id -> its seed and the parameters its digests depend on
  for (const auto& [id, run] : runs) {
    VoteTally& proto = protos[id];
    proto.seed = run.seed;
    proto.config = vote_config(run.level, run.size_bytes, run.iterations);
  }
  std::map<std::string, DeviceRecord> known;
  for (const auto& d : history.devices()) known[d.uuid] = d;
  std::map<std::string, double> released;
  for (const auto& [uuid, d] : known) released[uuid] = store_time(history.last_release_at(uuid));
  for (const auto& r : history.results()) {
    ++tally.results;
    if (r.attempt != 0) continue;  // the re-run with a new seed after a failure: the same fault
    if (r.outcome == "skipped") {
      ++tally.skipped;
      continue;
    }
    const auto d = known.find(r.device_uuid);
    if (d == known.end()) throw InputError(path + ": results: device " + r.device_uuid + " is not in its devices");
    const auto run = runs.find(r.run_id);
    if (run == runs.end())
      throw InputError(path + ": results: run " + std::to_string(r.run_id) + " is not in its runs");
    const std::string& host = run->second.host;
    FleetDevice& device = tally.device(fleet_device_key(host, r.device_uuid));
    if (device.uuid.empty()) {
      device.host = host;
      device.uuid = r.device_uuid;
    }
    device.released_at = std::max(device.released_at, released[r.device_uuid]);
    const double at = store_time(r.recorded_at);
    device.seen(at, d->second.pci_bus_id, d->second.name, d->second.driver_version, d->second.backend);
    FamilyCounts& family = device.families[probe_family(r.probe)];
    const int64_t tested_ns = std::llround(r.duration_s * 1e9);
    ++family.results;
    family.tested_ns += tested_ns;
    const bool failed = r.outcome != "pass";
    device.add_conditions(result_conditions(path, r), failed, tested_ns);
    if (!r.class_key) {
      ++tally.results_without_digests;
    } else if (r.digest) {
      VoteTally& vote = find_vote(tally, vote_key(*r.class_key, r.probe, protos[r.run_id].config),
                                  protos[r.run_id], *r.class_key, r.probe, device);
      add_member(vote, *r.digest, r.golden_digest, device, failed, at);
    }
    if (!failed) continue;
    ++family.failures;
    family.first_failure = family.first_failure == 0 ? at : std::min(family.first_failure, at);
    ++tally.failures_by_day[{device.model, static_cast<int64_t>(std::floor(at / 86400))}];
    if (device.released_at > 0)
      ++(at < device.released_at ? device.failures_before_release : device.failures_after_release);
  }
}

std::optional<std::string> read_fleet_file(const std::string& path) {
  std::ifstream in = open_input(path, "report");
  const std::string sqlite("SQLite format 3\0", 16);
  std::string head(sqlite.size(), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head == sqlite) return std::nullopt;
  return head + read_rest(in, path, "report");
}

std::vector<std::string> fleet_input_files(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      files.push_back(p);
      continue;
    }
    std::vector<std::string> inside;
    for (const auto& entry : fs::directory_iterator(p, ec)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file() && (entry.path().extension() == ".json" || name == kHistoryFile)) {
        inside.push_back(entry.path().string());
      }
    }
    if (ec) throw InputError(p + ": cannot list the directory: " + ec.message());
    std::sort(inside.begin(), inside.end());
    files.insert(files.end(), inside.begin(), inside.end());
  }
  if (files.empty()) {
    std::string named;
    for (const auto& p : paths) named += (named.empty() ? "" : ", ") + p;
    throw InputError("no JSON report or " + std::string(kHistoryFile) + " in " + named);
  }
  return files;
}

FleetTally ingest_fleet(const std::vector<std::string>& paths, unsigned threads, Progress* progress) {
  const std::vector<std::string> files = fleet_input_files(paths);
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, std::max<size_t>(files.size(), 1));
  std::vector<FleetTally> tallies(threads);
  if (progress) progress->start("files", files.size(), "results");
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex error_lock;
  size_t error_at = files.size();
  std::string error;
  auto work = [&](FleetTally& tally) {
    for (size_t k; !stop && (k = next++) < files.size();) {
      try {
        const uint64_t results = tally.results;
        ingest_file(files[k], tally);
        if (progress) progress->add(1, tally.results - results);
      } catch (const std::exception& e) {
        // The first bad file in the order given, whichever thread read it.
        const std::lock_guard<std::mutex> hold(error_lock);
        if (k < error_at) {
          error_at = k;
          error = e.what();
        }
        stop = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, std::ref(tallies[t]));
  work(tallies[0]);
  for (auto& t : pool) t.join();
  if (progress) progress->finish();
  if (error_at < files.size()) throw InputError(error);
  for (unsigned t = 1; t < threads; ++t) tallies[0].merge(std::move(tallies[t]));
  tallies[0].order_members();
  return std::move(tallies[0]);
}

}  // namespace sdc
