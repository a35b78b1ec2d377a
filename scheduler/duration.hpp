#pragma once
// Durations on the command line and in settings ("90s", "1h30m", "7d"), for qualify and sweep alike.
#include <string>

namespace sdc {

// The longest duration parse_duration accepts: ten years.
inline constexpr double kMaxDurationS = 3650.0 * 86400;

// "1h", "10m", "90s", "1h30m", "7d", or plain seconds, up to kMaxDurationS. Throws InputError naming
// `field`.
double parse_duration(const std::string& field, const std::string& text);

}  // namespace sdc
