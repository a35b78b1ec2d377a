#include "probes/builtin.hpp"

namespace sdc {

void register_builtin_probes(ProbeRegistry& registry) {
  registry.add(make_mem_own_address_probe());
  registry.add(make_mem_walking_bits_probe());
  registry.add(make_mem_moving_inversions_probe());
  registry.add(make_mem_march_c_probe());
  registry.add(make_mem_modulo20_probe());
  registry.add(make_mem_random_blocks_probe());
  registry.add(make_alu_fma32_probe());
  registry.add(make_alu_fma64_probe());
  registry.add(make_alu_int64_probe());
  registry.add(make_alu_divsqrt_probe());
  registry.add(make_sfu_transcendental_probe());
  for (auto& p : make_gemm_exact_probes()) registry.add(std::move(p));
  for (auto& p : make_gemm_random_probes()) registry.add(std::move(p));
  registry.add(make_gemm_dense_probe());
  for (auto& p : make_gemm_scaled_probes()) registry.add(std::move(p));
  for (auto& p : make_gemm_repeat_probes()) registry.add(std::move(p));
  registry.add(make_gemm_simt_probe());
  for (auto& p : make_gemm_burn_probes()) registry.add(std::move(p));
}

}  // namespace sdc
