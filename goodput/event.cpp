#include "goodput/event.hpp"

#include <simdjson.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/error.hpp"

namespace sdc::goodput {
namespace {

constexpr std::array<std::string_view, 24> kNames = {
    "job_eligible", "alloc_granted", "alloc_released", "job_end",      "process_start",   "init_begin",
    "init_end",     "restore_begin", "restore_end",    "step_begin",   "step_end",        "ckpt_begin",
    "ckpt_end",     "ckpt_commit",   "eval_begin",     "eval_end",     "data_wait_begin", "data_wait_end",
    "probe_begin",  "probe_end",     "fault_detected", "sdc_detected", "teardown_end",    "node_quarantined",
};

// The names by their first letter: a name is found among at most three instead of all of them.
constexpr size_t kNamesPerLetter = 3;
constexpr std::array<std::array<int8_t, kNamesPerLetter>, 26> kNamesByLetter = [] {
  std::array<std::array<int8_t, kNamesPerLetter>, 26> by{};
  for (auto& letter : by) {
    for (int8_t& i : letter) i = -1;
  }
  for (size_t i = 0; i < kNames.size(); ++i) {
    auto& letter = by[static_cast<size_t>(kNames[i][0] - 'a')];
    size_t k = 0;
    while (letter[k] >= 0) ++k;  // a fourth name of one letter does not compile (out of bounds)
    letter[k] = static_cast<int8_t>(i);
  }
  return by;
}();

// The kind whose name `text` begins with, followed by `end` (the closing quote of a JSON string, or
// the end of the text when `end` is 0).
std::optional<EventKind> kind_at_front(std::string_view text, char end) {
  if (text.empty() || text[0] < 'a' || text[0] > 'z') return std::nullopt;
  for (const int8_t i : kNamesByLetter[static_cast<size_t>(text[0] - 'a')]) {
    if (i < 0) break;
    const std::string_view name = kNames[static_cast<size_t>(i)];
    const bool ends = end == 0 ? text.size() == name.size() : text.size() > name.size() && text[name.size()] == end;
    if (ends && std::memcmp(text.data(), name.data(), name.size()) == 0) return static_cast<EventKind>(i);
  }
  return std::nullopt;
}

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

// A string token without an escape: simdjson's unescaping could only copy it.
bool plain_string(std::string_view token) {
  if (token.empty() || token[0] != '"') return false;
  const size_t close = token.find('"', 1);  // an escaped quote comes after a backslash
  return close != std::string_view::npos && token.substr(1, close - 1).find('\\') == std::string_view::npos;
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
      if (!plain_string(value.raw_json_token()) && value.get_string().get(text) != simdjson::SUCCESS) invalid();
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

struct Fields {
  Event event;
  bool have_t = false;
  bool have_kind = false;
  // process_start's own fields, checked once the kind is known: another event may carry a field of
  // the same name that means something else (sdc_detected's "device" names the suspect's GPU). The
  // strings are views into the parser's, valid while its document is; checked() copies them. Most
  // events carry none, so they are set only when seen (bit 1 << kHost ... in `seen`), never zeroed:
  // zeroing them for every event cost the reader a fifth of its time.
  enum RecordField : uint8_t { kHost, kDevice, kPciBusId, kRecordFields };
  uint8_t seen = 0;
  const char* bad = nullptr;  // why the first of them (or "attempt") is malformed
  const char* text[kRecordFields];
  size_t size[kRecordFields];
  bool has(RecordField k) const { return (seen >> k) & 1; }
  std::string_view view(RecordField k) const { return has(k) ? std::string_view(text[k], size[k]) : ""; }
};

// "0000:19:00.0" (sysfs) or "00000000:19:00.0" (NVML, CUDA): domain, bus, device and function in hex.
bool pci_bus_id_form(std::string_view id) {
  const size_t colon = id.find(':');
  if (colon < 4 || colon > 8 || id.size() != colon + 8 || id[colon + 3] != ':' || id[colon + 6] != '.') return false;
  for (size_t i = 0; i < id.size(); ++i) {
    if (i != colon && i != colon + 3 && i != colon + 6 && !std::isxdigit(static_cast<unsigned char>(id[i]))) {
      return false;
    }
  }
  return id.back() >= '0' && id.back() <= '7';
}

// Which of process_start's fields `key` is (kAttempt, or a Fields::RecordField), or -1.
constexpr int kAttempt = Fields::kRecordFields;
int record_field(simdjson::ondemand::raw_json_string key) {
  if (key == "attempt") return kAttempt;
  if (key == "host") return Fields::kHost;
  if (key == "device") return Fields::kDevice;
  if (key == "pci_bus_id") return Fields::kPciBusId;
  return -1;
}

// process_start's field `k` into `f`, or why it is malformed.
void read_record_field(int k, simdjson::ondemand::value value, Fields& f) {
  static const char* const kNotString[] = {"\"host\" must be a string", "\"device\" must be a string",
                                           "\"pci_bus_id\" must be a string"};
  if (k == kAttempt) {
    int64_t attempt = 0;
    if (value.get_int64().get(attempt) == simdjson::SUCCESS && attempt >= 0) {
      f.event.attempt = attempt;  // process_start's only: checked() drops it from other events
      return;
    }
    validate_value(value);
    if (f.bad == nullptr) f.bad = "\"attempt\" must be an integer from 0 to 2^63 - 1";
    return;
  }
  std::string_view text;
  if (value.get_string().get(text) == simdjson::SUCCESS) {
    f.text[k] = text.data();
    f.size[k] = text.size();
    f.seen = static_cast<uint8_t>(f.seen | 1 << k);
    return;
  }
  validate_value(value);
  if (f.bad == nullptr) f.bad = kNotString[k];
}

// process_start's rank record, checked; throws InputError naming the field.
void check_rank_record(Fields& f) {
  if (f.bad != nullptr) throw InputError(std::string("process_start: ") + f.bad);
  if (f.seen == 0) return;
  for (const auto& [name, k] :
       {std::pair{"host", Fields::kHost}, {"device", Fields::kDevice}, {"pci_bus_id", Fields::kPciBusId}}) {
    if (f.has(k) && f.size[k] == 0) throw InputError(std::string("process_start: \"") + name + "\" must not be empty");
  }
  const std::string_view pci_bus_id = f.view(Fields::kPciBusId);
  if (f.has(Fields::kPciBusId) && !pci_bus_id_form(pci_bus_id)) {
    throw InputError("process_start: \"pci_bus_id\" \"" + std::string(pci_bus_id) +
                     "\" is not a PCI bus id (domain:bus:device.function, 00000000:19:00.0)");
  }
  if (f.has(Fields::kPciBusId) && (!f.has(Fields::kDevice) || f.view(Fields::kDevice) == "cpu")) {
    throw InputError("process_start: \"pci_bus_id\" names a GPU, but \"device\" does not");
  }
  f.event.where = std::make_shared<const RankRecord>(
      RankRecord{std::string(f.view(Fields::kHost)), std::string(f.view(Fields::kDevice)), std::string(pci_bus_id)});
}

// The fields of one event's object, walked in order; throws InputError at the first bad one.
Fields read_fields(simdjson::ondemand::object object) {
  Fields f;
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
        f.event.t = parse_rfc3339_ns(text);
      } else {
        f.event.t = field_time(value);
      }
      f.have_t = true;
    } else if (key == "event") {
      // A name without an escape is matched in the token itself, "step_begin" quotes and all.
      const std::string_view token = value.raw_json_token();
      auto kind = token.size() > 1 && token[0] == '"' ? kind_at_front(token.substr(1), '"') : std::nullopt;
      std::string_view name;
      if (!kind && value.get_string().get(name) != simdjson::SUCCESS) throw InputError("\"event\" must be a string");
      if (!kind) kind = event_kind(name);
      if (!kind) throw InputError("unknown event \"" + std::string(name) + "\"");
      f.event.kind = *kind;
      f.have_kind = true;
    } else if (key == "step") {
      f.event.step = field_step(value, "step");
    } else if (key == "last_good_step") {
      f.event.last_good_step = field_step(value, "last_good_step");
    } else if (key == "rank") {
      f.event.rank = field_step(value, "rank");
    } else if (key == "slurm_restart") {
      f.event.slurm_restart = field_step(value, "slurm_restart");
    } else if (key == "blocking") {
      bool blocking = false;
      if (value.get_bool().get(blocking) != simdjson::SUCCESS) throw InputError("\"blocking\" must be true or false");
      f.event.blocking = blocking;
    } else {
      std::string_view unused;
      if (field.unescaped_key().get(unused) != simdjson::SUCCESS) throw InputError("not valid JSON");
      // Out of the chain above, which every event's fields go through: process_start's own.
      const int k = record_field(key);
      if (k >= 0) {
        read_record_field(k, value, f);
      } else {
        validate_value(value);
      }
    }
  }
  return f;
}

