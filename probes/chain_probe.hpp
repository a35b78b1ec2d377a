// What the ALU probes share: many copies of a small set of seeded chains run on every core/SM and
// lane; the host computes each seed's golden once, in scalar code, and every copy must match it.
#pragma once

#include <vector>

#include "probes/probe.hpp"

namespace sdc {

// The host's expected output elements, kChainOutputsPerCopy per seed, in scalar code.
std::vector<uint64_t> chain_goldens(const ChainJob& job);

// Sizes the job for the device and level (operator's --iterations wins), runs it and records it.
void run_chain_probe(ProbeContext& ctx, ProbeResult& result, ChainKind kind);

}  // namespace sdc
