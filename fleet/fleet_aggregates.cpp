#include "fleet/fleet_aggregates.hpp"

#include <simdjson.h>
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include "host/error.hpp"
#include "host/input_file.hpp"
#include "host/subprocess.hpp"
#include "probes/result.hpp"

namespace sdc {
namespace {

namespace dom = simdjson::dom;
namespace fs = std::filesystem;

// One row of an aggregate table; every error names the file, the line and the field.
class Row {
 public:
  Row(const std::string& file, size_t line, dom::object o) : file_(file), line_(line), o_(o) {}

  InputError bad(const char* field, const std::string& why) const {
    return InputError(file_ + ":" + std::to_string(line_) + ": " + field + ": " + why);
  }
  bool null(const char* key) const {
    dom::element e;
    return o_[key].get(e) != simdjson::SUCCESS || e.is_null();
  }
  std::string text(const char* key) const {
    std::string_view v;
    if (element(key).get_string().get(v) != simdjson::SUCCESS) throw bad(key, "not a string");
    return std::string(v);
  }
  std::optional<std::string> optional_text(const char* key) const {
    return null(key) ? std::nullopt : std::optional<std::string>(text(key));
  }
  uint64_t count(const char* key) const {
    uint64_t v;
    if (element(key).get_uint64().get(v) != simdjson::SUCCESS) throw bad(key, "not an unsigned integer");
    return v;
  }
  std::optional<uint64_t> optional_count(const char* key) const {
    return null(key) ? std::nullopt : std::optional<uint64_t>(count(key));
  }
  int64_t integer(const char* key) const {
    int64_t v;
    if (element(key).get_int64().get(v) != simdjson::SUCCESS) throw bad(key, "not an integer");
    return v;
  }
  // A time in microseconds since the epoch, as Unix seconds.
  double time(const char* key) const {
    const int64_t us = integer(key);
    if (us < 0) throw bad(key, "a time before 1970");
    return static_cast<double>(us) / 1e6;
  }
  bool boolean(const char* key) const {
    bool v;
    if (element(key).get_bool().get(v) != simdjson::SUCCESS) throw bad(key, "not true or false");
    return v;
  }
  Digest128 digest(const char* key) const {
    try {
      return parse_digest(text(key));
    } catch (const std::invalid_argument& e) {
      throw bad(key, e.what());
    }
  }
  dom::array array(const char* key) const {
    dom::array a;
    if (element(key).get_array().get(a) != simdjson::SUCCESS) throw bad(key, "not an array");
    return a;
  }

 private:
  dom::element element(const char* key) const {
    dom::element e;
    if (o_[key].get(e) != simdjson::SUCCESS) throw bad(key, "missing");
    return e;
  }
  const std::string& file_;
  size_t line_;
  dom::object o_;
};

// Calls `each` for every row of DIR/TABLE's part files, in the files' name order.
void read_table(const std::string& dir, const char* table, const std::function<void(const Row&)>& each) {
  const fs::path folder = fs::path(dir) / table;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) throw InputError(folder.string() + ": missing: not fleet aggregates");
  if (!fs::exists(folder / "_SUCCESS", ec)) {
    throw InputError(folder.string() + ": incomplete: no _SUCCESS (the engine did not finish the table)");
  }
  std::vector<std::string> parts;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name[0] != '.' && name[0] != '_' && entry.path().extension() == ".json") parts.push_back(entry.path());
  }
  if (ec) throw InputError(folder.string() + ": cannot list the folder: " + ec.message());
  std::sort(parts.begin(), parts.end());
  dom::parser parser;
  for (const auto& file : parts) {
    const std::string text = read_input(file, "aggregate table");
    size_t line = 0;
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      ++line;
      const std::string_view row(text.data() + at, end - at);
      at = end + 1;
      if (row.empty()) continue;
      dom::element doc;
      dom::object o;
      if (parser.parse(row.data(), row.size()).get(doc) != simdjson::SUCCESS ||
          doc.get_object().get(o) != simdjson::SUCCESS) {
        throw InputError(file + ":" + std::to_string(line) + ": not a JSON object");
      }
      each(Row(file, line, o));
    }
  }
}

