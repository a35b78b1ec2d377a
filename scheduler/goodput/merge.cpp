#include "scheduler/goodput/merge.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <utility>

#include "host/error.hpp"

namespace sdc::goodput {
namespace {

namespace fs = std::filesystem;

struct Entry {
  Event event;
  size_t file;    // index into the sorted files, or kScheduler
  uint64_t line;  // in its file; for the scheduler's events, the index of the record in sacct's "jobs"
};

struct File {
  std::string path;
  int64_t rank = -1;
  std::vector<Entry> entries;
};

bool is_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// The number after the last "rank" in the file's name, or -1.
int64_t rank_from_name(const std::string& path) {
  static const std::regex kRank("rank([0-9]{1,18})");
  const std::string name = fs::path(path).filename().string();
  int64_t rank = -1;
  for (auto it = std::sregex_iterator(name.begin(), name.end(), kRank); it != std::sregex_iterator(); ++it) {
    rank = std::stoll((*it)[1].str());
  }
  return rank;
}

File read_file(const std::string& path, bool lenient, EventReader::Stats& stats) {
  if (fs::is_directory(path)) throw InputError(path + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read " + path);
  File file;
  file.path = path;
  EventReader reader(lenient);
  int64_t last_t = 0;
  bool first = true;
  EventReader::Stats s;
  try {
    s = reader.read(in, [&](const Event& e) {
      // Thrown here, the reader adds the line number (or skips the line in lenient mode).
      if (e.t < last_t) throw InputError("time goes backwards in this file");
      // Only the first event says whose file it is: a later "rank" may mean something else (the
      // replica check's sdc_detected names the suspect's rank).
      if (first && e.rank) file.rank = *e.rank;
      first = false;
      last_t = e.t;
      file.entries.push_back({e, 0, reader.line()});
    });
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
  stats.events += s.events;
  if (s.skipped > 0 && stats.skipped == 0) stats.first_skip = path + ": " + s.first_skip;
  stats.skipped += s.skipped;
  return file;
}

// Training activity of rank 0 that a fault on another rank cuts short: the collective it waits on
// never completes, so what rank 0 logs until its next start belongs to the dying attempt.
bool is_progress(EventKind kind) {
  switch (kind) {
    case EventKind::kStepBegin:
    case EventKind::kStepEnd:
    case EventKind::kCkptBegin:
    case EventKind::kCkptEnd:
    case EventKind::kCkptCommit:
    case EventKind::kEvalBegin:
    case EventKind::kEvalEnd:
    case EventKind::kDataWaitBegin:
    case EventKind::kDataWaitEnd:
    case EventKind::kProbeBegin:
    case EventKind::kProbeEnd: return true;
    default: return false;
  }
}

// Rank 0 events that start over after an incident.
bool is_restart(EventKind kind) {
  return kind == EventKind::kProcessStart || kind == EventKind::kAllocGranted || kind == EventKind::kTeardownEnd ||
         kind == EventKind::kInitBegin || kind == EventKind::kRestoreBegin;
}

constexpr size_t kScheduler = SIZE_MAX;  // Entry::file of the events made from Slurm's records
constexpr int64_t kNsPerS = 1'000'000'000;

// Puts the scheduler's events around the loop's (docs/goodput.md, "Slurm accounting"): each event
// belongs to the allocation with the latest Start at most 1 s after it and must come before that
// allocation's End + 1 s (Slurm keeps whole seconds, cut down). The allocation is granted at the
// earlier of Start and its first event and released at the later of End and its last event.
std::vector<Entry> place_allocations(const std::vector<Entry>& timeline, const std::vector<File>& files,
                                     const std::vector<SlurmRecord>& records, const std::string& sacct_path) {
  if (records.empty()) throw InputError(sacct_path + ": no record of the job started");
  const size_t n = records.size();
  std::vector<int64_t> granted(n), released(n);
  for (size_t i = 0; i < n; ++i) {
    granted[i] = records[i].start_s * kNsPerS;
    released[i] = records[i].end_s == 0 ? -1 : records[i].end_s * kNsPerS;
  }
  for (const Entry& e : timeline) {
    const int64_t t = e.event.t;
    size_t i = n;
    while (i > 0 && records[i - 1].start_s * kNsPerS - kNsPerS > t) --i;
    const bool after_end = i > 0 && records[i - 1].end_s != 0 && t >= (records[i - 1].end_s + 1) * kNsPerS;
    if (i == 0 || after_end) {
      throw InputError(files[e.file].path + ": line " + std::to_string(e.line) + ": time " + std::to_string(t) +
                       " ns lies outside the job's allocations in " + sacct_path +
                       " (Slurm's Start to End, 1 s either side): the clocks differ, or the log is another job's");
    }
    granted[i - 1] = std::min(granted[i - 1], t);
    if (records[i - 1].end_s != 0) released[i - 1] = std::max(released[i - 1], t);
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    if (released[i] > granted[i + 1]) {
      throw InputError(sacct_path + ": the loop's events make allocation " + std::to_string(i + 1) +
                       " end after allocation " + std::to_string(i + 2) + " starts");
    }
  }
  // Ties: the job becomes eligible and is granted before the loop's events at the same time, and
  // released after them.
  std::vector<std::pair<int, Entry>> all;
  auto add = [&](int order, int64_t t, EventKind kind, const SlurmRecord& record) {
    Entry e;
    e.event.t = t;
    e.event.kind = kind;
    e.file = kScheduler;
    e.line = record.job_index;
    all.push_back({order, e});
  };
  add(0, std::min(records[0].eligible_s * kNsPerS, granted[0]), EventKind::kJobEligible, records[0]);
  for (size_t i = 0; i < n; ++i) {
    add(0, granted[i], EventKind::kAllocGranted, records[i]);
    if (released[i] >= 0) {
      add(2, released[i], i + 1 == n ? EventKind::kJobEnd : EventKind::kAllocReleased, records[i]);
    }
  }
  for (const Entry& e : timeline) all.push_back({1, e});
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.second.event.t != b.second.event.t ? a.second.event.t < b.second.event.t : a.first < b.first;
  });
  std::vector<Entry> out;
  for (const auto& [order, e] : all) out.push_back(e);
  return out;
}

}  // namespace

std::vector<std::string> expand_event_paths(const std::vector<std::string>& arguments) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& path) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(path, ec);
    if (seen.insert(ec ? path : canonical.string()).second) out.push_back(path);
  };
  for (const auto& arg : arguments) {
    if (arg == "-" || !is_pattern(arg) || fs::exists(arg)) {
      add(arg);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(arg.c_str(), 0, nullptr, &g);  // glob sorts its matches
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
    globfree(&g);
    if (matches.empty()) throw InputError(arg + ": no file matches");
    for (const auto& m : matches) add(m);
  }
  if (out.size() > 1 && std::count(out.begin(), out.end(), "-") > 0) {
    throw InputError("standard input (-) cannot be merged with other files");
  }
  return out;
}

