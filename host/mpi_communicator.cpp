// The MPI communicator: OpenMPI (or any MPI) world ranks. Records move with MPI_Allgatherv; data
// buffers are host memory (GPU data goes over NCCL: host/cuda/nccl_communicator.cpp).
#include <mpi.h>

#include <cstdio>
#include <stdexcept>

#include "host/communicator.hpp"

namespace sdc {
namespace {

void mpi_check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed");
}

// MPI has no BF16 type: a user operation over 16-bit words, each hop rounded as NCCL rounds it.
void bf16_sum(void* in, void* inout, int* count, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *count; ++i) b[i] = bf16_add(a[i], b[i]);
}

int live_communicators = 0;  // MPI_Finalize waits for the last one

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) mpi_check(MPI_Init(nullptr, nullptr), "MPI_Init");
    ++live_communicators;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    mpi_check(MPI_Op_create(bf16_sum, 1, &bf16_sum_), "MPI_Op_create");
  }
  ~MpiCommunicator() override {
    MPI_Op_free(&bf16_sum_);
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (--live_communicators == 0 && !finalised) MPI_Finalize();
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

  void barrier() override { mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  void all_reduce_sum(void* data, size_t count, ReduceType type) override {
    const bool fp32 = type == ReduceType::kFloat32;
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), fp32 ? MPI_FLOAT : MPI_UINT16_T,
                            fp32 ? MPI_SUM : bf16_sum_, MPI_COMM_WORLD),
              "MPI_Allreduce");
  }

  void send_recv(int peer, const void* send, void* recv, size_t bytes) override {
    mpi_check(MPI_Sendrecv(send, static_cast<int>(bytes), MPI_BYTE, peer, 0, recv, static_cast<int>(bytes), MPI_BYTE,
                           peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
  }

  // MPI has no way to release ranks blocked in a collective: ending the job is the only way that no
  // rank waits forever for this one.
  void abort(const std::string& why) override {
    std::fprintf(stderr, "sdcprobe: rank %d aborts the MPI job: %s\n", rank_, why.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
};

}  // namespace

bool mpi_compiled() { return true; }

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace sdc
