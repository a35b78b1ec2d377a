// Communicators connect the ranks that take part in cross-device consensus: `local` runs one rank
// per thread in this process (the CPU backend's virtual devices), `mpi` one rank per process under
// mpirun or srun. Ranks exchange small byte records; every rank must make the same calls in the
// same order.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace sdc {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's record, in rank order, on every rank.
  virtual std::vector<std::string> all_gather(const std::string& record) = 0;
  // Element-wise sum over every rank, in place (host memory: CPU data moves over MPI).
  virtual void all_reduce_sum(std::vector<float>& data) = 0;
  // Sends `record` to `peer` and returns what `peer` sent: both must call it with each other.
  virtual std::string exchange(int peer, const std::string& record) = 0;
};

// `size` in-process ranks; rank r's communicator is element r, to be used by one thread only.
std::vector<std::unique_ptr<Communicator>> make_local_communicators(int size);

bool mpi_compiled();
// The MPI world (MPI_Init on the first call, MPI_Finalize when the last one is destroyed). Throws
// InputError when the build has no MPI, saying what to install.
std::unique_ptr<Communicator> make_mpi_communicator();

}  // namespace sdc
