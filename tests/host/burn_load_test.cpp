// Whether a burn reached load (host/burn_load.hpp): judged from the samples under load only, so a
// GPU that boosts before the first GEMM or in a pulse's idle half and runs throttled under load has
// not reached it; unknown without a power reading under load or without any sample under load; an
// enforced limit below the board's default is named.
#include <gtest/gtest.h>

#include <cmath>

#include "host/burn_load.hpp"

namespace sdc {
namespace {

// An H200-like GPU: maximum SM clock 1980 MHz, power limit 700 W.
BurnConditions conditions(double power_w, double clock_mhz, double limit_w = 700) {
  BurnConditions c;
  c.temperature_c = 60;
  c.sm_clock_mhz = clock_mhz;
  c.max_sm_clock_mhz = 1980;
  c.power_w = power_w;
  c.power_limit_w = limit_w;
  c.default_power_limit_w = 700;
  return c;
}

TEST(BurnLoad, SamplesBeforeTheLoadAndInTheIdleHalfDoNotCount) {
  BurnLoad load;
  add_burn_sample(load, conditions(700, 1980), false);  // before the first GEMM: still boosting
  add_burn_sample(load, conditions(350, 990), true);    // under load: half the clock and power
  add_burn_sample(load, conditions(690, 1980), false);  // a pulse's idle half, right after work
  EXPECT_EQ(load.samples_under_load, 1u);
  EXPECT_DOUBLE_EQ(load.max_power_fraction, 0.5);
  EXPECT_DOUBLE_EQ(load.max_clock_fraction, 0.5);
  EXPECT_EQ(reached_load(load), std::optional<bool>(false));
  EXPECT_EQ(load_note(load),
            "never reached the power limit (at most 50% of 700 W) nor the maximum SM clock (at most 50% of 1980 MHz) "
            "under load: a throttled or capped GPU, not the same test");
}

TEST(BurnLoad, ReachedByPowerOrByClockUnderLoad) {
  BurnLoad power;
  add_burn_sample(power, conditions(530, 1500), true);  // 76% of the limit at 76% of the clock
  EXPECT_EQ(reached_load(power), std::optional<bool>(true));
  EXPECT_EQ(load_note(power), "");
  BurnLoad clock;
  add_burn_sample(clock, conditions(300, 1790), true);  // 43% of the limit at 90.4% of the clock
  EXPECT_EQ(reached_load(clock), std::optional<bool>(true));
  BurnLoad below;
  add_burn_sample(below, conditions(520, 1780), true);  // 74%, 89.9%: just short of both
  EXPECT_EQ(reached_load(below), std::optional<bool>(false));
}

TEST(BurnLoad, UnknownWithoutPowerUnderLoadOrWithoutASampleUnderLoad) {
  BurnLoad unread;
  add_burn_sample(unread, conditions(700, 1980), false);  // power read before the load only
  add_burn_sample(unread, conditions(NAN, 1000), true);
  EXPECT_EQ(reached_load(unread), std::nullopt);
  EXPECT_EQ(load_note(unread),
            "power unread, SM clock under load at most 51% of 1980 MHz: whether the burn reached the power limit is "
            "unknown");
  BurnLoad none;
  add_burn_sample(none, conditions(700, 1980), false);
  EXPECT_EQ(none.samples_under_load, 0u);
  EXPECT_TRUE(std::isnan(none.max_power_fraction));
  EXPECT_EQ(reached_load(none), std::nullopt);
  EXPECT_EQ(load_note(none), "no sample under load: whether the burn reached the power limit is unknown");
  EXPECT_EQ(none.max_temperature_c, 60);  // temperature counts every sample
}

TEST(BurnLoad, NamesAPowerLimitCappedBelowTheDefault) {
  BurnLoad capped;
  add_burn_sample(capped, conditions(490, 1700, 500), true);  // 98% of a 500 W cap
  add_burn_sample(capped, conditions(100, 1980, 600), false);
  EXPECT_EQ(reached_load(capped), std::optional<bool>(true));
  EXPECT_DOUBLE_EQ(capped.power_limit_w, 500);  // the lowest enforced limit sampled
  EXPECT_EQ(load_note(capped), "power limit capped at 500 W of the board's default 700 W");
}

}  // namespace
}  // namespace sdc
