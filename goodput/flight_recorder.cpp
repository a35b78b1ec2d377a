#include "goodput/flight_recorder.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "goodput/pickle_reader.hpp"
#include "host/error.hpp"
#include "host/input_file.hpp"

namespace sdc::goodput {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// How far apart the clocks of a job's hosts may be.
constexpr int64_t kClockSlackNs = 10LL * 1000 * 1000 * 1000;

[[noreturn]] void bad(const std::string& path, const std::string& field, const std::string& why) {
  throw InputError(path + ": " + field + ": " + why);
}

const json& member(const json& o, const char* key, const std::string& path, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end()) bad(path, where + key, "missing");
  return *it;
}

// An integer, or (the JSON form writes pg_status so) its decimal text.
int64_t integer(const json& v, const std::string& path, const std::string& field) {
  if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX)) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    errno = 0;
    long long n = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0' && errno == 0) return n;
  }
  bad(path, field, "must be an integer");
}

const std::string& text(const json& v, const std::string& path, const std::string& field) {
  if (!v.is_string()) bad(path, field, "must be a string");
  return v.get_ref<const std::string&>();
}

// pg_config's "ranks": "[0, 1, 2]" (a list's text), or a list.
std::vector<int> rank_list(const json& v, const std::string& path, const std::string& field) {
  json list = v;
  if (v.is_string()) {
    list = json::parse(v.get<std::string>(), nullptr, false);
    if (list.is_discarded()) bad(path, field, "must be a list of ranks");
  }
  if (!list.is_array()) bad(path, field, "must be a list of ranks");
  std::vector<int> ranks;
  for (const json& r : list) {
    if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > INT32_MAX) {
      bad(path, field, "must be a list of ranks");
    }
    ranks.push_back(r.get<int>());
  }
  return ranks;
}

std::string shape(const json& v, const std::string& path, const std::string& field) {
  if (!v.is_array()) bad(path, field, "must be a list");
  return v.dump();
}

FrEntry parse_entry(const json& e, const std::string& path, const std::string& at) {
  if (!e.is_object()) bad(path, at, "must be an object");
  FrEntry entry;
  const json& pg = member(e, "process_group", path, at + ".");
  if (!pg.is_array() || pg.size() != 2 || !pg[0].is_string() || !pg[1].is_string()) {
    bad(path, at + ".process_group", "must be [name, description]");
  }
  entry.group = pg[0].get<std::string>();
  entry.group_desc = pg[1].get<std::string>();
  entry.seq = integer(member(e, "collective_seq_id", path, at + "."), path, at + ".collective_seq_id");
  std::string op = text(member(e, "profiling_name", path, at + "."), path, at + ".profiling_name");
  entry.op = op.substr(op.find(':') == std::string::npos ? 0 : op.find(':') + 1);
  entry.input_sizes = shape(member(e, "input_sizes", path, at + "."), path, at + ".input_sizes");
  entry.output_sizes = shape(member(e, "output_sizes", path, at + "."), path, at + ".output_sizes");
  entry.input_dtypes = shape(member(e, "input_dtypes", path, at + "."), path, at + ".input_dtypes");
  entry.output_dtypes = shape(member(e, "output_dtypes", path, at + "."), path, at + ".output_dtypes");
  return entry;
}

bool is_p2p(const json& e, const std::string& path, const std::string& at) {
  auto it = e.find("is_p2p");
  if (it == e.end()) return false;
  if (!it->is_boolean()) bad(path, at + ".is_p2p", "must be true or false");
  return it->get<bool>();
}

// "2.10" -> 2; the format's major version.
int major_version(const std::string& version) { return std::atoi(version.c_str()); }

// The rank in a dump's file name: PREFIX<digits>[.json|.pkl|.pickle].
bool dump_name(const std::string& name, std::string& prefix, int& rank) {
  static const std::regex kName(R"(^(.*?)(\d+)(\.json|\.pkl|\.pickle)?$)");
  std::smatch m;
  if (!std::regex_match(name, m, kName) || m[2].length() > 9) return false;
  prefix = m[1];
  rank = std::stoi(m[2]);
  return true;
}

