#include "scheduler/goodput/analyze.hpp"

namespace sdc::goodput {

Analysis analyze(std::istream& in, const LedgerOptions& options, bool lenient) {
  Ledger ledger(options);
  EventReader reader(lenient);
  Analysis out;
  out.stats = reader.read(in, [&](const Event& e) { ledger.add(e); });
  out.breakdown = ledger.finish();
  return out;
}

}  // namespace sdc::goodput
