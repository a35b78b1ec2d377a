// A probe targets one class of fault, has an independent expected answer, and is registered under
// a stable dotted id that never changes once released.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/device.hpp"
#include "probes/result.hpp"

namespace sdc {

enum class Level { kQuick, kStandard, kLong };

Level parse_level(const std::string& name);  // throws InputError
const char* level_name(Level level);

// The most --iterations (and a golden file's iterations) may ask for.
inline constexpr uint32_t kMaxIterations = 1u << 30;

struct ProbeContext {
  Device& device;
  uint64_t seed = 0;  // the same for every device, so outputs are comparable across devices
  Level level = Level::kQuick;
  std::optional<uint64_t> size_bytes;     // mem.* buffer bytes (the operator's --size)
  std::optional<uint64_t> compute_bytes;  // GEMM and SFU working set: for campaigns, benchmarks and tests
  std::optional<uint32_t> iterations;     // operator override of passes / chain length
  std::optional<uint32_t> gemm_n;         // GEMM size, over the level's and compute_bytes' (coverage --gemm-n)
  bool gemm_cuda_model = false;           // verify random GEMMs with the CUDA engine's bounds (coverage)
  std::optional<double> burn_s;           // gemm.burn.*: seconds (the operator's --burn); else the level's
  // gemm.burn.*: the conditions' sampler in place of the device's own (tests).
  std::optional<ConditionsSource> burn_conditions;
};

class Probe {
 public:
  virtual ~Probe() = default;
  virtual std::string id() const = 0;
  // What fault the probe targets, and what it cannot see (shown by `sdcprobe list`).
  virtual std::string targets() const = 0;
  virtual std::string blind_spots() const = 0;
  // Whether a changed output may pass by design, below a stated bound (Freivalds' tau): coverage
  // counts those "below tolerance", not missed.
  virtual bool has_stated_bound() const { return false; }
  // Whether qualify runs it at this level on this device (budget and capability).
  virtual bool included_at(Level level, const DeviceIdentity& device) const = 0;
  // Runs and verifies. Fills report, bytes, flops, params; the runner fills timing and outcome.
  virtual void run(ProbeContext& ctx, ProbeResult& result) const = 0;
};

class ProbeRegistry {
 public:
  void add(std::unique_ptr<Probe> probe);  // throws on a duplicate id
  const std::vector<std::unique_ptr<Probe>>& probes() const { return probes_; }
  const Probe* find(const std::string& id) const;
  // Probes whose id matches any glob; throws InputError when a glob matches nothing.
  std::vector<const Probe*> select(const std::vector<std::string>& globs) const;

 private:
  std::vector<std::unique_ptr<Probe>> probes_;
};

// The one explicit list of built-in probes (no static initialisers a static library could drop).
void register_builtin_probes(ProbeRegistry& registry);

}  // namespace sdc
