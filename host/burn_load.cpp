#include "host/burn_load.hpp"

#include <cstdio>

namespace sdc {

void add_burn_sample(BurnLoad& load, const BurnConditions& c, bool under_load) {
  load.max_temperature_c = std::fmax(load.max_temperature_c, c.temperature_c);  // fmax ignores NaN
  load.power_limit_w = std::fmin(load.power_limit_w, c.power_limit_w);
  load.default_power_limit_w = c.default_power_limit_w;
  load.max_sm_clock_mhz = c.max_sm_clock_mhz;
  if (c.clock_event_reasons) load.reasons_seen |= *c.clock_event_reasons;
  if (!under_load) return;
  ++load.samples_under_load;
  if (c.power_limit_w > 0) load.max_power_fraction = std::fmax(load.max_power_fraction, c.power_w / c.power_limit_w);
  if (c.max_sm_clock_mhz > 0) {
    load.max_clock_fraction = std::fmax(load.max_clock_fraction, c.sm_clock_mhz / c.max_sm_clock_mhz);
  }
}

std::optional<bool> reached_load(const BurnLoad& load) {
  if (load.max_power_fraction >= kLoadPowerReached || load.max_clock_fraction >= kLoadClockReached) return true;
  if (std::isnan(load.max_power_fraction)) return std::nullopt;
  return false;
}

std::string load_note(const BurnLoad& load) {
  char power_text[64] = "unread", clock_text[64] = "unread";
  if (!std::isnan(load.max_power_fraction)) {
    std::snprintf(power_text, sizeof power_text, "at most %.0f%% of %.0f W", 100 * load.max_power_fraction,
                  load.power_limit_w);
  }
  if (!std::isnan(load.max_clock_fraction)) {
    std::snprintf(clock_text, sizeof clock_text, "at most %.0f%% of %.0f MHz", 100 * load.max_clock_fraction,
                  load.max_sm_clock_mhz);
  }
  std::string note;
  const std::optional<bool> reached = reached_load(load);
  if (load.samples_under_load == 0) {
    note = "no sample under load: whether the burn reached the power limit is unknown";
  } else if (!reached) {
    note = std::string("power unread, SM clock under load ") + clock_text +
           ": whether the burn reached the power limit is unknown";
  } else if (!*reached) {
    note = std::string("never reached the power limit (") + power_text + ") nor the maximum SM clock (" + clock_text +
           ") under load: a throttled or capped GPU, not the same test";
  }
  if (load.power_limit_w < load.default_power_limit_w) {
    char text[128];
    std::snprintf(text, sizeof text, "%spower limit capped at %.0f W of the board's default %.0f W",
                  note.empty() ? "" : "; ", load.power_limit_w, load.default_power_limit_w);
    note += text;
  }
  return note;
}

}  // namespace sdc
