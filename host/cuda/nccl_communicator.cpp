// NCCL communicators: data buffers are GPU memory and move over NCCL (NVLink, PCIe, the network),
// records over the control communicator (threads, or MPI). Communicators are non-blocking: every
// NCCL call returns at once and the rank polls, with a timeout, for NCCL's asynchronous error and
// its stream, so that a failed or dead peer ends in an error (ncclCommAbort), never a hang.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "host/communicator.hpp"
#include "host/cuda/cuda_error.hpp"
#include "host/cuda/cuda_raii.hpp"
#include "host/device.hpp"
#include "host/error.hpp"

namespace sdc {
namespace {

// How long one collective, or the communicators' creation, may take before the rank gives up on
// its peers. The collectives move a few MiB: minutes mean a peer is gone.
constexpr std::chrono::seconds kNcclTimeout{300};

void nccl_check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess && rc != ncclInProgress) {
    throw NcclError(std::string(what) + ": " + ncclGetErrorString(rc));
  }
}

// The CUDA ordinal of a device named by its PCI bus id, which stays right whatever
// CUDA_VISIBLE_DEVICES or the run's device selection did to the indices.
int ordinal_of(const DeviceIdentity& gpu) {
  int ordinal = -1;
  SDC_CUDA_TRY(cudaDeviceGetByPCIBusId(&ordinal, gpu.pci_bus_id.c_str()));
  return ordinal;
}

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// What the ranks of one process share: the first failure, which every rank's poll sees.
struct AbortFlag {
  std::atomic<bool> raised{false};
  std::mutex mutex;
  std::string why;

  void raise(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!raised) why = reason;
    raised = true;
  }
  std::string reason() {
    std::lock_guard<std::mutex> lock(mutex);
    return why;
  }
};

// The communicators one process made for its local ranks. NCCL requires several communicators
// that one thread finalises to be finalised in one group: in turn, the first would wait for peers
// whose finalisation has not been asked for yet. The first rank destroyed finalises them all.
struct LocalClique {
  std::vector<ncclComm_t> comms;
  std::vector<int> ordinals;
  std::once_flag finalizing;
  bool started = false;  // every ncclCommFinalize of the group was accepted
};

bool finalize_together(LocalClique& clique) {
  bool ok = ncclGroupStart() == ncclSuccess;
  for (size_t r = 0; ok && r < clique.comms.size(); ++r) {
    NothrowDeviceGuard guard(clique.ordinals[r]);
    const ncclResult_t rc = ncclCommFinalize(clique.comms[r]);
    ok = rc == ncclSuccess || rc == ncclInProgress;
  }
  const ncclResult_t ended = ncclGroupEnd();
  return ok && (ended == ncclSuccess || ended == ncclInProgress);
}

