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

#include <memory>
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
  // device_error: the rank that failed and why (it threw, NCCL failed or timed out); any_failed is
  // then set too, and the other ranks were released, not left waiting.
  std::string error;
  // Whether process `rank` answers for the failure: the sender of a failing link, every rank when
  // no link was found, and this process when the ranks were its threads.
  bool implicates(int rank) const;
  std::string links_text() const;  // "3>0,3>1": sender>receiver
  nlohmann::json to_json() const;
};

// The memory check_allreduce moves: host memory (pinned on a GPU), mirrored by a buffer on the
// rank's GPU when the communicator moves GPU memory (NCCL). Make every rank's before the rank
// threads start and free them after they are joined: cudaMalloc and cudaFree synchronise a GPU,
// and one rank's allocation while another rank's NCCL kernels wait for it can deadlock them.
struct AllreduceStaging {
  struct Area {
    std::unique_ptr<HostBuffer> host;
    std::unique_ptr<DeviceBuffer> gpu;  // null for host communicators
  };
  Device* device = nullptr;  // owner of the gpu areas
  Area data;                 // the reduction, in place
  Area send, received;       // the pairwise rounds
};
AllreduceStaging make_allreduce_staging(const Communicator& comm, Device* gpu);

// Collective: every rank of `comm` must call it with the same seed. `gpu` is this rank's device
// when comm.gpu_memory() (NCCL), where the data is staged; otherwise it is not used. It ends with
// an all_gather, a barrier: no rank returns while a peer may still read its staging. Without
// `staging` it makes its own, inside the rank (fine for host communicators).
CollectiveResult check_allreduce(Communicator& comm, Device* gpu, uint64_t seed, Injector* injector,
                                 AllreduceStaging* staging = nullptr);

}  // namespace sdc
