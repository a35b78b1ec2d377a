#include "goodput/sacct.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>

#include "host/error.hpp"
#include "host/input_file.hpp"

namespace sdc::goodput {
namespace {

// Seconds since 1970 that fit the ledger's nanoseconds (kTimeRange) with the merge's 1 s of slack
// after an End: (end + 1) s in nanoseconds must not overflow.
constexpr int64_t kMaxSeconds = INT64_MAX / 1'000'000'000 - 1;

constexpr size_t kMaxValueBytes = 64 << 20;

// Reads a file a chunk at a time and cuts JSON values out of it by their extent alone (strings and
// nesting), for nlohmann to parse one at a time.
class ValueCutter {
 public:
  ValueCutter(std::istream& in, const std::string& path) : in_(in), path_(path) {}

  // The next byte that is not whitespace, left unread; EOF at the end of the file.
  int next() {
    for (int c = peek();; c = peek()) {
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return c;
      ++pos_;
    }
  }
  // Takes the next byte that is not whitespace, which must be `expected`.
  void expect(char expected) {
    if (next() != expected) invalid();
    ++pos_;
  }
  // Takes the value that starts at next() into `out`, unchecked but for its extent; `what` names it
  // when it is too long.
  void cut(std::string& out, const std::string& what) {
    out.clear();
    const int first = next();
    if (first == EOF) invalid();
    const bool scalar = first != '{' && first != '[' && first != '"';
    int depth = 0;
    bool in_string = false, escaped = false;
    for (int c = peek(); c != EOF; c = peek()) {
      if (scalar && (c == ',' || c == ']' || c == '}' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) return;
      ++pos_;
      out.push_back(static_cast<char>(c));
      if (out.size() > kMaxValueBytes) throw InputError(path_ + ": " + what + " is longer than 64 MiB");
      if (scalar) continue;
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        --depth;
      }
      if (!in_string && depth <= 0) return;
    }
    if (!scalar) invalid();  // the file ends inside the value
  }
  [[noreturn]] void invalid() const { throw InputError(path_ + ": not valid JSON (expected `sacct --json` output)"); }

 private:
  int peek() {
    if (pos_ == end_) {
      in_.read(buffer_, sizeof buffer_);
      end_ = static_cast<size_t>(in_.gcount());
      if (end_ == 0) check_read(in_, path_, "--sacct");  // a failed read is no end of file
      pos_ = 0;
    }
    return pos_ == end_ ? EOF : static_cast<unsigned char>(buffer_[pos_]);
  }

