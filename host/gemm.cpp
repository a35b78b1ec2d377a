// The GEMM specs' names and the steps every engine's run() shares (gemm.hpp).
#include "host/gemm.hpp"

#include <stdexcept>

namespace sdc {

const char* gemm_type_name(GemmType t) {
  switch (t) {
    case GemmType::kFp64: return "fp64";
    case GemmType::kFp32: return "fp32";
    case GemmType::kTf32: return "tf32";
    case GemmType::kFp16: return "fp16";
    case GemmType::kBf16: return "bf16";
    case GemmType::kE4m3: return "e4m3";
    case GemmType::kE5m2: return "e5m2";
    case GemmType::kInt8: return "int8";
  }
  return "";
}

const char* gemm_inputs_name(GemmInputs in) {
  switch (in) {
    case GemmInputs::kExact: return "exact";
    case GemmInputs::kDense: return "dense";
    case GemmInputs::kScaled: return "scaled";
    case GemmInputs::kRandom: return "random";
  }
  return "";
}

bool gemm_same_inputs(const GemmSpec& a, const GemmSpec& b) {
  return a.type == b.type && a.inputs == b.inputs && a.m == b.m && a.n == b.n && a.k == b.k && a.seed == b.seed;
}

bool gemm_same_accumulation(const GemmAccumulation& a, const GemmAccumulation& b) {
  return a.u_acc == b.u_acc && a.u_inner == b.u_inner && a.chunk == b.chunk && a.u_out == b.u_out &&
         a.underflow == b.underflow;
}

void gemm_require_runnable(const GemmEngine& engine, const GemmSpec& spec) {
  if (!engine.supports(spec.type, spec.path)) {
    throw std::runtime_error(std::string("gemm: ") + gemm_type_name(spec.type) + " on this path is not supported here");
  }
  if (spec.n % 2 != 0) throw std::invalid_argument("gemm: n must be even (digests read 64-bit words)");
}

DeviceBuffer& gemm_output_buffer(Device& device, std::unique_ptr<DeviceBuffer>& c, const GemmSpec& spec) {
  const uint64_t bytes = static_cast<uint64_t>(spec.m) * spec.n * gemm_output_bytes(spec.type);
  if (!c || c->bytes() != bytes) {
    c.reset();
    c = device.allocate(bytes);
  }
  return *c;
}

}  // namespace sdc
