#include "scheduler/goodput/event.hpp"

#include <simdjson.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "host/error.hpp"

namespace sdc::goodput {
namespace {

constexpr std::array<std::string_view, 24> kNames = {
    "job_eligible", "alloc_granted", "alloc_released", "job_end",      "process_start",   "init_begin",
    "init_end",     "restore_begin", "restore_end",    "step_begin",   "step_end",        "ckpt_begin",
    "ckpt_end",     "ckpt_commit",   "eval_begin",     "eval_end",     "data_wait_begin", "data_wait_end",
    "probe_begin",  "probe_end",     "fault_detected", "sdc_detected", "teardown_end",    "node_quarantined",
};

bool needs_step(EventKind kind) {
  switch (kind) {
    case EventKind::kRestoreEnd:
    case EventKind::kStepBegin:
    case EventKind::kStepEnd:
    case EventKind::kCkptBegin:
    case EventKind::kCkptEnd:
    case EventKind::kCkptCommit: return true;
    default: return false;
  }
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's civil-date algorithm).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool leap_year(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t days_in_month(int64_t y, int64_t m) {
  constexpr int64_t kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap_year(y) ? 29 : kDays[m - 1];
}

int64_t field_int(simdjson::ondemand::value value, const char* name) {
  int64_t out = 0;
  if (value.get_int64().get(out) != simdjson::SUCCESS) {
    throw InputError(std::string("\"") + name + "\" must be an integer");
  }
  return out;
}

// Times and steps are differenced and offset by the ledger; keeping them non-negative means no
// difference or "step - 1" can overflow.
int64_t field_time(simdjson::ondemand::value value) {
  const int64_t t = field_int(value, "t");
  if (t < 0) throw InputError("\"t\" " + std::to_string(t) + " is out of range " + std::string(kTimeRange));
  return t;
}

int64_t field_step(simdjson::ondemand::value value, const char* name) {
  const int64_t step = field_int(value, name);
  if (step < 0) throw InputError(std::string("\"") + name + "\" must not be negative");
  return step;
}

// JSON's number grammar (RFC 8259), whatever the magnitude; `token` may end in white space.
bool json_number(std::string_view token) {
  size_t i = 0;
  auto at = [&](const char* any_of) {
    return i < token.size() && token[i] != '\0' && std::strchr(any_of, token[i]) != nullptr;
  };
  auto digits = [&] {
    const size_t start = i;
    while (at("0123456789")) ++i;
    return i > start;
  };
  if (at("-")) ++i;
  if (at("0")) {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (at(".")) {
    ++i;
    if (!digits()) return false;
  }
  if (at("eE")) {
    ++i;
    if (at("+-")) ++i;
    if (!digits()) return false;
  }
  return token.find_first_not_of(" \t\n\r", i) == std::string_view::npos;
}

// On Demand does not look inside the values it skips: the fields the ledger does not use are walked
// whole, so that a malformed line is refused wherever its fault lies. Depth is bounded by the
// parser's maximum depth.
void validate_value(simdjson::ondemand::value value) {
  using simdjson::ondemand::json_type;
  const auto invalid = [] { throw InputError("not valid JSON"); };
  json_type type;
  if (value.type().get(type) != simdjson::SUCCESS) invalid();
  switch (type) {
    case json_type::array: {
      simdjson::ondemand::array array;
      if (value.get_array().get(array) != simdjson::SUCCESS) invalid();
      for (auto element : array) {
        simdjson::ondemand::value v;
        if (element.get(v) != simdjson::SUCCESS) invalid();
        validate_value(v);
      }
      break;
    }
    case json_type::object: {
      simdjson::ondemand::object object;
      if (value.get_object().get(object) != simdjson::SUCCESS) invalid();
      for (auto field : object) {
        std::string_view key;
        if (field.unescaped_key().get(key) != simdjson::SUCCESS) invalid();
        validate_value(field.value());
      }
      break;
    }
    case json_type::number: {
      // get_number refuses what a double cannot hold (1e400, and integers of 20 digits here): the
      // grammar decides.
      if (!json_number(value.raw_json_token())) invalid();
      break;
    }
    case json_type::string: {
      std::string_view text;
      if (value.get_string().get(text) != simdjson::SUCCESS) invalid();
      break;
    }
    case json_type::boolean: {
      bool b;
      if (value.get_bool().get(b) != simdjson::SUCCESS) invalid();
      break;
    }
    case json_type::null: {
      bool is_null = false;
      if (value.is_null().get(is_null) != simdjson::SUCCESS || !is_null) invalid();
      break;
    }
  }
}

Event parse_line(simdjson::ondemand::parser& parser, const char* data, size_t size, size_t capacity) {
  simdjson::ondemand::document doc;
  if (parser.iterate(simdjson::padded_string_view(data, size, capacity)).get(doc) != simdjson::SUCCESS) {
    throw InputError("not valid JSON");
  }
  simdjson::ondemand::object object;
  const auto error = doc.get_object().get(object);
  if (error != simdjson::SUCCESS) {
    // Another JSON value (an array, a number) is "not an object"; anything else is not JSON at all.
    simdjson::ondemand::json_type type;
    const bool other_value = error == simdjson::INCORRECT_TYPE && doc.type().get(type) == simdjson::SUCCESS;
    throw InputError(other_value ? "not a JSON object" : "not valid JSON");
  }
  Event event;
  bool have_t = false;
  bool have_kind = false;
  for (auto field : object) {
    simdjson::ondemand::raw_json_string key;
    if (field.key().get(key) != simdjson::SUCCESS) throw InputError("not valid JSON");
    simdjson::ondemand::value value = field.value();
    if (key == "t") {
      simdjson::ondemand::json_type type;
      if (value.type().get(type) != simdjson::SUCCESS) throw InputError("not valid JSON");
      if (type == simdjson::ondemand::json_type::string) {
        std::string_view text;
        if (value.get_string().get(text) != simdjson::SUCCESS) throw InputError("bad \"t\" string");
        event.t = parse_rfc3339_ns(text);
      } else {
        event.t = field_time(value);
      }
      have_t = true;
    } else if (key == "event") {
      std::string_view name;
      if (value.get_string().get(name) != simdjson::SUCCESS) throw InputError("\"event\" must be a string");
      auto kind = event_kind(name);
      if (!kind) throw InputError("unknown event \"" + std::string(name) + "\"");
      event.kind = *kind;
      have_kind = true;
    } else if (key == "step") {
      event.step = field_step(value, "step");
    } else if (key == "last_good_step") {
      event.last_good_step = field_step(value, "last_good_step");
    } else if (key == "rank") {
      event.rank = field_step(value, "rank");
    } else if (key == "blocking") {
      bool blocking = false;
      if (value.get_bool().get(blocking) != simdjson::SUCCESS) throw InputError("\"blocking\" must be true or false");
      event.blocking = blocking;
    } else {
      std::string_view unused;
      if (field.unescaped_key().get(unused) != simdjson::SUCCESS) throw InputError("not valid JSON");
      validate_value(value);
    }
  }
  // Trailing garbage after the object ("{...} x") is malformed too.
  const char* rest = nullptr;
  if (doc.current_location().get(rest) == simdjson::SUCCESS) throw InputError("not valid JSON (text after the object)");
  if (!have_t) throw InputError("missing \"t\"");
  if (!have_kind) throw InputError("missing \"event\"");
  if (needs_step(event.kind) && !event.step) {
    throw InputError(std::string(event_name(event.kind)) + " needs \"step\"");
  }
  return event;
}

}  // namespace

std::string_view event_name(EventKind kind) { return kNames[static_cast<size_t>(kind)]; }

std::optional<EventKind> event_kind(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<EventKind>(i);
  }
  return std::nullopt;
}

int64_t parse_rfc3339_ns(std::string_view s) {
  auto fail = [&]() { throw InputError("bad RFC 3339 time \"" + std::string(s) + "\""); };
  auto digits = [&](size_t pos, size_t n) {
    if (pos + n > s.size()) fail();
    int64_t v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (s[i] < '0' || s[i] > '9') fail();
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  auto expect = [&](size_t pos, const char* any_of) {
    // strchr finds the terminator too: a NUL (from "\u0000") is no separator.
    if (pos >= s.size() || s[pos] == '\0' || std::strchr(any_of, s[pos]) == nullptr) fail();
  };
  const int64_t year = digits(0, 4);
  expect(4, "-");
  const int64_t month = digits(5, 2);
  expect(7, "-");
  const int64_t day = digits(8, 2);
  expect(10, "Tt ");
  const int64_t hour = digits(11, 2);
  expect(13, ":");
  const int64_t minute = digits(14, 2);
  expect(16, ":");
  const int64_t second = digits(17, 2);
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 || minute > 59 ||
      second > 60) {
    fail();
  }
  size_t pos = 19;
  int64_t frac_ns = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int64_t scale = 100000000;
    const size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      frac_ns += (s[pos] - '0') * scale;  // digits beyond nanoseconds are truncated
      scale /= 10;
      ++pos;
    }
    if (pos == start) fail();
  }
  int64_t offset_s = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const int64_t sign = s[pos] == '-' ? -1 : 1;
    const int64_t oh = digits(pos + 1, 2);
    expect(pos + 3, ":");
    const int64_t om = digits(pos + 4, 2);
    if (oh > 23 || om > 59) fail();
    offset_s = sign * (oh * 3600 + om * 60);
    pos += 6;
  } else {
    fail();
  }
  if (pos != s.size()) fail();
  // Four-digit years keep `secs` far from overflow; the nanoseconds must fit the event time range.
  const int64_t secs = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  constexpr int64_t kNsPerS = 1000000000;
  if (secs < 0 || secs > (INT64_MAX - frac_ns) / kNsPerS) {
    throw InputError("time \"" + std::string(s) + "\" is out of range " + std::string(kTimeRange));
  }
  return secs * kNsPerS + frac_ns;
}