  std::istream& in_;
  const std::string& path_;
  char buffer_[1 << 16];
  size_t pos_ = 0, end_ = 0;
};

}  // namespace

int64_t sacct_seconds(const nlohmann::json& time, const char* name, const std::string& where) {
  const std::string field = where + ".time." + name;
  if (!time.contains(name)) throw InputError(field + " is missing");
  const nlohmann::json* value = &time.at(name);
  if (value->is_null()) return 0;  // Slurm 22.05: never set (a job cancelled while pending has no start)
  if (value->is_object()) {        // Slurm 23.02 and later: {"set": true, "infinite": false, "number": N}
    const auto flag = [&](const char* key) {
      if (!value->contains(key)) throw InputError(field + "." + key + " is missing");
      if (!value->at(key).is_boolean()) throw InputError(field + "." + key + " must be true or false");
      return value->at(key).get<bool>();
    };
    if (!flag("set") || flag("infinite")) return 0;
    if (!value->contains("number")) throw InputError(field + ".number is missing");
    value = &value->at("number");
  }
  if (!value->is_number_integer()) throw InputError(field + " must be an integer (Unix seconds)");
  // Slurm 24.11 writes a time never set as its 32-bit NO_VAL (the start of a job cancelled while
  // pending: 4294967294); its INFINITE, 4294967295, is unset too, as "infinite": true is.
  if (value->is_number_unsigned() && (value->get<uint64_t>() == 0xfffffffe || value->get<uint64_t>() == 0xffffffff)) {
    return 0;
  }
  const int64_t s = value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(kMaxSeconds)
                        ? -1
                        : value->get<int64_t>();
  if (s < 0 || s > kMaxSeconds) {
    throw InputError(field + " " + value->dump() + " is out of range (0 to " + std::to_string(kMaxSeconds) +
                     " Unix seconds)");
  }
  return s;
}

void for_each_sacct_record(const std::string& path, const SacctRecordSink& record,
                           const nlohmann::json::parser_callback_t& keep) {
  std::ifstream in = open_input(path, "--sacct");
  const std::string no_jobs = path + ": no \"jobs\" array (expected `sacct --json` output)";
  ValueCutter cutter(in, path);
  std::string text;
  // Checks a value that is dropped, and the end of the file after it when `last`.
  auto check = [&](bool last) {
    if (!nlohmann::json::accept(text) || (last && cutter.next() != EOF)) cutter.invalid();
  };
  if (cutter.next() != '{') {
    cutter.cut(text, "the file");
    check(true);
    throw InputError(no_jobs);  // JSON, but not an object
  }
  cutter.expect('{');
  bool seen_jobs = false;
  for (bool more = cutter.next() != '}'; more;) {
    cutter.cut(text, "a key");
    const nlohmann::json key = nlohmann::json::parse(text, nullptr, false);
    if (!key.is_string()) cutter.invalid();
    cutter.expect(':');
    if (key != "jobs") {
      cutter.cut(text, "the value of " + key.dump());
      check(false);
    } else if (cutter.next() != '[') {
      cutter.cut(text, "\"jobs\"");
      check(false);
      throw InputError(no_jobs);
    } else {
      if (seen_jobs) throw InputError(path + ": two \"jobs\" arrays");
      seen_jobs = true;
      cutter.expect('[');
      for (size_t i = 0; cutter.next() != ']';) {
        if (i > 0) cutter.expect(',');
        const std::string where = "jobs[" + std::to_string(i) + "]";
        cutter.cut(text, where);
        const nlohmann::json job = nlohmann::json::parse(text, keep, false);
        if (job.is_discarded()) throw InputError(path + ": " + where + ": not valid JSON");
        record(i++, job);
      }
      cutter.expect(']');
    }
    more = cutter.next() == ',';
    if (more) cutter.expect(',');
  }
  cutter.expect('}');
  if (cutter.next() != EOF) cutter.invalid();
  if (!seen_jobs) throw InputError(no_jobs);
}

std::vector<SlurmRecord> read_sacct_json(const std::string& path) {
  std::vector<SlurmRecord> records;
  std::optional<uint64_t> job_id;
  size_t count = 0;
  for_each_sacct_record(path, [&](size_t i, const nlohmann::json& job) {
    ++count;
    const std::string where = path + ": jobs[" + std::to_string(i) + "]";
    // Slurm's job ids are positive 32-bit numbers; nlohmann keeps non-negative integers unsigned.
    if (!job.is_object() || !job.contains("job_id") || !job.at("job_id").is_number_unsigned()) {
      throw InputError(where + ".job_id is missing or not a non-negative integer");
    }
    const uint64_t id = job.at("job_id").get<uint64_t>();
    if (job_id && id != *job_id) {
      throw InputError(where + ": job " + std::to_string(id) + " after job " + std::to_string(*job_id) +
                       "; give the records of one job (sacct -j JOBID --duplicates --json)");
    }
    job_id = id;
    if (!job.contains("time") || !job.at("time").is_object()) throw InputError(where + ".time is missing");
    const nlohmann::json& time = job.at("time");
    SlurmRecord r{sacct_seconds(time, "eligible", where), sacct_seconds(time, "start", where),
                  sacct_seconds(time, "end", where), i};
    if (r.start_s == 0) return;  // never ran: no allocation to place
    // Unset (as sacct can show a job still completing): no queue is known, not 55 years of it.
    if (r.eligible_s == 0) r.eligible_s = r.start_s;
    if (r.end_s != 0 && r.end_s < r.start_s) throw InputError(where + ": end before start");
    records.push_back(r);
  });
  if (count == 0) throw InputError(path + ": no job records");
  std::sort(records.begin(), records.end(),
            [](const SlurmRecord& a, const SlurmRecord& b) { return a.start_s < b.start_s; });
  for (size_t i = 0; i + 1 < records.size(); ++i) {
    if (records[i].end_s == 0 || records[i].end_s > records[i + 1].start_s) {
      throw InputError(path + ": the job's records overlap (an allocation starts before the previous one ended)");
    }
  }
  return records;
}

}  // namespace sdc::goodput
