#pragma once
// Time, once for every reader and writer: durations on the command line ("1h30m"), RFC 3339 times in
// logs and reports, durations as people read them, and the wall clock.
#include <cstdint>
#include <string>
#include <string_view>

namespace sdc {

// The longest duration parse_duration accepts: ten years.
inline constexpr double kMaxDurationS = 3650.0 * 86400;

// "1h", "10m", "90s", "1h30m", "7d", or plain seconds, up to kMaxDurationS. Throws InputError naming
// `field`.
double parse_duration(const std::string& field, const std::string& text);

// Event and report times are non-negative int64 Unix nanoseconds: this range, both ends included.
inline constexpr std::string_view kTimeRange = "(1970-01-01T00:00:00Z to 2262-04-11T23:47:16.854775807Z)";

// "2026-11-29T15:51:31.123456789Z" or with a "+02:00" offset; throws InputError when malformed, when
// the date does not exist (2027-02-31) or when the time is outside kTimeRange.
int64_t parse_rfc3339_ns(std::string_view text);

// Days since 1970-01-01 of a proleptic Gregorian date.
int64_t days_from_civil(int64_t year, int64_t month, int64_t day);

// "2026-12-01T15:00:00Z", to the second.
std::string format_utc(double unix_seconds);

// Exact, for reports: "3d 04h 05m", "4h 05m 06s", "5m 06.2s", "1.250s", "12.0ms", "250ns".
std::string format_duration_ns(int64_t ns);

// Short, for settings: whole seconds in the largest unit that divides them ("7d", "90m", "45s").
std::string format_duration_s(double seconds);

// Seconds since the Unix epoch, from the wall clock.
double unix_now();

}  // namespace sdc
