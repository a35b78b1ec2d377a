// Built without NCCL (or without CUDA): GPU collectives say what is missing.
#include "host/communicator.hpp"
#include "host/error.hpp"

namespace sdc {
namespace {

[[noreturn]] void no_nccl() {
  throw InputError(
      "GPU collectives: this sdcprobe was built without NCCL; install the CUDA toolkit and libnccl-dev, then "
      "rebuild");
}

}  // namespace

bool nccl_compiled() { return false; }

std::vector<std::unique_ptr<Communicator>> make_nccl_local_communicators(const std::vector<DeviceIdentity>&) {
  no_nccl();
}

std::unique_ptr<Communicator> make_nccl_world_communicator(Communicator&, const DeviceIdentity&) { no_nccl(); }

}  // namespace sdc
