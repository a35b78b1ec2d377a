// Training-run events (JSON Lines, one event per line) and their streaming reader. The schema is in
// docs/goodput.md.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "host/time.hpp"  // kTimeRange, parse_rfc3339_ns

namespace sdc::goodput {

enum class EventKind : uint8_t {
  kJobEligible,
  kAllocGranted,
  kAllocReleased,
  kJobEnd,
  kProcessStart,
  kInitBegin,
  kInitEnd,
  kRestoreBegin,
  kRestoreEnd,
  kStepBegin,
  kStepEnd,
  kCkptBegin,
  kCkptEnd,
  kCkptCommit,
  kEvalBegin,
  kEvalEnd,
  kDataWaitBegin,
  kDataWaitEnd,
  kProbeBegin,
  kProbeEnd,
  kFaultDetected,
  kSdcDetected,
  kTeardownEnd,
  kNodeQuarantined,
};

// The wire name of an event kind ("step_begin").
std::string_view event_name(EventKind kind);
// Rank 0 events that start over after an incident.
bool is_restart(EventKind kind);
// The kind named `name`, or nothing when the name is unknown.
std::optional<EventKind> event_kind(std::string_view name);

// Where a rank ran, from its process_start (GoodputLog writes it): the node, and the device's UUID
// ("GPU-...", or "cpu") and PCI bus id (a GPU's). Empty: not logged. `sdcprobe hang` and `goodput`
// name a culprit's node and GPU by it.
struct RankRecord {
  std::string host, device, pci_bus_id;
};

// Only the fields the ledger uses, and process_start's rank record; other fields are ignored.
struct Event {
  int64_t t = 0;  // Unix nanoseconds
  EventKind kind = EventKind::kJobEligible;
  std::optional<int64_t> step;              // >= 0
  std::optional<int64_t> last_good_step;    // sdc_detected only; >= 0
  std::optional<int64_t> rank;              // the writer's rank, for merging per-rank files; >= 0
  std::optional<int64_t> slurm_restart;     // process_start: Slurm's requeue count, its sacct record; >= 0
  std::optional<bool> blocking;             // probe_begin/probe_end: whether the loop waits for the probe
  std::optional<int64_t> attempt;           // process_start: the launcher's restart count; >= 0
  std::shared_ptr<const RankRecord> where;  // process_start: where the rank ran; null when it says nothing
};

// Parses one line of a log (without its newline) by the schema; throws InputError saying what is
// wrong, without a line number.
Event parse_event(std::string_view line);

// Parses JSON Lines with simdjson, a piece of the input at a time, so memory does not grow with the
// input. Each piece's lines are read together; what they give is what reading each line alone
// gives, the same events, errors and line numbers.
class EventReader {
 public:
  struct Stats {
    uint64_t events = 0;     // events handed to the sink
    uint64_t skipped = 0;    // bad lines skipped in lenient mode
    std::string first_skip;  // why the first skipped line was skipped
  };
  // The sink may throw InputError (for example the ledger on a step_end without step_begin): the
  // reader prefixes the line number, and in lenient mode skips and counts the line instead.
  using Sink = std::function<void(const Event&)>;

  explicit EventReader(bool lenient) : lenient_(lenient) {}

  // Reads all of `in`. Throws InputError naming the line number on bad input unless lenient.
  Stats read(std::istream& in, const Sink& sink);
  // The line number of the event being handed to the sink (1-based).
  uint64_t line() const { return line_no_; }

 private:
  bool lenient_;
  uint64_t line_no_ = 0;
};

}  // namespace sdc::goodput
