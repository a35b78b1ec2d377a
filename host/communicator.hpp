// Communicators connect the ranks that take part in cross-device consensus and coll.allreduce_exact:
// `local` runs one rank per thread in this process (the CPU backend's virtual devices, or one GPU
// each over NCCL), `mpi` one rank per process under mpirun or srun (GPU data over NCCL, its unique
// id broadcast over MPI). Every rank must make the same calls in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sdc {

struct DeviceIdentity;  // host/device.hpp

enum class ReduceType { kFloat32, kBFloat16 };
const char* reduce_type_name(ReduceType type);  // "fp32", "bf16"
size_t reduce_type_bytes(ReduceType type);

// One reduction hop in BF16 as NCCL computes it: the FP32 sum rounded to nearest even.
uint16_t bf16_add(uint16_t a, uint16_t b);

// Thrown in a rank whose group was aborted (another rank failed, a peer died, NCCL timed out): the
// message names the rank that failed and why.
class CommunicatorAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's record, in rank order, on every rank. Records are small and live in host memory.
  virtual std::vector<std::string> all_gather(const std::string& record) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;

  // Data buffers: host memory, or memory of this rank's GPU when gpu_memory() (NCCL).
  virtual bool gpu_memory() const { return false; }
  // Element-wise sum over every rank, in place.
  virtual void all_reduce_sum(void* data, size_t count, ReduceType type) = 0;
  // Sends `bytes` bytes to `peer` and receives as many from it: both must call it with each other.
  virtual void send_recv(int peer, const void* send, void* recv, size_t bytes) = 0;

  // Called by a rank that cannot go on (it threw), so that no other rank waits for it: every rank
  // blocked in, or later entering, a call of this group throws CommunicatorAborted carrying `why`.
  // NCCL aborts its communicators (ncclCommAbort). Safe from any thread.
  virtual void abort(const std::string& why) = 0;
};

// Runs body(rank, communicator) on one thread per rank and joins them all. A rank that throws
// aborts the group with "rank r: <what>", so the others are released rather than left blocked.
// Returns each rank's error ("" when it finished): the failing rank's own, and the others'
// CommunicatorAborted messages, which name it.
std::vector<std::string> run_ranks(const std::vector<std::unique_ptr<Communicator>>& ranks,
                                   const std::function<void(int rank, Communicator& comm)>& body);

// `size` in-process ranks; rank r's communicator is element r, to be used by one thread only.
std::vector<std::unique_ptr<Communicator>> make_local_communicators(int size);

bool mpi_compiled();
// The MPI world (MPI_Init on the first call, MPI_Finalize when the last one is destroyed). Throws
// InputError when the build has no MPI, saying what to install.
std::unique_ptr<Communicator> make_mpi_communicator();

bool nccl_compiled();
// One NCCL rank per GPU of this process (ncclCommInitAll), in the order given; element r moves
// gpus[r]'s memory and is used by one thread only. Records move between the threads.
std::vector<std::unique_ptr<Communicator>> make_nccl_local_communicators(const std::vector<DeviceIdentity>& gpus);
// The ranks of `control` (the MPI world), one GPU each: NCCL's unique id is broadcast over
// `control`, which keeps carrying the records and must outlive the result.
std::unique_ptr<Communicator> make_nccl_world_communicator(Communicator& control, const DeviceIdentity& gpu);
// Both throw InputError when the build has no NCCL, saying what to install, and NcclError when NCCL
// fails (a collective of the result too, unless another rank's failure aborted it: CommunicatorAborted).

}  // namespace sdc
