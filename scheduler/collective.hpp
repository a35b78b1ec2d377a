// coll.allreduce_exact: every rank contributes seeded small integers (0..16) whose FP32 sum is
// exact in any ring or tree order (below 2^24 for any rank count up to a million), so the all-reduce
// result is compared bit for bit with the sum computed locally. It catches corruption on the path
// (NVLink, PCIe, the network, the library). After a failure, pairwise exchange rounds compare
// each rank's contribution as a peer received it, which names the failing links (pairs of ranks).
// Injection (probe=coll.allreduce_exact; device= selects the communicator rank) corrupts the data
// as it leaves a rank: bitflip, multibit and random models.
// Cannot see: GPU buffers and NCCL (not built yet: CPU data only), faults that change no value.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "host/communicator.hpp"
#include "host/injection.hpp"

namespace sdc {

inline constexpr const char* kAllreduceProbe = "coll.allreduce_exact";
inline constexpr size_t kAllreduceElements = 4096;

struct CollectiveResult {
  uint64_t checked = 0;
  uint64_t mismatches = 0;                     // this rank's result elements that differ
  bool any_failed = false;                     // on any rank
  std::vector<std::pair<int, int>> bad_links;  // (sender, receiver) whose exchanged data differed
  bool local = false;                          // ranks were this process's threads
  // Whether process `rank` answers for the failure: the sender of a failing link, every rank when
  // no link was found, and this process when the ranks were its threads.
  bool implicates(int rank) const;
  std::string links_text() const;  // "3>0,3>1": sender>receiver
  nlohmann::json to_json() const;
};

// Collective: every rank of `comm` must call it with the same seed.
CollectiveResult check_allreduce(Communicator& comm, uint64_t seed, Injector* injector);

}  // namespace sdc
