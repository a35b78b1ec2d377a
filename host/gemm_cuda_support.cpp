#include "host/gemm_cuda_support.hpp"

#include "kernels/common/gemm_elements.hpp"

namespace sdc {

std::optional<GemmOperands> gemm_cuda_operands(GemmType type, GemmPath path, int cc) {
  if (path == GemmPath::kSimt) {
    if (type != GemmType::kFp32) return std::nullopt;
    return GemmOperands{type, type};
  }
  switch (type) {
    case GemmType::kE4m3:
      if (cc < 89) return std::nullopt;
      return GemmOperands{type, type};
    case GemmType::kE5m2:
      if (cc < 89) return std::nullopt;
      return GemmOperands{GemmType::kE5m2, GemmType::kE4m3};
    case GemmType::kTf32:
    case GemmType::kBf16:
      if (cc < 80) return std::nullopt;
      return GemmOperands{type, type};
    default: return GemmOperands{type, type};
  }
}

bool gemm_e4m3_holds(float v) {
  const float back = e4m3_to_float(static_cast<uint8_t>(float_to_minifloat_exact(v, kE4m3Format)));
  return back == v;
}

std::string gemm_cuda_unsupported_shape(GemmType type, GemmPath path, uint32_t m, uint32_t n, uint32_t k) {
  if (path == GemmPath::kSimt) return "";
  const bool fp8 = type == GemmType::kE4m3 || type == GemmType::kE5m2;
  if (fp8 && (m % 16 != 0 || n % 16 != 0 || k % 16 != 0)) {
    return std::string("cuBLASLt runs ") + gemm_type_name(type) + " only with m, n and k multiples of 16, not " +
           std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k);
  }
  return "";
}

}  // namespace sdc