Event parse_event(std::string_view line) {
  simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(line);
  return parse_line(parser, padded.data(), padded.size(), padded.size() + simdjson::SIMDJSON_PADDING);
}

EventReader::Stats EventReader::read(std::istream& in, const Sink& sink) {
  constexpr size_t kChunk = 1 << 20;
  constexpr size_t kBufferBytes = 2 * kChunk + simdjson::SIMDJSON_PADDING;
  Stats stats;
  simdjson::ondemand::parser parser;
  // Holds the unfinished tail of the previous chunk plus the next chunk, and simdjson's padding.
  // Left uninitialised (zeroing 2 MiB cost a short log more than parsing it): only the bytes read
  // and the padding after them, zeroed after each read, are looked at.
  const std::unique_ptr<char[]> buffer(new char[kBufferBytes]);
  size_t filled = 0;
  uint64_t& line_no = line_no_;
  line_no = 0;
  auto handle = [&](const char* data, size_t size) {
    ++line_no;
    // The same limit wherever the line ends: at a newline, in the next chunk, or at end of file.
    if (size > kChunk) throw InputError("line " + std::to_string(line_no) + ": line longer than 1 MiB");
    while (size > 0 && (data[size - 1] == '\r' || data[size - 1] == ' ' || data[size - 1] == '\t')) --size;
    if (size == 0) return;
    try {
      const size_t capacity = static_cast<size_t>(buffer.get() + kBufferBytes - data);
      const Event event = parse_line(parser, data, size, capacity);
      sink(event);
      ++stats.events;
    } catch (const InputError& e) {
      const std::string message = "line " + std::to_string(line_no) + ": " + e.what();
      if (!lenient_) throw InputError(message);
      if (stats.skipped++ == 0) stats.first_skip = message;
    }
  };
  bool eof = false;
  while (!eof) {
    if (filled > kChunk) {
      // One line longer than a chunk cannot be an event; report it rather than grow without bound.
      throw InputError("line " + std::to_string(line_no + 1) + ": line longer than 1 MiB");
    }
    in.read(buffer.get() + filled, static_cast<std::streamsize>(kChunk));
    const size_t got = static_cast<size_t>(in.gcount());
    eof = got == 0;
    filled += got;
    std::memset(buffer.get() + filled, 0, simdjson::SIMDJSON_PADDING);
    size_t start = 0;
    for (;;) {
      const void* nl = std::memchr(buffer.get() + start, '\n', filled - start);
      if (nl == nullptr) break;
      const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - buffer.get());
      handle(buffer.get() + start, end - start);
      start = end + 1;
    }
    if (eof && start < filled) {
      handle(buffer.get() + start, filled - start);
      start = filled;
    }
    std::memmove(buffer.get(), buffer.get() + start, filled - start);
    filled -= start;
  }
  return stats;
}

}  // namespace sdc::goodput
