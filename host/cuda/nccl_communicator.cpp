// NCCL communicators: data buffers are GPU memory and move over NCCL (NVLink, PCIe, the network),
// records over the control communicator (threads, or MPI).
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "host/communicator.hpp"
#include "host/cuda/cuda_error.hpp"
#include "host/cuda/cuda_raii.hpp"
#include "host/device.hpp"

namespace sdc {
namespace {

void nccl_check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw std::runtime_error(std::string("NCCL: ") + what + ": " + ncclGetErrorString(rc));
}

// The CUDA ordinal of a device named by its PCI bus id, which stays right whatever
// CUDA_VISIBLE_DEVICES or the run's device selection did to the indices.
int ordinal_of(const DeviceIdentity& gpu) {
  int ordinal = -1;
  SDC_CUDA_TRY(cudaDeviceGetByPCIBusId(&ordinal, gpu.pci_bus_id.c_str()));
  return ordinal;
}

class NcclCommunicator : public Communicator {
 public:
  // `owned_control` may be null when the caller keeps `control` alive.
  NcclCommunicator(ncclComm_t comm, int ordinal, Communicator& control, std::unique_ptr<Communicator> owned_control)
      : comm_(comm), ordinal_(ordinal), stream_(ordinal), control_(control), owned_control_(std::move(owned_control)) {}
  ~NcclCommunicator() override {
    DeviceGuard guard(ordinal_);
    const ncclResult_t rc = ncclCommDestroy(comm_);
    if (rc != ncclSuccess) std::fprintf(stderr, "sdcprobe: ncclCommDestroy: %s\n", ncclGetErrorString(rc));
  }

  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  std::vector<std::string> all_gather(const std::string& record) override { return control_.all_gather(record); }
  void barrier() override { control_.barrier(); }
  bool gpu_memory() const override { return true; }

  void all_reduce_sum(void* data, size_t count, ReduceType type) override {
    DeviceGuard guard(ordinal_);
    const ncclDataType_t t = type == ReduceType::kFloat32 ? ncclFloat32 : ncclBfloat16;
    nccl_check(ncclAllReduce(data, data, count, t, ncclSum, comm_, stream_.get()), "ncclAllReduce");
    finish("ncclAllReduce");
  }

  void send_recv(int peer, const void* send, void* recv, size_t bytes) override {
    DeviceGuard guard(ordinal_);
    // Grouped, so that the two directions proceed together instead of each waiting for the other.
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    nccl_check(ncclSend(send, bytes, ncclUint8, peer, comm_, stream_.get()), "ncclSend");
    nccl_check(ncclRecv(recv, bytes, ncclUint8, peer, comm_, stream_.get()), "ncclRecv");
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    finish("ncclSend/ncclRecv");
  }

 private:
  // Waits for the stream, then asks NCCL whether a peer or the network failed meanwhile.
  void finish(const char* what) {
    SDC_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
    ncclResult_t async = ncclSuccess;
    nccl_check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    nccl_check(async, what);
  }

  ncclComm_t comm_;
  int ordinal_;
  Stream stream_;
  Communicator& control_;
  std::unique_ptr<Communicator> owned_control_;
};

}  // namespace

bool nccl_compiled() { return true; }

std::vector<std::unique_ptr<Communicator>> make_nccl_local_communicators(const std::vector<DeviceIdentity>& gpus) {
  std::vector<int> ordinals;
  for (const auto& g : gpus) ordinals.push_back(ordinal_of(g));
  std::vector<ncclComm_t> comms(gpus.size());
  nccl_check(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ordinals.data()), "ncclCommInitAll");
  auto controls = make_local_communicators(static_cast<int>(gpus.size()));
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (size_t r = 0; r < gpus.size(); ++r) {
    Communicator& control = *controls[r];
    ranks.push_back(std::make_unique<NcclCommunicator>(comms[r], ordinals[r], control, std::move(controls[r])));
  }
  return ranks;
}

std::unique_ptr<Communicator> make_nccl_world_communicator(Communicator& control, const DeviceIdentity& gpu) {
  ncclUniqueId id;
  std::string mine;
  if (control.rank() == 0) {
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    mine.assign(reinterpret_cast<const char*>(&id), sizeof id);
  }
  // A broadcast from rank 0: the other ranks contribute empty records.
  const std::string root = control.all_gather(mine).front();
  if (root.size() != sizeof id) throw std::runtime_error("NCCL: rank 0 sent no unique id");
  std::memcpy(&id, root.data(), sizeof id);
  const int ordinal = ordinal_of(gpu);
  ncclComm_t comm = nullptr;
  {
    DeviceGuard guard(ordinal);
    nccl_check(ncclCommInitRank(&comm, control.size(), id, control.rank()), "ncclCommInitRank");
  }
  return std::make_unique<NcclCommunicator>(comm, ordinal, control, nullptr);
}

}  // namespace sdc