// The event, once its object has been read whole: it needs a time, a kind and a step where the
// kind takes one.
Event checked(Fields& f) {
  if (!f.have_t) throw InputError("missing \"t\"");
  if (!f.have_kind) throw InputError("missing \"event\"");
  if (f.event.kind == EventKind::kProcessStart) {
    check_rank_record(f);
  } else {
    f.event.attempt.reset();
  }
  if (needs_step(f.event.kind) && !f.event.step) {
    throw InputError(std::string(event_name(f.event.kind)) + " needs \"step\"");
  }
  return f.event;
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
  Fields fields = read_fields(object);
  // Trailing garbage after the object ("{...} x") is malformed too.
  const char* rest = nullptr;
  if (doc.current_location().get(rest) == simdjson::SUCCESS) throw InputError("not valid JSON (text after the object)");
  return checked(fields);
}

}  // namespace

std::string_view event_name(EventKind kind) { return kNames[static_cast<size_t>(kind)]; }

bool is_restart(EventKind kind) {
  return kind == EventKind::kProcessStart || kind == EventKind::kAllocGranted || kind == EventKind::kTeardownEnd ||
         kind == EventKind::kInitBegin || kind == EventKind::kRestoreBegin;
}

std::optional<EventKind> event_kind(std::string_view name) { return kind_at_front(name, 0); }