// Waits until NCCL has finished with `comm` (no ncclInProgress), then, given a stream, until the
// stream has drained. Returns "" on success, else why it stopped: NCCL's asynchronous error, a
// CUDA error, the shared abort flag, or the timeout.
std::string poll(ncclComm_t comm, cudaStream_t stream, AbortFlag* flag, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + kNcclTimeout;
  for (;;) {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t got = ncclCommGetAsyncError(comm, &async);
    if (got != ncclSuccess) return std::string(what) + ": ncclCommGetAsyncError: " + ncclGetErrorString(got);
    if (async != ncclSuccess && async != ncclInProgress) {
      return std::string(what) + ": " + ncclGetErrorString(async) + " (" + ncclGetLastError(comm) + ")";
    }
    if (async == ncclSuccess) {
      if (stream == nullptr) return "";
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) return "";
      if (q != cudaErrorNotReady) {
        return std::string(what) + ": " + cudaGetErrorName(q) + ": " + cudaGetErrorString(q);
      }
    }
    if (flag != nullptr && flag->raised) return "communicator aborted: " + flag->reason();
    if (std::chrono::steady_clock::now() > deadline) {
      return std::string(what) + ": no progress in " + std::to_string(kNcclTimeout.count()) +
             " s (a peer failed or died)";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

class NcclCommunicator : public Communicator {
 public:
  // `owned_control` may be null when the caller keeps `control` alive; `flag` is shared by the
  // ranks of this process (null for a single rank).
  NcclCommunicator(ncclComm_t comm, int ordinal, Communicator& control, std::unique_ptr<Communicator> owned_control,
                   std::shared_ptr<AbortFlag> flag, std::shared_ptr<LocalClique> clique)
      : comm_(comm),
        ordinal_(ordinal),
        stream_(ordinal),
        control_(control),
        owned_control_(std::move(owned_control)),
        flag_(std::move(flag)),
        clique_(std::move(clique)) {}
  ~NcclCommunicator() override {
    NothrowDeviceGuard guard(ordinal_);
    if (aborted_) return;
    // A non-blocking communicator is finalised (flushing its work) before it is destroyed. After a
    // failure anywhere, or when finalising does not finish, only abort is safe: ncclCommDestroy
    // would wait for peers that may be gone. The local ranks are destroyed together, after their
    // threads are joined: the first destroyed finalises the clique.
    bool clean = flag_ == nullptr || !flag_->raised;
    if (clean && clique_ != nullptr) {
      std::call_once(clique_->finalizing, [this] { clique_->started = finalize_together(*clique_); });
      clean = clique_->started;
    } else if (clean) {
      const ncclResult_t finalized = ncclCommFinalize(comm_);
      clean = finalized == ncclSuccess || finalized == ncclInProgress;
    }
    if (clean) clean = poll(comm_, nullptr, flag_.get(), "ncclCommFinalize").empty();
    const ncclResult_t rc = clean ? ncclCommDestroy(comm_) : ncclCommAbort(comm_);
    if (rc != ncclSuccess) {
      std::fprintf(stderr, "sdcprobe: %s: %s\n", clean ? "ncclCommDestroy" : "ncclCommAbort", ncclGetErrorString(rc));
    }
  }

  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  std::vector<std::string> all_gather(const std::string& record) override { return control_.all_gather(record); }
  void barrier() override { control_.barrier(); }
  bool gpu_memory() const override { return true; }

  void all_reduce_sum(void* data, size_t count, ReduceType type) override {
    enter();
    DeviceGuard guard(ordinal_);
    const ncclDataType_t t = type == ReduceType::kFloat32 ? ncclFloat32 : ncclBfloat16;
    check(ncclAllReduce(data, data, count, t, ncclSum, comm_, stream_.get()), "ncclAllReduce");
    finish("ncclAllReduce");
  }

  void send_recv(int peer, const void* send, void* recv, size_t bytes) override {
    enter();
    DeviceGuard guard(ordinal_);
    // Grouped, so that the two directions proceed together instead of each waiting for the other.
    check(ncclGroupStart(), "ncclGroupStart");
    check(ncclSend(send, bytes, ncclUint8, peer, comm_, stream_.get()), "ncclSend");
    check(ncclRecv(recv, bytes, ncclUint8, peer, comm_, stream_.get()), "ncclRecv");
    check(ncclGroupEnd(), "ncclGroupEnd");
    finish("ncclSend/ncclRecv");
  }

  // Raises the shared flag (the other local ranks' polls see it and abort their own communicators)
  // and releases ranks waiting in the control communicator. This rank's communicator is aborted
  // by its destructor, or here when called from the rank's own thread after a failed poll.
  void abort(const std::string& why) override {
    if (flag_ != nullptr) flag_->raise(why);
    control_.abort(why);
  }

 private:
  void enter() {
    if (aborted_) throw CommunicatorAborted("communicator aborted: " + failure_);
    if (flag_ != nullptr && flag_->raised) fail("communicator aborted: " + flag_->reason());
  }
  void check(ncclResult_t rc, const char* what) {
    if (rc != ncclSuccess && rc != ncclInProgress) fail(std::string(what) + ": " + ncclGetErrorString(rc));
  }
  void finish(const char* what) {
    const std::string failed = poll(comm_, stream_.get(), flag_.get(), what);
    if (!failed.empty()) fail(failed);
  }
  // Aborts this rank's communicator (its kernels may be waiting for a peer that will never come)
  // and the group, then throws: CommunicatorAborted when another rank's failure caused it.
  [[noreturn]] void fail(const std::string& why) {
    if (!aborted_) {
      aborted_ = true;
      failure_ = why;
      const ncclResult_t rc = ncclCommAbort(comm_);
      if (rc != ncclSuccess) std::fprintf(stderr, "sdcprobe: ncclCommAbort: %s\n", ncclGetErrorString(rc));
    }
    const bool echo = why.rfind("communicator aborted: ", 0) == 0;
    if (echo) throw CommunicatorAborted(why);
    const NcclError error("rank " + std::to_string(rank()) + ": " + why);
    // The local ranks are released at once. Across processes (MPI) the peers' own polls see NCCL's
    // error or time out: ending the job from here would lose this rank's report.
    if (flag_ != nullptr) abort(describe_error(error));
    throw error;
  }

  ncclComm_t comm_;
  int ordinal_;
  Stream stream_;
  Communicator& control_;
  std::unique_ptr<Communicator> owned_control_;
  std::shared_ptr<AbortFlag> flag_;
  std::shared_ptr<LocalClique> clique_;  // null for a process's only rank
  bool aborted_ = false;
  std::string failure_;
};

}  // namespace

bool nccl_compiled() { return true; }

std::vector<std::unique_ptr<Communicator>> make_nccl_local_communicators(const std::vector<DeviceIdentity>& gpus) {
  std::vector<int> ordinals;
  for (const auto& g : gpus) ordinals.push_back(ordinal_of(g));
  const int n = static_cast<int>(gpus.size());
  ncclUniqueId id;
  nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  // One thread creates every rank: ncclCommInitRankConfig calls inside one group, each with its
  // GPU current, then a poll of each until its creation has finished.
  std::vector<ncclComm_t> comms(gpus.size(), nullptr);
  ncclConfig_t config = nonblocking_config();
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < n; ++r) {
    DeviceGuard guard(ordinals[static_cast<size_t>(r)]);
    nccl_check(ncclCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, &config), "ncclCommInitRankConfig");
  }
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  for (size_t r = 0; r < comms.size(); ++r) {
    const std::string failed = poll(comms[r], nullptr, nullptr, "ncclCommInitRankConfig");
    if (!failed.empty()) {
      for (ncclComm_t c : comms) {
        if (c != nullptr) (void)ncclCommAbort(c);
      }
      throw NcclError("rank " + std::to_string(r) + ": " + failed);
    }
  }
  auto controls = make_local_communicators(n);
  auto flag = std::make_shared<AbortFlag>();
  auto clique = std::make_shared<LocalClique>();
  clique->comms = comms;
  clique->ordinals = ordinals;
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (size_t r = 0; r < gpus.size(); ++r) {
    Communicator& control = *controls[r];
    ranks.push_back(
        std::make_unique<NcclCommunicator>(comms[r], ordinals[r], control, std::move(controls[r]), flag, clique));
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
  if (root.size() != sizeof id) throw NcclError("rank 0 sent no unique id");
  std::memcpy(&id, root.data(), sizeof id);
  const int ordinal = ordinal_of(gpu);
  ncclComm_t comm = nullptr;
  {
    DeviceGuard guard(ordinal);
    ncclConfig_t config = nonblocking_config();
    nccl_check(ncclCommInitRankConfig(&comm, control.size(), id, control.rank(), &config), "ncclCommInitRankConfig");
    const std::string failed = poll(comm, nullptr, nullptr, "ncclCommInitRankConfig");
    if (!failed.empty()) {
      (void)ncclCommAbort(comm);
      throw NcclError("rank " + std::to_string(control.rank()) + ": " + failed);
    }
  }
  return std::make_unique<NcclCommunicator>(comm, ordinal, control, nullptr, nullptr, nullptr);
}

}  // namespace sdc
