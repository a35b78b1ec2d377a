// Whether a burn reached load, judged from its condition samples (host/burn_conditions.hpp). Power
// and clock count only the samples taken under load: a GPU keeps its boost clock for a while after
// work, so the sample before the first GEMM and those in a pulse's idle half would let a throttled
// burn pass for one at full load.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "host/burn_conditions.hpp"

namespace sdc {

// Reached: DCGM's targeted power test asks for 75% of its target; an unthrottled GPU runs near its
// maximum SM clock.
inline constexpr double kLoadPowerReached = 0.75;
inline constexpr double kLoadClockReached = 0.9;

// What a burn's samples reached. A figure no sample gave is NaN.
struct BurnLoad {
  uint64_t samples_under_load = 0;
  double max_temperature_c = NAN;   // every sample
  double max_power_fraction = NAN;  // under load: power over the enforced limit
  double max_clock_fraction = NAN;  // under load: SM clock over its maximum
  double power_limit_w = NAN;       // the lowest enforced limit sampled
  double default_power_limit_w = NAN;
  double max_sm_clock_mhz = NAN;
  uint64_t reasons_seen = 0;  // every sample's clock event reasons
};

// Adds one sample, taken under load (right after a GEMM) or not (before the first, in a pulse's idle
// half).
void add_burn_sample(BurnLoad& load, const BurnConditions& c, bool under_load);

// true when a sample under load reached kLoadPowerReached of the power limit or kLoadClockReached of
// the maximum SM clock; false when none did and power was read; nullopt (unknown) without a power
// reading under load, since a GPU at its power limit runs below its maximum clock.
std::optional<bool> reached_load(const BurnLoad& load);

// Why the load was not reached or is unknown, and an enforced limit below the board's default; empty
// when neither.
std::string load_note(const BurnLoad& load);

}  // namespace sdc