Event parse_event(std::string_view line) {
  simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(line);
  return parse_line(parser, padded.data(), padded.size(), padded.size() + simdjson::SIMDJSON_PADDING);
}

EventReader::Stats EventReader::read(std::istream& in, const Sink& sink) {
  constexpr size_t kLongestLine = 1 << 20;
  // Read in 64 KiB pieces: a piece is still in the core's cache when it is indexed and walked, and
  // the parser's buffers, which grow with the text it indexes at once, stay small.
  constexpr size_t kPiece = 64 << 10;
  // A byte for the '[' that makes the complete lines one JSON array, the unfinished last line (up to
  // the longest line) plus the next piece, and simdjson's padding.
  constexpr size_t kBufferBytes = 1 + kLongestLine + kPiece + simdjson::SIMDJSON_PADDING;
  Stats stats;
  simdjson::ondemand::parser parser;
  // Left uninitialised (zeroing it cost a short log more than parsing it): only the bytes read and
  // the padding after them, zeroed after each read, are looked at.
  const std::unique_ptr<char[]> buffer(new char[kBufferBytes]);
  char* const lines = buffer.get() + 1;
  const char* const buffer_end = buffer.get() + kBufferBytes;
  size_t filled = 0;
  uint64_t& line_no = line_no_;
  line_no = 0;
  // A line's event to the sink, or the line's error: thrown, or skipped and counted when lenient.
  auto report = [&](const InputError& e) {
    const std::string message = "line " + std::to_string(line_no) + ": " + e.what();
    if (!lenient_) throw InputError(message);
    if (stats.skipped++ == 0) stats.first_skip = message;
  };
  auto deliver = [&](const Event& event) {
    try {
      sink(event);
      ++stats.events;
    } catch (const InputError& e) {
      report(e);
    }
  };
  // One line, read alone.
  auto handle = [&](const char* data, size_t size) {
    ++line_no;
    // The same limit wherever the line ends: at a newline, in the next piece, or at end of file.
    if (size > kLongestLine) throw InputError("line " + std::to_string(line_no) + ": line longer than 1 MiB");
    while (size > 0 && (data[size - 1] == '\r' || data[size - 1] == ' ' || data[size - 1] == '\t')) --size;
    if (size == 0) return;
    Event event;
    try {
      event = parse_line(parser, data, size, static_cast<size_t>(buffer_end - data));
    } catch (const InputError& e) {
      return report(e);
    }
    deliver(event);
  };
  auto handle_lines = [&](const char* begin, const char* end) {  // whole lines, each ending in '\n'
    while (begin < end) {
      const char* nl = static_cast<const char*>(std::memchr(begin, '\n', static_cast<size_t>(end - begin)));
      handle(begin, static_cast<size_t>(nl - begin));
      begin = nl + 1;
    }
  };
  // The lines in [begin, end), read as one JSON array: their newlines become its commas, so that
  // simdjson indexes them in one pass instead of one pass a line (a fifth fewer instructions for the
  // whole reading of a cluster's logs).
  // Each element must start where its line's text starts, and its event goes to the sink only once
  // the next element is seen to start in its own line (or the array to end there): then its line
  // held it alone, and reading the line alone would have given the same event. Anything else, from
  // a malformed line or a line of two values to an event the schema refuses, sends the lines not
  // yet delivered to be read one at a time, which names the line as before.
  struct Line {
    const char* begin;  // where the line starts
    const char* text;   // its first character that is not white space
    char* newline;
    uint64_t number;
  };
  std::vector<Line> batch;
  auto read_batch = [&](char* begin, char* end) {
    batch.clear();
    uint64_t number = line_no;
    for (char* p = begin; p < end;) {
      char* nl = static_cast<char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
      ++number;
      if (static_cast<size_t>(nl - p) > kLongestLine) return handle_lines(begin, end);
      const char* text = p;
      while (text < nl && (*text == ' ' || *text == '\t' || *text == '\r')) ++text;
      if (text < nl) batch.push_back({p, text, nl, number});
      p = nl + 1;
    }
    if (batch.empty()) {
      line_no = number;
      return;
    }
    for (const Line& l : batch) *l.newline = ',';
    *batch.back().newline = ']';
    begin[-1] = '[';
    size_t delivered = 0;
    const bool whole = [&] {
      const char* json = begin - 1;
      simdjson::ondemand::document doc;
      simdjson::ondemand::array array;
      const size_t size = static_cast<size_t>(batch.back().newline + 1 - json);
      if (parser.iterate(json, size, static_cast<size_t>(buffer_end - json)).get(doc) != simdjson::SUCCESS ||
          doc.get_array().get(array) != simdjson::SUCCESS) {
        return false;
      }
      Event pending;
      size_t k = 0;
      for (auto element : array) {
        simdjson::ondemand::value value;
        simdjson::ondemand::object object;
        if (element.get(value) != simdjson::SUCCESS || k == batch.size() ||
            value.raw_json_token().data() != batch[k].text) {
          return false;
        }
        if (k > 0) {
          line_no = batch[k - 1].number;
          deliver(pending);
          delivered = k;
        }
        if (value.get_object().get(object) != simdjson::SUCCESS) return false;
        try {
          Fields fields = read_fields(object);
          pending = checked(fields);
        } catch (const InputError&) {
          return false;
        }
        ++k;
      }
      const char* rest = nullptr;
      if (k != batch.size() || doc.current_location().get(rest) == simdjson::SUCCESS) return false;
      line_no = batch.back().number;
      deliver(pending);
      delivered = k;
      return true;
    }();
    for (const Line& l : batch) *l.newline = '\n';
    if (whole) {
      line_no = number;
      return;
    }
    line_no = batch[delivered].number - 1;
    handle_lines(batch[delivered].begin, end);
  };
  bool eof = false;
  while (!eof) {
    if (filled > kLongestLine) {
      // So long a line cannot be an event; report it rather than grow without bound.
      throw InputError("line " + std::to_string(line_no + 1) + ": line longer than 1 MiB");
    }
    in.read(lines + filled, static_cast<std::streamsize>(kPiece));
    const size_t got = static_cast<size_t>(in.gcount());
    eof = got == 0;
    filled += got;
    std::memset(lines + filled, 0, simdjson::SIMDJSON_PADDING);
    size_t start = 0;
    if (const void* last = ::memrchr(lines, '\n', filled)) {
      start = static_cast<size_t>(static_cast<const char*>(last) - lines) + 1;
      read_batch(lines, lines + start);
    }
    if (eof && start < filled) {
      handle(lines + start, filled - start);
      start = filled;
    }
    std::memmove(lines, lines + start, filled - start);
    filled -= start;
  }
  return stats;
}

}  // namespace sdc::goodput
