#include "goodput/analyze.hpp"

#include <string>

#include "host/error.hpp"

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

Analysis analyze(std::istream& in, const LedgerOptions& options, bool lenient) {
  Ledger ledger(options);
  EventReader reader(lenient);
  Analysis out;
  uint64_t restore_asked_at = 0;  // the line of the event that left a restore pending
  bool started = false;
  out.stats = reader.read(in, [&](const Event& e) {
    const bool was_pending = ledger.restore_pending();
    ledger.add(e);
    if (!was_pending && ledger.restore_pending()) restore_asked_at = reader.line();
    started = started || e.kind == EventKind::kProcessStart || e.kind == EventKind::kAllocGranted;
  });
  out.breakdown = finish_ledger(ledger, "line " + std::to_string(restore_asked_at), lenient, out.stats);
  check_started(out, started, lenient, "");
  return out;
}

}  // namespace sdc::goodput