FleetDevice& known_device(FleetTally& tally, const Row& row) {
  const auto it = tally.devices.find(fleet_device_key(row.text("host"), row.text("uuid")));
  if (it == tally.devices.end()) throw row.bad("uuid", "a device the devices table does not have");
  return it->second;
}

std::string row_vote_key(const Row& row) {
  return vote_key(row.text("class_key"), row.text("probe"),
                  vote_config(row.text("level"), row.optional_count("size_bytes"), row.optional_count("iterations")));
}

uint64_t run_seed(const Row& row) {
  const std::string hex = row.text("run_seed");
  char* end = nullptr;
  errno = 0;
  const unsigned long long seed = hex.size() == 18 && hex.rfind("0x", 0) == 0 ? std::strtoull(hex.c_str(), &end, 16) : 0;
  if (end != hex.c_str() + hex.size() || errno != 0) throw row.bad("run_seed", "expected 0x and 16 hex digits");
  return seed;
}

}  // namespace

FleetTally read_fleet_aggregates(const std::string& dir) {
  FleetTally tally;
  read_table(dir, "version", [&](const Row& row) {
    if (row.count("aggregates_version") != kAggregatesVersion) {
      throw row.bad("aggregates_version", "this sdcprobe reads version " + std::to_string(kAggregatesVersion));
    }
  });
  size_t inputs = 0;
  read_table(dir, "inputs", [&](const Row& row) {
    if (++inputs > 1) throw row.bad("results", "a second row: the table has one");
    tally.results = row.count("results");
    tally.skipped = row.count("skipped");
    tally.results_without_digests = row.count("results_without_digests");
    tally.reports = row.count("reports");
    tally.with_injections = row.count("reports_with_injections");
    tally.histories = row.count("histories");
    tally.files = tally.reports + tally.histories;
  });
  if (inputs != 1) throw InputError((fs::path(dir) / "inputs").string() + ": no row: the table has one");
  read_table(dir, "devices", [&](const Row& row) {
    const std::string host = row.text("host"), uuid = row.text("uuid");
    FleetDevice& d = tally.device(fleet_device_key(host, uuid));
    if (!d.uuid.empty()) throw row.bad("uuid", "a second row for " + host + "/" + uuid);
    d.host = host;
    d.uuid = uuid;
    d.seen(row.time("first_us"), row.text("pci_bus_id"), row.text("model"), row.text("driver"), row.text("backend"));
    d.last_seen = row.time("last_us");
    d.released_at = row.time("released_us");
    d.failures_before_release = row.count("failures_before_release");
    d.failures_after_release = row.count("failures_after_release");
  });
  read_table(dir, "families", [&](const Row& row) {
    FamilyCounts& f = known_device(tally, row).families[row.text("family")];
    f.results = row.count("results");
    f.tested_ns = static_cast<int64_t>(row.count("tested_ns"));
    f.failures = row.count("failures");
    f.first_failure = row.null("first_failure_us") ? 0 : row.time("first_failure_us");
  });
  read_table(dir, "failures_by_day", [&](const Row& row) {
    tally.failures_by_day[{row.text("model"), row.integer("day_number")}] += row.count("failures");
  });
  read_table(dir, "digests", [&](const Row& row) {
    auto [it, added] = tally.votes.try_emplace(row_vote_key(row));
    VoteTally& vote = it->second;
    if (added) {
      vote.class_key = row.text("class_key");
      vote.probe = row.text("probe");
      vote.seed = run_seed(row);
      vote.config = vote_config(row.text("level"), row.optional_count("size_bytes"), row.optional_count("iterations"));
    }
    if (!row.null("golden_digest")) keep_golden(vote, row.digest("golden_digest"));
    const Digest128 digest = row.digest("digest");
    DigestTally& d = vote.digests[{digest.hi, digest.lo}];
    if (d.runs != 0) throw row.bad("digest", "a second row for this vote and digest");
    d.runs = row.count("runs");
    d.set_counts(row.count("devices"), row.count("hosts"));
  });
  read_table(dir, "members", [&](const Row& row) {
    const auto vote = tally.votes.find(row_vote_key(row));
    const Digest128 digest = row.digest("digest");
    if (vote == tally.votes.end() || vote->second.digests.count({digest.hi, digest.lo}) == 0) {
      throw row.bad("digest", "a vote and digest the digests table does not have");
    }
    DigestTally& d = vote->second.digests[{digest.hi, digest.lo}];
    if (d.members.size() >= kMaxNamedPerDigest) throw row.bad("uuid", "more devices named than a digest keeps");
    d.members.push_back({known_device(tally, row).id, row.boolean("failed"), row.time("t_us")});
  });
  read_table(dir, "conditions", [&](const Row& row) {
    FleetDevice& d = known_device(tally, row);
    const std::string kind = row.text("kind");
    if (kind != "degree" && kind != "power_pct") throw row.bad("kind", "expected degree or power_pct, got " + kind);
    BurnCounts& c = (kind == "degree" ? d.by_degree : d.by_power_pct)[row.integer("value")];
    c.results = row.count("results");
    c.failures = row.count("failures");
    c.tested_ns = static_cast<int64_t>(row.count("tested_ns"));
  });
  read_table(dir, "sites", [&](const Row& row) {
    FaultSite site;
    site.probe = row.text("probe");
    site.at = row.time("t_us");
    site.record = static_cast<int>(row.integer("record"));
    if (!row.null("byte_offset")) site.byte_offset = row.integer("byte_offset");
    if (!row.null("unit")) site.unit = static_cast<int>(row.integer("unit"));
    if (!row.null("lane")) site.lane = static_cast<int>(row.integer("lane"));
    if (!row.null("bits")) {
      for (dom::element bit : row.array("bits")) {
        int64_t b;
        if (bit.get_int64().get(b) != simdjson::SUCCESS || b < 0 || b > 63) {
          throw row.bad("bits", "not a bit position in [0, 63]");
        }
        site.bits.push_back(static_cast<int>(b));
      }
    }
    known_device(tally, row).add_site(std::move(site));
  });
  tally.order_members();
  return tally;
}

