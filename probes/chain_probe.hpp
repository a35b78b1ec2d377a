// What the ALU probes share: many copies of a small set of seeded chains run on every core/SM and
// lane; the host computes each seed's golden once, in scalar code, and every copy must match it.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "probes/probe.hpp"
#include "probes/reference_cache.hpp"

namespace sdc {

// What a correct device gives for a job: each seed's expected output elements and the digest of the
// whole output (chain_output_digest), which depends only on the seeds and the copy layout.
struct ChainExpected {
  std::shared_ptr<const std::vector<uint64_t>> goldens;
  Digest128 digest;
  size_t bytes() const { return sizeof(*this) + goldens->size() * sizeof(uint64_t); }
};

// The host's expected output elements, kChainOutputsPerCopy per seed, in scalar code; computed once
// per (kind, seed, seeds, iterations) and kept for the process.
std::vector<uint64_t> chain_goldens(const ChainJob& job);
// The goldens and expected digest of `job`, computed once per configuration (the goldens' key and
// the copies) and kept for the process: a repeated or inline probe pays device time only. `beat` is
// the device's heartbeat, called as the goldens progress.
std::shared_ptr<const ChainExpected> chain_expected(const ChainJob& job, const std::function<void()>& beat = {});
// What the two caches behind them have done in this process.
ReferenceCacheStats chain_golden_cache_stats();
ReferenceCacheStats chain_digest_cache_stats();

// Sizes the job for the device and level (operator's --iterations wins), runs it and records it.
void run_chain_probe(ProbeContext& ctx, ProbeResult& result, ChainKind kind);

}  // namespace sdc
