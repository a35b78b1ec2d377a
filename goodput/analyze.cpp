#include "goodput/analyze.hpp"

#include <fstream>
#include <string>

#include "host/error.hpp"
#include "host/input_file.hpp"

namespace sdc::goodput {

Breakdown finish_ledger(Ledger& ledger, const std::string& restore_asked_at, bool lenient, EventReader::Stats& stats) {
  try {
    return ledger.finish();
  } catch (const InputError& e) {
    // Only the restore a fault leaves pending at the end of the log can fail here.
    const std::string message = restore_asked_at + ": the restore after this fault, at the end of the log: " + e.what();
    if (!lenient) throw InputError(message);
    if (stats.skipped++ == 0) stats.first_skip = message;
    ledger.drop_pending_restore();
    return ledger.finish();
  }
}

void check_started(Analysis& analysis, bool started, bool lenient, const std::string& where) {
  const Breakdown& b = analysis.breakdown;
  if (started || b.wall_ns == 0 || b[Category::kQueue].ns != b.wall_ns) return;
  if (!lenient) throw InputError(where + kNoStart);
  if (analysis.stats.skipped++ == 0) analysis.stats.first_skip = where + kNoStart;
}

namespace {

// `name_rank`: the rank the file's name says, -1 when none (TallyCounter::start_file).
Analysis analyze_log(std::istream& in, const LedgerOptions& options, bool lenient, Tally* measured, int64_t name_rank) {
  Ledger ledger(options);
  EventReader reader(lenient);
  TallyCounter tally;
  tally.start_file(0, name_rank, true);
  Analysis out;
  uint64_t restore_asked_at = 0;  // the line of the event that left a restore pending
  bool started = false;
  out.stats = reader.read(in, [&](const Event& e) {
    tally.add(e);  // every event read, as analyze_files counts
    const bool was_pending = ledger.restore_pending();
    ledger.add(e);
    if (!was_pending && ledger.restore_pending()) restore_asked_at = reader.line();
    started = started || e.kind == EventKind::kProcessStart || e.kind == EventKind::kAllocGranted;
  });
  out.breakdown = finish_ledger(ledger, "line " + std::to_string(restore_asked_at), lenient, out.stats);
  check_started(out, started, lenient, "");
  tally.end_file();
  if (measured != nullptr) *measured = tally.finish();
  return out;
}

}  // namespace

Analysis analyze(std::istream& in, const LedgerOptions& options, bool lenient, Tally* measured) {
  return analyze_log(in, options, lenient, measured, -1);
}

Analysis analyze_file(const std::string& path, const LedgerOptions& options, bool lenient, Tally* measured) {
  std::ifstream in = open_input(path, "event log");
  Analysis out;
  try {
    out = analyze_log(in, options, lenient, measured, rank_from_name(path));
  } catch (const InputError&) {
    check_read(in, path, "event log");  // a failed read cuts the last line short: that error comes first
    throw;
  }
  check_read(in, path, "event log");
  return out;
}

}  // namespace sdc::goodput
