// A burn's conditions read through NVML (host/nvml/nvml_conditions.cpp), against a stand-in library with
// NVML's ABI: the fields sampled, a field the driver does not answer as NaN (never a made-up
// number), and no sampler, with the reason, for a missing library or an unknown GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "host/burn_conditions.hpp"
#include "host/nvml/nvml_conditions.hpp"

namespace sdc {
namespace {

TEST(NvmlConditions, SamplesTheGpusConditionsAndLeavesWhatTheDriverDoesNotAnswerUnread) {
  const ConditionsSource source = nvml_conditions(SDC_FAKE_NVML_CONDITIONS, "GPU-fake-conditions");
  ASSERT_TRUE(source.sample) << source.unavailable;
  const BurnConditions c = source.sample();
  EXPECT_EQ(c.temperature_c, 71);
  EXPECT_EQ(c.sm_clock_mhz, 1755);
  EXPECT_EQ(c.max_sm_clock_mhz, 1980);
  EXPECT_TRUE(std::isnan(c.power_w));  // not supported: unread
  EXPECT_EQ(c.power_limit_w, 500);
  EXPECT_EQ(c.default_power_limit_w, 700);
  ASSERT_TRUE(c.clock_event_reasons);
  EXPECT_EQ(clock_event_reason_names(*c.clock_event_reasons),
            (std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown"}));
}

TEST(NvmlConditions, NoSamplerWithoutTheLibraryOrTheGpu) {
  const ConditionsSource missing = nvml_conditions("/nonexistent/libnvidia-ml.so.1", "GPU-fake-conditions");
  EXPECT_FALSE(missing.sample);
  EXPECT_NE(missing.unavailable.find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << missing.unavailable;
  const ConditionsSource unknown = nvml_conditions(SDC_FAKE_NVML_CONDITIONS, "GPU-other");
  EXPECT_FALSE(unknown.sample);
  EXPECT_NE(unknown.unavailable.find("no GPU GPU-other"), std::string::npos) << unknown.unavailable;
}

TEST(NvmlConditions, ReasonNamesIncludeUnknownBits) {
  EXPECT_EQ(clock_event_reason_names(0), std::vector<std::string>{});
  EXPECT_EQ(clock_event_reason_names(kClockEventHwSlowdown | kClockEventHwPowerBrake | (uint64_t{1} << 12)),
            (std::vector<std::string>{"hw_slowdown", "hw_power_brake_slowdown", "bit 12"}));
}

}  // namespace
}  // namespace sdc