void check_same_job(const FrDump& first, const FrDump& d) {
  auto other = [&](const std::string& why) {
    throw InputError(d.path + ": not a dump of the same job and torch as " + first.path + ": " + why);
  };
  if (d.version != first.version) other("format version " + d.version + " against " + first.version);
  if (d.comm_lib_version != first.comm_lib_version) {
    other("library version \"" + d.comm_lib_version + "\" against \"" + first.comm_lib_version + "\"");
  }
  for (const auto& [group, ranks] : d.config_ranks) {
    auto it = first.config_ranks.find(group);
    if (it != first.config_ranks.end() && it->second != ranks) other("process group " + group + " has other ranks");
  }
  std::map<std::string, std::string> desc;
  std::map<std::pair<std::string, int64_t>, const FrEntry*> completed;
  for (const FrEntry& f : first.entries) {
    desc.emplace(f.group, f.group_desc);
    if (f.seq < first.last_enqueued.at(f.group)) completed[{f.group, f.seq}] = &f;
  }
  for (const FrEntry& e : d.entries) {
    auto it = desc.find(e.group);
    if (it != desc.end() && it->second != e.group_desc) {
      other("process group " + e.group + " is \"" + e.group_desc + "\" against \"" + it->second + "\"");
    }
    // A collective that both ranks enqueued, and went past, completed: the ranks enqueued it within
    // its timeout of each other (the clocks of a job's hosts allowed kClockSlackNs apart).
    auto f = completed.find({e.group, e.seq});
    if (f == completed.end() || e.seq >= d.last_enqueued.at(e.group) || e.created_ns == 0 ||
        f->second->created_ns == 0) {
      continue;
    }
    int64_t apart = std::max(e.created_ns, f->second->created_ns) - std::min(e.created_ns, f->second->created_ns);
    if (apart > std::max(e.timeout_ms, f->second->timeout_ms) * 1000000 + kClockSlackNs) {
      other("collective " + std::to_string(e.seq) + " of process group " + e.group + " was enqueued " +
            std::to_string(apart / 1000000000) +
            " s apart on the two ranks, more than its timeout (or their hosts' clocks differ that much)");
    }
  }
}

}  // namespace

FrDump parse_fr_dump(const json& dump, const std::string& path, int rank) {
  if (!dump.is_object()) bad(path, "the dump", "must be a dict");
  FrDump d;
  d.path = path;
  d.rank = rank;
  auto version = dump.find("version");
  if (version == dump.end()) bad(path, "version", "missing: not a flight-recorder dump");
  d.version = text(*version, path, "version");
  if (major_version(d.version) != 2) bad(path, "version", d.version + " is not read (2.x is)");
  if (auto lib = dump.find("comm_lib_version"); lib != dump.end())
    d.comm_lib_version = text(*lib, path, "comm_lib_version");

  const json& entries = member(dump, "entries", path, "");
  if (!entries.is_array()) bad(path, "entries", "must be a list");
  // pg_status is keyed by each rank's own number for a group (pg_id); the entries give its name.
  std::map<int64_t, std::string> group_of_id;
  for (size_t k = 0; k < entries.size(); ++k) {
    const json& e = entries[k];
    std::string at = "entries[" + std::to_string(k) + "]";
    if (!e.is_object()) bad(path, at, "must be a dict");
    if (is_p2p(e, path, at)) continue;
    FrEntry entry = parse_entry(e, path, at);
    if (auto t = e.find("time_created_ns"); t != e.end() && !t->is_null()) {
      entry.created_ns = integer(*t, path, at + ".time_created_ns");
    }
    if (auto t = e.find("timeout_ms"); t != e.end() && !t->is_null()) {
      entry.timeout_ms = integer(*t, path, at + ".timeout_ms");
    }
    if (entry.seq < 1) bad(path, at + ".collective_seq_id", "must be at least 1 for a collective");
    int64_t pg_id = integer(member(e, "pg_id", path, at + "."), path, at + ".pg_id");
    auto [it, added] = group_of_id.emplace(pg_id, entry.group);
    if (!added && it->second != entry.group) bad(path, at + ".pg_id", "names two process groups");
    int64_t& last = d.last_enqueued[entry.group];
    last = std::max(last, entry.seq);
    d.entries.push_back(std::move(entry));
  }

  if (auto status = dump.find("pg_status"); status != dump.end()) {
    if (!status->is_object()) bad(path, "pg_status", "must be a dict");
    for (const auto& [id, s] : status->items()) {
      std::string at = "pg_status." + id;
      if (!s.is_object()) bad(path, at, "must be a dict");
      int64_t last =
          integer(member(s, "last_enqueued_collective", path, at + "."), path, at + ".last_enqueued_collective");
      auto group = group_of_id.find(integer(json(id), path, at));
      // A group without entries in the buffer cannot be named; its count says nothing then.
      if (group != group_of_id.end()) d.last_enqueued[group->second] = std::max(d.last_enqueued[group->second], last);
    }
  }
  if (auto config = dump.find("pg_config"); config != dump.end()) {
    if (!config->is_object()) bad(path, "pg_config", "must be a dict");
    for (const auto& [name, c] : config->items()) {
      if (!c.is_object()) bad(path, "pg_config." + name, "must be a dict");
      std::vector<int> ranks =
          rank_list(member(c, "ranks", path, "pg_config." + name + "."), path, "pg_config." + name + ".ranks");
      for (int r : ranks) d.largest_rank_named = std::max(d.largest_rank_named, r);
      if (!name.empty()) d.config_ranks[name] = std::move(ranks);
    }
  }
  if (entries.empty() && d.last_enqueued.empty() && dump.value("pg_config", json::object()).empty()) {
    bad(path, "entries", "none, and no process group: the recorder was off (TORCH_FR_BUFFER_SIZE=0)");
  }
  return d;
}

