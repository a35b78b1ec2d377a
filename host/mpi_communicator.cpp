// The MPI communicator: OpenMPI (or any MPI) world ranks, records moved with MPI_Allgatherv.
#include <mpi.h>

#include <stdexcept>

#include "host/communicator.hpp"

namespace sdc {
namespace {

void mpi_check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed");
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) mpi_check(MPI_Init(nullptr, nullptr), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!finalised) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<std::string> all_gather(const std::string& record) override {
    int mine = static_cast<int>(record.size());
    std::vector<int> sizes(static_cast<size_t>(size_));
    mpi_check(MPI_Allgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    std::vector<int> offsets(sizes.size());
    int total = 0;
    for (size_t r = 0; r < sizes.size(); ++r) {
      offsets[r] = total;
      total += sizes[r];
    }
    std::string all(static_cast<size_t>(total), '\0');
    mpi_check(MPI_Allgatherv(record.data(), mine, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR,
                             MPI_COMM_WORLD),
              "MPI_Allgatherv");
    std::vector<std::string> out;
    for (size_t r = 0; r < sizes.size(); ++r) out.push_back(all.substr(offsets[r], sizes[r]));
    return out;
  }

  void all_reduce_sum(std::vector<float>& data) override {
    mpi_check(
        MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
  }

  std::string exchange(int peer, const std::string& record) override {
    int mine = static_cast<int>(record.size()), theirs = 0;
    mpi_check(MPI_Sendrecv(&mine, 1, MPI_INT, peer, 0, &theirs, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
    std::string received(static_cast<size_t>(theirs), '\0');
    mpi_check(MPI_Sendrecv(record.data(), mine, MPI_CHAR, peer, 1, received.data(), theirs, MPI_CHAR, peer, 1,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
    return received;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

bool mpi_compiled() { return true; }

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace sdc
