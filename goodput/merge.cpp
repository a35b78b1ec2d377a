#include "goodput/merge.hpp"

#include <glob.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <set>

#include "host/error.hpp"
#include "host/input_file.hpp"

namespace sdc::goodput {
namespace {

namespace fs = std::filesystem;

struct Entry {
  Event event;
  size_t file;    // index into the files as given, or kScheduler
  uint64_t line;  // in its file; for the scheduler's events, the index of the record in sacct's "jobs"
};

struct File {
  std::string path;
  int64_t rank = -1;
  size_t order = 0;  // its place in the merge: by rank, then as given
  EventReader::Stats stats;
};

bool is_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// Reads one file in a single pass: checks that it is in time order, takes its rank from its first
// event's field, counts its events into `tally` and hands each to `take`.
template <class Take>
void read_file(File& file, size_t index, bool only_file, bool lenient, TallyCounter& tally, const Take& take) {
  const std::string& path = file.path;
  std::ifstream in = open_input(path, "event log");
  EventReader reader(lenient);
  int64_t last_t = 0;
  bool first = true;
  tally.start_file(index, rank_from_name(path), only_file);
  try {
    file.stats = reader.read(in, [&](const Event& e) {
      tally.add(e);  // every event read
      // Thrown here, the reader adds the line number (or skips the line in lenient mode).
      if (e.t < last_t) throw InputError("time goes backwards in this file");
      // Only the first event says whose file it is: a later "rank" may mean something else (the
      // replica check's sdc_detected names the suspect's rank).
      if (first && e.rank) file.rank = *e.rank;
      first = false;
      last_t = e.t;
      take({e, index, reader.line()});
    });
  } catch (const InputError& e) {
    check_read(in, path, "event log");  // a failed read cuts the last line short: that error comes first
    throw InputError(path + ": " + e.what());
  }
  check_read(in, path, "event log");
  tally.end_file();
  if (file.stats.skipped > 0) file.stats.first_skip = path + ": " + file.stats.first_skip;
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

constexpr size_t kScheduler = SIZE_MAX;  // Entry::file of the events made from Slurm's records
constexpr int64_t kNsPerS = 1'000'000'000;
// Slurm's End is the moment it ends the job (a requeue, a cancel, its time limit); the job's
// processes then have until SIGKILL, KillWait later (30 s unless the site sets it), to log their
// teardown, a checkpoint on SIGTERM among it.
constexpr int64_t kSlurmKillWaitS = 30;

// Whether t (ns) is at or after `s` seconds, for any s a record holds (s * 1e9 may not fit).
bool at_or_after(int64_t t, int64_t s) {
  return s <= std::numeric_limits<int64_t>::max() / kNsPerS && t >= s * kNsPerS;
}

// The job's timeline, built in one pass over the merged events and fed to the ledger as it goes:
// rank 0's events and the other ranks' faults, by the rules above, with the scheduler's events
// placed around them (docs/goodput.md, "Slurm accounting"). Errors are kept, not thrown, and the
// first reported as a merge of whole files would: any error in reading a line first, then the ranks'
// (`kRanks`), the placing of all loop events in the allocations (`kPlacement`), the allocations'
// order (`kOverlap`), and last the ledger's (`kLedger`). After one of the last two, the events are
// still placed, but the ledger is fed no more.
class Timeline {
 public:
  enum Failure { kRanks, kPlacement, kOverlap, kLedger, kFailures };

  Timeline(const std::vector<File>& files, const LedgerOptions& options, bool lenient,
           const std::vector<SlurmRecord>* allocations, const std::string& sacct_path)
      : files_(files), ledger_(options), lenient_(lenient), allocations_(allocations), sacct_path_(sacct_path) {
    if (allocations_ == nullptr) return;
    if (allocations_->empty()) fail(kPlacement, sacct_path_ + ": no record of the job started");
    for (const SlurmRecord& r : *allocations_) {
      granted_.push_back(r.start_s * kNsPerS);
      released_.push_back(r.end_s == 0 ? -1 : r.end_s * kNsPerS);
    }
  }

  void fail(Failure kind, const std::string& message) {
    if (!failures_[kind]) failures_[kind] = message;
  }
  // Nothing more to learn from the events.
  bool stopped() const { return failures_[kRanks] || failures_[kPlacement]; }
  bool failed() const {
    return std::any_of(failures_.begin(), failures_.end(), [](const auto& f) { return f.has_value(); });
  }

  // The next event of the merge, in time order.
  void add(const Entry& e) {
    if (stopped()) return;
    const int64_t rank = files_[e.file].rank;
    const EventKind kind = e.event.kind;
    const bool fault = kind == EventKind::kFaultDetected || kind == EventKind::kSdcDetected;
    if (ended_ && rank != 0) return;  // after the job's end, only rank 0's own (an error) count
    if (rank != 0) {
      if (!fault) return;
      dying_ = true;
    } else if (dying_ && is_progress(kind)) {
      return;
    } else if (is_restart(kind)) {
      dying_ = false;
    }
    if (rank == 0 && (kind == EventKind::kProcessStart || kind == EventKind::kAllocGranted)) started_ = true;
    if (rank == 0 && kind == EventKind::kJobEnd) {
      ended_ = true;
      // The scheduler's last End ends the job, when it has one.
      if (allocations_ != nullptr && !allocations_->empty() && allocations_->back().end_s != 0) return;
    }
    if (rank == 0 && kind == EventKind::kProcessStart && e.event.slurm_restart) record_ = *e.event.slurm_restart;
    if (allocations_ != nullptr) place(e);
    feed(e);
  }

  // After the last event: the ledger's breakdown, or the first error.
  Analysis finish(EventReader::Stats stats) {
    if (allocations_ != nullptr && !stopped()) place_rest();
    for (const auto& failure : failures_) {
      if (failure) throw InputError(*failure);
    }
    if (ledger_skipped_ > 0 && stats.skipped == 0) stats.first_skip = ledger_first_skip_;
    stats.skipped += ledger_skipped_;
    stats.events = fed_;
    Analysis out;
    out.stats = stats;
    out.breakdown = finish_ledger(ledger_, restore_asked_at_, lenient_, out.stats);
    if (allocations_ == nullptr) {
      const auto zero = std::find_if(files_.begin(), files_.end(), [](const File& f) { return f.rank == 0; });
      check_started(out, started_, lenient_, zero->path + ": ");
    }
    return out;
  }

 private:
  // The scheduler's events, made from Slurm's records: each loop event belongs to the allocation
  // its attempt's process_start names (`slurm_restart`, Slurm's requeue count), or in logs without
  // it to the allocation with the latest Start at most 1 s after it, and must lie within that
  // allocation's Start - 1 s and End + 1 s + KillWait (Slurm keeps whole seconds, cut down; its
  // processes log their teardown after End). The allocation is granted at the
  // earlier of Start and its first event, but not before the previous release within Start's second, and released
  // at the later of End and its last event. Ties: the job becomes eligible and is granted before the loop's events
  // at the same time, and released after them; a grant at the previous release comes after that release.
  struct Pending {
    int64_t t;
    int order;   // 0: before the loop's events at the same time, 2: after
    size_t seq;  // job_eligible, then each allocation's grant and release
    EventKind kind;
    size_t record;
    bool operator<(const Pending& o) const {
      return t != o.t ? t < o.t : order != o.order ? order < o.order : seq < o.seq;
    }
  };

  void place(const Entry& e) {
    const std::vector<SlurmRecord>& records = *allocations_;
    const int64_t t = e.event.t;
    if (record_) {
      // The log names its Slurm attempt: its record, which must hold the event.
      if (*record_ >= records.size() || *record_ + 1 < entered_) {
        return fail(kPlacement, files_[e.file].path + ": line " + std::to_string(e.line) + ": slurm_restart " +
                                    std::to_string(*record_) + " names no record of the job in " + sacct_path_ +
                                    " after the last placed (it has " + std::to_string(records.size()) + ")");
      }
      entered_ = *record_ + 1;
    } else {
      while (entered_ < records.size() && records[entered_].start_s * kNsPerS - kNsPerS <= t) ++entered_;
    }
    const size_t i = entered_;  // the event's allocation is i - 1
    const bool before_start = i > 0 && t < (records[i - 1].start_s - 1) * kNsPerS;
    const bool after_end =
        i > 0 && records[i - 1].end_s != 0 && at_or_after(t, records[i - 1].end_s + 1 + kSlurmKillWaitS);
    if (i == 0 || before_start || after_end) {
      return fail(kPlacement, files_[e.file].path + ": line " + std::to_string(e.line) + ": time " + std::to_string(t) +
                                  " ns lies outside the job's allocations in " + sacct_path_ +
                                  " (Slurm's Start - 1 s to End + 1 s and Slurm's default KillWait of " +
                                  std::to_string(kSlurmKillWaitS) +
                                  " s): the clocks differ, or the log is another job's");
    }
    granted_[i - 1] = std::min(granted_[i - 1], t);
    if (records[i - 1].end_s != 0) released_[i - 1] = std::max(released_[i - 1], t);
    settle(i - 1);  // the allocations before have had all of their events
    if (granted_queued_ < i) queue_grant(i - 1);
    // The scheduler's events before this one, in the order of the ties above.
    while (!pending_.empty() && (pending_.front().t < t || (pending_.front().t == t && pending_.front().order == 0))) {
      feed_pending();
    }
  }

  // After the last event: every allocation is settled and its events fed.
  void place_rest() {
    settle(allocations_->size());
    while (!pending_.empty()) feed_pending();
  }

  // Allocations before `end` have had all of their events: their grants and releases are known and
  // queued, and each must be released before the next is granted.
  void settle(size_t end) {
    const std::vector<SlurmRecord>& records = *allocations_;
    for (; settled_ < end; ++settled_) {
      const size_t k = settled_;
      if (granted_queued_ <= k) queue_grant(k);
      if (released_[k] >= 0) {
        const EventKind kind = k + 1 == records.size() ? EventKind::kJobEnd : EventKind::kAllocReleased;
        queue({released_[k], 2, 2 + 2 * k, kind, k});
      }
      // Slurm cuts Start down to the second: an allocation that starts within the second of the
      // previous one's last event (a fast requeue) starts after that event, not before.
      if (k + 1 < records.size() && released_[k] > granted_[k + 1] &&
          released_[k] < (records[k + 1].start_s + 1) * kNsPerS) {
        granted_[k + 1] = released_[k];
      }
      if (k + 1 < records.size() && released_[k] > granted_[k + 1]) {
        fail(kOverlap, sacct_path_ + ": the loop's events make allocation " + std::to_string(k + 1) +
                           " end after allocation " + std::to_string(k + 2) + " starts");
      }
    }
  }

  void queue_grant(size_t k) {
    if (k == 0)
      queue({std::min((*allocations_)[0].eligible_s * kNsPerS, granted_[0]), 0, 0, EventKind::kJobEligible, 0});
    const bool at_release = k > 0 && granted_[k] == released_[k - 1];
    queue({granted_[k], at_release ? 2 : 0, 1 + 2 * k, EventKind::kAllocGranted, k});
    granted_queued_ = k + 1;
  }

  void queue(const Pending& p) { pending_.insert(std::upper_bound(pending_.begin(), pending_.end(), p), p); }

  void feed_pending() {
    const Pending p = pending_.front();
    pending_.erase(pending_.begin());
    Entry s;
    s.event.t = p.t;
    s.event.kind = p.kind;
    s.file = kScheduler;
    s.line = (*allocations_)[p.record].job_index;
    feed(s);
  }

  // "events.rank0.jsonl: line 7", or the sacct record "sacct.json: jobs[2]" the event was made from.
  std::string where(const Entry& e) const {
    return e.file == kScheduler ? sacct_path_ + ": jobs[" + std::to_string(e.line) + "]"
                                : files_[e.file].path + ": line " + std::to_string(e.line);
  }

  void feed(const Entry& e) {
    if (failed()) return;
    try {
      const bool was_pending = ledger_.restore_pending();
      ledger_.add(e.event);
      if (!was_pending && ledger_.restore_pending()) restore_asked_at_ = where(e);
      ++fed_;
    } catch (const InputError& error) {
      const std::string message = where(e) + ": " + error.what();
      if (!lenient_) return fail(kLedger, message);
      if (ledger_skipped_++ == 0) ledger_first_skip_ = message;
    }
  }

  const std::vector<File>& files_;
  Ledger ledger_;
  bool lenient_;
  const std::vector<SlurmRecord>* allocations_;
  const std::string& sacct_path_;
  std::array<std::optional<std::string>, kFailures> failures_;
  bool dying_ = false;            // another rank reported a fault; rank 0 has not started over yet
  bool ended_ = false;            // rank 0 logged job_end
  bool started_ = false;          // rank 0 logged a process_start or alloc_granted
  std::optional<size_t> record_;  // the sacct record rank 0's last process_start named (slurm_restart)
  uint64_t fed_ = 0;
  std::string restore_asked_at_;  // the event that left a restore pending
  uint64_t ledger_skipped_ = 0;
  std::string ledger_first_skip_;
  // Slurm's allocations: when each is granted and released (-1: never); how many the events have
  // entered, how many are settled, how many grants are queued; the queued scheduler's events not fed
  // yet, in order.
  std::vector<int64_t> granted_, released_;
  size_t entered_ = 0, settled_ = 0, granted_queued_ = 0;
  std::vector<Pending> pending_;
};

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
                       const std::vector<SlurmRecord>* allocations, const std::string& sacct_path, Tally* measured) {
  std::vector<File> files(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) files[i].path = paths[i];
  // One file is streamed through the ledger, merged with what the others hold: rank 0's file when
  // its name says so. The others are read first, keeping what the merge takes from them: every
  // event of a file of rank 0, the faults of another rank's.
  size_t streamed = 0;
  for (size_t i = paths.size(); i-- > 0;) {
    if (rank_from_name(paths[i]) == 0) streamed = i;
  }
  TallyCounter tally;
  std::vector<Entry> held;
  // The error of a file given after the streamed one, which reports its own error first.
  std::optional<InputError> later_error;
  for (size_t i = 0; i < files.size() && !later_error; ++i) {
    if (i == streamed) continue;
    const int64_t name_rank = rank_from_name(files[i].path);
    try {
      read_file(files[i], i, files.size() == 1, lenient, tally, [&](const Entry& e) {
        const int64_t rank = files[i].rank >= 0 ? files[i].rank : name_rank;
        const EventKind kind = e.event.kind;
        if (rank == 0 || kind == EventKind::kFaultDetected || kind == EventKind::kSdcDetected) held.push_back(e);
      });
    } catch (const InputError& e) {
      if (i < streamed) throw;
      later_error = e;
    }
  }

  Timeline timeline(files, options, lenient, allocations, sacct_path);
  size_t next_held = 0;
  bool started = false;
  // Ties: rank 0 first, then by rank, then as given, then by line.
  auto comes_before = [&](const Entry& a, const Entry& b) {
    return a.event.t != b.event.t ? a.event.t < b.event.t : files[a.file].order < files[b.file].order;
  };
  // Once the streamed file's rank is known (its first event): every file's, and the merge's order.
  auto start = [&]() {
    started = true;
    for (File& f : files) {
      if (f.rank < 0) f.rank = rank_from_name(f.path);
      if (f.rank < 0 && files.size() == 1) f.rank = 0;  // one file: it is the timeline
      if (f.rank < 0) {
        return timeline.fail(
            Timeline::kRanks,
            f.path + ": rank unknown: give its events a \"rank\" field or name it events.rank<N>.jsonl");
      }
    }
    if (std::none_of(files.begin(), files.end(), [](const File& f) { return f.rank == 0; })) {
      return timeline.fail(Timeline::kRanks, "no file of rank 0: the job's timeline is rank 0's");
    }
    std::vector<size_t> by_rank(files.size());
    std::iota(by_rank.begin(), by_rank.end(), 0);
    std::stable_sort(by_rank.begin(), by_rank.end(), [&](size_t a, size_t b) { return files[a].rank < files[b].rank; });
    for (size_t k = 0; k < by_rank.size(); ++k) files[by_rank[k]].order = k;
    std::stable_sort(held.begin(), held.end(), comes_before);  // each file's in line order already
  };
  read_file(files[streamed], streamed, files.size() == 1, lenient, tally, [&](const Entry& e) {
    if (!started) start();
    if (timeline.stopped()) return;
    while (next_held < held.size() && comes_before(held[next_held], e)) timeline.add(held[next_held++]);
    timeline.add(e);
  });
  if (later_error) throw *later_error;
  if (!started) start();
  while (!timeline.stopped() && next_held < held.size()) timeline.add(held[next_held++]);

  EventReader::Stats read_stats;  // the files' skipped lines, in the order given
  for (const File& f : files) {
    if (f.stats.skipped > 0 && read_stats.skipped == 0) read_stats.first_skip = f.stats.first_skip;
    read_stats.skipped += f.stats.skipped;
  }
  Analysis out = timeline.finish(read_stats);
  if (measured != nullptr) *measured = tally.finish();
  return out;
}

}  // namespace sdc::goodput
