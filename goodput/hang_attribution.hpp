// Which rank hung the job, from every rank's flight-recorder dump (goodput/flight_recorder.hpp):
// the ranks are lined up per process group by collective sequence number. A rank that never
// enqueued a collective that others of its group did, and that is not itself waiting in a
// collective of another group, blocks the job; so does a rank whose op, sizes or dtypes differ from
// the others' at one sequence number. A rank without a dump is never guessed at: it is "cannot
// decide", and so is every rank whose innocence would depend on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "goodput/flight_recorder.hpp"

namespace sdc::goodput {

// One process group as the dumps show it.
struct HangGroup {
  std::string group, desc;
  std::vector<int> members;      // ranks known to belong to it
  std::vector<int> no_dump;      // members without a dump
  int64_t first_incomplete = 0;  // the first sequence some dumped member never enqueued; 0: none
  std::string op;                // that collective, as the ranks that enqueued it name it
  int64_t timeout_ms = 0;        // its timeout: how long the ranks that enqueued it waited
  std::vector<int> missing;      // the dumped members that never enqueued it
};

// A collective whose op, sizes or dtypes differ between ranks at one sequence number.
struct HangMismatch {
  std::string group;
  int64_t seq = 0;
  std::string field;                    // "op", "input_sizes", ...
  std::vector<int> odd;                 // the ranks that differ from the majority (all, with no majority)
  std::string odd_value, common_value;  // common_value is empty with no majority
};

struct HangRank {
  int rank = -1;
  std::string why;
};

struct HangReport {
  enum class Verdict { kNoHang, kCulprit, kCannotDecide };
  Verdict verdict = Verdict::kNoHang;
  int world_size = 0;
  std::vector<int> dumped;
  std::vector<HangGroup> groups;  // those with an incomplete collective or a missing dump
  std::vector<HangMismatch> mismatches;
  std::vector<HangRank> culprits;   // sorted by rank
  std::vector<HangRank> undecided;  // sorted by rank
};

const char* verdict_name(HangReport::Verdict v);

// `world_size` 0: the largest rank that the dumps name (files and pg_config) plus one. Throws
// InputError naming the file of a rank outside the world.
HangReport attribute_hang(const std::vector<FrDump>& dumps, int world_size = 0);

}  // namespace sdc::goodput
