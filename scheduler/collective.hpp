// coll.allreduce_exact: every rank contributes seeded small integers whose sum is exact in any ring
// or tree order, so the all-reduce result is compared bit for bit with the sum computed locally.
// FP32: values 0..16, exact below 2^24 for up to a million ranks. BF16: values up to 255 / ranks,
// so every partial sum stays below 256 (BF16 holds 8 significant bits); it runs with up to 255
// ranks. It catches corruption on the path (NVLink, PCIe, the network, the library). After a
// failure, pairwise send/recv rounds compare each rank's contribution as a peer received it, which
// names the failing links (pairs of ranks).
// Data moves in GPU memory over NCCL when the communicator is NCCL's, else in host memory.
// Injection (probe=coll.allreduce_exact; device= selects the communicator rank) corrupts the data
// as it leaves a rank: bitflip, multibit and random models.
// Cannot see: faults that change no value; a wrong sum that every rank computes alike locally.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "host/communicator.hpp"
#include "host/device.hpp"
#include "host/injection.hpp"

namespace sdc {

inline constexpr const char* kAllreduceProbe = "coll.allreduce_exact";
inline constexpr size_t kAllreduceElements = 4096;
inline constexpr int kBf16MaxRanks = 255;

struct CollectiveResult {
  std::vector<std::string> types;  // the element types reduced: fp32, and bf16 up to kBf16MaxRanks
  std::string transport;           // threads, mpi or nccl
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

// Collective: every rank of `comm` must call it with the same seed. `gpu` is this rank's device
// when comm.gpu_memory() (NCCL), where the data is staged; otherwise it is not used.
CollectiveResult check_allreduce(Communicator& comm, Device* gpu, uint64_t seed, Injector* injector);

}  // namespace sdc