FrDump read_fr_dump(const std::string& path, int rank) {
  std::string data = read_input(path, "flight-recorder dump");
  size_t first = data.find_first_not_of(" \t\r\n");
  json dump;
  if (!data.empty() && static_cast<unsigned char>(data[0]) == 0x80) {
    try {
      dump = read_pickle(data);
    } catch (const InputError& e) {
      throw InputError(path + ": " + e.what());
    }
  } else if (first != std::string::npos && data[first] == '{') {
    try {
      dump = json::parse(data);
    } catch (const json::exception& e) {
      throw InputError(path + ": not valid JSON: " + e.what());
    }
  } else {
    throw InputError(path + ": neither a pickle (protocol 2 or later) nor JSON: not a flight-recorder dump");
  }
  return parse_fr_dump(dump, path, rank);
}

std::vector<FrDump> read_fr_dumps(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(dir + ": not a folder of flight-recorder dumps");
  std::vector<std::pair<std::string, int>> files;
  std::string prefix;
  std::string prefix_file;
  for (const fs::directory_entry& f : fs::directory_iterator(dir, ec)) {
    std::string name = f.path().filename().string();
    std::string p;
    int rank = -1;
    if (!f.is_regular_file(ec) || !dump_name(name, p, rank)) continue;
    if (!prefix_file.empty() && p != prefix) {
      throw InputError(f.path().string() + ": its name is not " + prefix + "<rank> like " + prefix_file +
                       "'s: one job's dumps per folder");
    }
    prefix = p;
    prefix_file = f.path().string();
    files.emplace_back(f.path().string(), rank);
  }
  if (ec) throw InputError(dir + ": cannot read the folder: " + ec.message());
  if (files.empty())
    throw InputError(dir + ": no flight-recorder dumps (files named PREFIX<rank>, e.g. nccl_trace_rank_0)");
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<FrDump> dumps;
  for (const auto& [path, rank] : files) {
    if (!dumps.empty() && dumps.back().rank == rank) {
      throw InputError(path + ": a second dump of rank " + std::to_string(rank) + " (" + dumps.back().path + ")");
    }
    dumps.push_back(read_fr_dump(path, rank));
    check_same_job(dumps.front(), dumps.back());
  }
  return dumps;
}

}  // namespace sdc::goodput