TemporaryFolder::TemporaryFolder() : path_((fs::temp_directory_path() / "sdcprobe-fleet-XXXXXX").string()) {
  if (mkdtemp(path_.data()) == nullptr) throw InputError("cannot make a temporary folder " + path_);
}

TemporaryFolder::~TemporaryFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void run_fleet_engine(const std::vector<std::string>& args, const std::string& what) {
  const char* python = std::getenv("SDCPROBE_PYTHON");
  std::vector<std::string> argv = {python && *python ? python : "python3", "-m", "sdcprobe.fleet_engine"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess engine(argv, -1);
  const int status = engine.wait();
  if (status != 0) {
    throw InputError(what + ": the fleet engine (" + argv[0] + " -m sdcprobe.fleet_engine) " +
                     describe_wait_status(status) + "; it says why above");
  }
}

FleetTally aggregate_fleet_store(const std::string& store, const std::string& since, const std::string& until) {
  const TemporaryFolder work;
  const std::string out = work.path() + "/aggregates";
  std::vector<std::string> args = {"aggregate", "--engine", "duckdb", "--store", store, "--out", out};
  if (!since.empty()) args.insert(args.end(), {"--since", since});
  if (!until.empty()) args.insert(args.end(), {"--until", until});
  run_fleet_engine(args, "--store " + store);
  return read_fleet_aggregates(out);
}

}  // namespace sdc