Analysis analyze_files(const std::vector<std::string>& paths, const LedgerOptions& options, bool lenient,
                       const std::vector<SlurmRecord>* allocations, const std::string& sacct_path) {
  Analysis out;
  EventReader::Stats read_stats;
  std::vector<File> files;
  for (const auto& path : paths) files.push_back(read_file(path, lenient, read_stats));
  for (auto& f : files) {
    if (f.rank < 0) f.rank = rank_from_name(f.path);
    if (f.rank < 0 && files.size() == 1) f.rank = 0;  // one file: it is the timeline
    if (f.rank < 0) {
      throw InputError(f.path + ": rank unknown: give its events a \"rank\" field or name it events.rank<N>.jsonl");
    }
  }
  if (std::none_of(files.begin(), files.end(), [](const File& f) { return f.rank == 0; })) {
    throw InputError("no file of rank 0: the job's timeline is rank 0's");
  }
  std::stable_sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.rank < b.rank; });
  std::vector<Entry> merged;
  for (size_t i = 0; i < files.size(); ++i) {
    for (auto& e : files[i].entries) {
      e.file = i;
      merged.push_back(e);
    }
    files[i].entries.clear();
  }
  // Ties keep the order above: rank 0 first, then by rank, then as given, then by line.
  std::stable_sort(merged.begin(), merged.end(), [](const Entry& a, const Entry& b) { return a.event.t < b.event.t; });

  // The job's timeline: rank 0's events and the other ranks' faults, by the rules above.
  std::vector<Entry> timeline;
  bool dying = false;  // another rank reported a fault; rank 0 has not started over yet
  bool ended = false;  // rank 0 logged job_end
  for (const Entry& e : merged) {
    const int64_t rank = files[e.file].rank;
    const EventKind kind = e.event.kind;
    const bool fault = kind == EventKind::kFaultDetected || kind == EventKind::kSdcDetected;
    if (ended && rank != 0) continue;  // after the job's end, only rank 0's own (an error) count
    if (rank != 0) {
      if (!fault) continue;
      dying = true;
    } else if (dying && is_progress(kind)) {
      continue;
    } else if (is_restart(kind)) {
      dying = false;
    }
    if (rank == 0 && kind == EventKind::kJobEnd) {
      ended = true;
      // The scheduler's last End ends the job, when it has one.
      if (allocations != nullptr && !allocations->empty() && allocations->back().end_s != 0) continue;
    }
    timeline.push_back(e);
  }
  if (allocations != nullptr) timeline = place_allocations(timeline, files, *allocations, sacct_path);

  // "events.rank0.jsonl: line 7", or the sacct record "sacct.json: jobs[2]" the event was made from.
  auto where = [&](const Entry& e) {
    return e.file == kScheduler ? sacct_path + ": jobs[" + std::to_string(e.line) + "]"
                                : files[e.file].path + ": line " + std::to_string(e.line);
  };
  Ledger ledger(options);
  uint64_t fed = 0;
  std::string restore_asked_at;  // the event that left a restore pending
  for (const Entry& e : timeline) {
    try {
      const bool was_pending = ledger.restore_pending();
      ledger.add(e.event);
      if (!was_pending && ledger.restore_pending()) restore_asked_at = where(e);
      ++fed;
    } catch (const InputError& error) {
      const std::string message = where(e) + ": " + error.what();
      if (!lenient) throw InputError(message);
      if (read_stats.skipped++ == 0) read_stats.first_skip = message;
    }
  }
  out.stats = read_stats;
  out.stats.events = fed;
  out.breakdown = finish_ledger(ledger, restore_asked_at, lenient, out.stats);
  return out;
}

}  // namespace sdc::goodput
