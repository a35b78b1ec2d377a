// A device that could not be opened stays in the run, so that the report names it and the other
// devices are still tested: every operation fails as a sticky device error carrying the cause.
#include <utility>

#include "host/device.hpp"
#include "host/error.hpp"

namespace sdc {
namespace {

class FailedDevice final : public Device {
 public:
  FailedDevice(DeviceIdentity identity, std::string error) : Device(std::move(identity)), error_(std::move(error)) {}

  std::string open_error() const override { return error_; }
  uint64_t free_memory_bytes() const override { fail(); }
  std::unique_ptr<DeviceBuffer> allocate(size_t) override { fail(); }
  void upload(DeviceBuffer&, const void*, size_t) override { fail(); }
  void download(void*, DeviceBuffer&, size_t) override { fail(); }
  void fill(DeviceBuffer&, size_t, const Pattern&) override { fail(); }
  MismatchReport verify(DeviceBuffer&, size_t, const Pattern&, const Pattern*, Direction) override { fail(); }
  MismatchReport run_chains(const ChainJob&, const std::vector<uint64_t>&, Digest128*) override { fail(); }
  void run_sfu(const SfuJob&, DeviceBuffer&) override { fail(); }
  Digest128 digest(DeviceBuffer&, size_t) override { fail(); }
  void* mark_stream(void*) override { fail(); }

 protected:
  uint64_t apply_corruption(DeviceBuffer&, unsigned, uint64_t, uint64_t, const Corruption&) override { fail(); }

 private:
  [[noreturn]] void fail() const { throw CudaError(0, true, "open", __FILE__, __LINE__, error_); }

  std::string error_;
};

}  // namespace

std::unique_ptr<Device> make_failed_device(DeviceIdentity identity, std::string error) {
  identity.open_error = error;
  return std::make_unique<FailedDevice>(std::move(identity), std::move(error));
}

}  // namespace sdc
