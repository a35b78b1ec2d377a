// Factories for the built-in probes, one per file; register_builtin_probes lists them in order.
#pragma once

#include <memory>
#include <vector>

#include "probes/probe.hpp"

namespace sdc {

std::unique_ptr<Probe> make_mem_own_address_probe();
std::unique_ptr<Probe> make_mem_walking_bits_probe();
std::unique_ptr<Probe> make_mem_moving_inversions_probe();
std::unique_ptr<Probe> make_mem_march_c_probe();
std::unique_ptr<Probe> make_mem_modulo20_probe();
std::unique_ptr<Probe> make_mem_random_blocks_probe();
std::unique_ptr<Probe> make_alu_fma32_probe();
std::unique_ptr<Probe> make_alu_fma64_probe();
std::unique_ptr<Probe> make_alu_int64_probe();
std::unique_ptr<Probe> make_alu_divsqrt_probe();
std::unique_ptr<Probe> make_sfu_transcendental_probe();
// One family per file; a family with one probe per data type returns them in order.
std::vector<std::unique_ptr<Probe>> make_gemm_exact_probes();
std::vector<std::unique_ptr<Probe>> make_gemm_random_probes();
std::unique_ptr<Probe> make_gemm_dense_probe();
std::vector<std::unique_ptr<Probe>> make_gemm_scaled_probes();
std::vector<std::unique_ptr<Probe>> make_gemm_repeat_probes();
std::unique_ptr<Probe> make_gemm_simt_probe();
std::vector<std::unique_ptr<Probe>> make_gemm_burn_probes();

}  // namespace sdc
