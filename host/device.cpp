#include "host/device.hpp"

#include <algorithm>

#include "kernels/common/chains.hpp"

namespace sdc {

unsigned chain_width_bits(ChainKind kind) {
  switch (kind) {
    case ChainKind::kFma32: return 32;
    case ChainKind::kFma64:
    case ChainKind::kInt64:
    case ChainKind::kDivSqrt32:
    case ChainKind::kDivSqrt64: return 64;
  }
  return 64;
}

Digest128 chain_output_digest(const ChainJob& job, const std::vector<uint64_t>& goldens) {
  static_assert(kChainOutputsPerCopy == 2, "a copy's fp32 outputs fill one word");
  Digest128 d;
  const bool narrow = chain_width_bits(job.kind) == 32;
  for (uint64_t c = 0; c < job.copies; ++c) {
    const uint64_t* g = goldens.data() + (c % job.seeds) * kChainOutputsPerCopy;
    if (narrow) {
      digest_add(d, (g[0] & 0xffffffffULL) | (g[1] << 32), c);
    } else {
      digest_add(d, g[0], 2 * c);
      digest_add(d, g[1], 2 * c + 1);
    }
  }
  return d;
}

namespace {

class PlainHostBuffer final : public HostBuffer {
 public:
  explicit PlainHostBuffer(size_t bytes) : bytes_(bytes) {}
  void* data() override { return bytes_.data(); }
  size_t bytes() const override { return bytes_.size(); }

 private:
  std::vector<unsigned char> bytes_;
};

}  // namespace

std::unique_ptr<HostBuffer> make_host_buffer(size_t bytes) { return std::make_unique<PlainHostBuffer>(bytes); }

std::unique_ptr<HostBuffer> Device::allocate_host(size_t bytes) { return make_host_buffer(bytes); }

DeviceBuffer& Device::scratch(size_t bytes) {
  if (!scratch_ || scratch_->bytes() < bytes) {
    scratch_.reset();  // free first: the old and new buffers may not fit together
    scratch_ = allocate(bytes);
  }
  return *scratch_;
}

uint64_t Device::spare_memory_bytes() const {
  const uint64_t free_bytes = free_memory_bytes() + scratch_bytes();
  const uint64_t reserve = std::max<uint64_t>(4ULL << 30, identity_.memory_bytes / 20);
  return free_bytes > reserve ? free_bytes - reserve : 0;
}

void Device::inject(DeviceBuffer& buf, uint64_t elements, unsigned width_bits, uint64_t group) {
  apply_injection(buf, elements, width_bits, group);
  // After injection: a hang injected here is silent, as a hung kernel would be.
  beat();
}

void Device::apply_injection(DeviceBuffer& buf, uint64_t elements, unsigned width_bits, uint64_t group) {
  if (injector_ == nullptr || injector_->empty()) return;
  InjectionPoint point;
  point.probe = probe_id_;
  point.device_index = identity_.index;
  point.device_uuid = identity_.uuid;
  point.elements = elements;
  point.width_bits = width_bits;
  point.group = group;
  const Corruption c = injector_->plan(point);
  if (c.empty()) return;
  const uint64_t changed = apply_corruption(buf, width_bits, elements, group, c);
  ++tally_.points;
  tally_.changed += changed;
  tally_.width_bits = width_bits;
}

}  // namespace sdc
