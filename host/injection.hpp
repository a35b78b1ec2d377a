// Fault injection. The injector sits in the backend, between a probe's computation and its
// verification, so a probe can neither see nor cheat it. A textual spec drives it:
//
//   SPEC    := CLAUSE (';' CLAUSE)*
//   CLAUSE  := KEY '=' VALUE (',' KEY '=' VALUE)*
//   model   bitflip | multibit | random | stuck | lane | hang | crash | digest   (required)
//   probe   glob over probe ids, e.g. gemm.*                    (default *)
//   device  device index in this run's list, a UUID, or *       (default *)
//   rank    process rank under MPI, or *                        (default *)
//   mode    transient | intermittent | permanent                (default permanent)
//   after   matching injection points passed over before the fault starts (default 0): a
//           fault with an onset, e.g. a device that goes bad during a run
//   p       probability per injection point, intermittent only  (0 < p <= 1)
//   bit     bit position 0..63, or random (default random); taken modulo the element width
//
// Numbers are decimal or 0x hex (host/parse_number.hpp): bit=010 is an error, not octal 8. An
// empty clause is an error, and so is a clause whose probe or device selector matches nothing in
// the run (check_injection_targets).
//   bits    multibit: number of adjacent bits flipped from `bit` (2..64, default 2)
//   count   elements corrupted per injection point              (default 1)
//   index   element index, or random (default random); taken modulo the element count
//   value   stuck: the value the bit is stuck at, 0 or 1        (default 1)
//   lane    lane: the faulty lane (default 0); lanes: lanes per group (default 32)
//   mask    lane: XOR mask as hex or decimal (default 1 << bit)
//
// hang and crash exercise the watchdog, not the verification: at a matching injection point the
// process sleeps forever (hang) or raises SIGSEGV (crash). qualify and sweep run each device in a
// watched child process, so only that device is marked device_error.
//
// digest leaves the output alone and corrupts the digest a deterministic probe reports for
// consensus: a device whose own checks pass but whose answer differs from its peers'.
//
// A bad spec is an InputError naming the clause and field.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/common/digest.hpp"

namespace sdc {

enum class FaultModel { kBitflip, kMultibit, kRandom, kStuck, kLane, kHang, kCrash, kDigest };
enum class FaultMode { kTransient, kIntermittent, kPermanent };

struct InjectionSpec {
  FaultModel model = FaultModel::kBitflip;
  FaultMode mode = FaultMode::kPermanent;
  std::string probe = "*";
  std::string device = "*";
  int rank = -1;  // -1: any
  double probability = 1.0;
  int bit = -1;  // -1: random
  int bits = 2;
  uint64_t count = 1;
  int64_t index = -1;  // -1: random
  bool stuck_value = true;
  uint32_t lane = 0;
  uint32_t lanes = 32;
  uint64_t mask = 0;   // 0: 1 << bit
  uint64_t after = 0;  // matching points before the onset
  std::string text;    // the clause as written, for reports
};

std::vector<InjectionSpec> parse_injection_specs(std::string_view text);

// An injection that matches nothing would let a run pass having injected nothing: throws InputError
// naming the clause and field when a clause's probe glob matches none of `probe_ids` or its device
// selector none of `devices` (index, UUID).
void check_injection_targets(const std::vector<InjectionSpec>& specs, const std::vector<std::string>& probe_ids,
                             const std::vector<std::pair<int, std::string>>& devices);

// Glob with * and ? (probe ids are dotted names; no character classes needed).
bool glob_match(std::string_view pattern, std::string_view text);

// Where a backend offers its output for corruption.
struct InjectionPoint {
  std::string_view probe;
  int device_index = 0;
  std::string_view device_uuid;
  uint64_t elements = 0;  // element count of the output
  unsigned width_bits = 64;
  uint64_t group = 1;  // consecutive elements produced by one lane
};

// What the backend applies. XOR entries cover bitflip, multibit and random; stuck forces one bit.
struct Corruption {
  struct Xor {
    uint64_t index;
    uint64_t mask;
  };
  std::vector<Xor> xors;
  bool stuck = false;
  uint64_t stuck_index = 0;
  unsigned stuck_bit = 0;
  bool stuck_value = true;
  bool lane_mask = false;
  uint32_t lane = 0;
  uint32_t lanes = 32;
  uint64_t mask = 0;

  bool empty() const { return xors.empty() && !stuck && !lane_mask; }
};

class Injector {
 public:
  Injector(std::vector<InjectionSpec> specs, uint64_t seed, int rank = 0);

  // Decides, for this point, what to corrupt. Thread-safe; advances the seeded RNG. A matching hang
  // or crash spec does not return.
  Corruption plan(const InjectionPoint& point);
  // model=digest: XORs a seeded non-zero mask into both lanes of `digest` when a clause matches.
  void corrupt_digest(std::string_view probe, int device_index, std::string_view device_uuid, Digest128& digest);
  bool empty() const { return specs_.empty(); }
  const std::vector<InjectionSpec>& specs() const { return specs_; }

 private:
  bool fires(size_t spec_index, const InjectionPoint& point);

  std::vector<InjectionSpec> specs_;
  std::vector<uint64_t> matched_;  // matching points seen, per spec
  int rank_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::mutex mutex_;
};

}  // namespace sdc
