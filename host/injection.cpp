#include "host/injection.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "host/error.hpp"
#include "host/parse_number.hpp"
#include "kernels/common/random.hpp"

namespace sdc {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    parts.push_back(trim(s.substr(start, end == std::string_view::npos ? end : end - start)));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

class ClauseParser {
 public:
  explicit ClauseParser(std::string_view clause) : clause_(clause) {}

  [[noreturn]] void fail(std::string_view key, const std::string& why) const {
    throw InputError("bad --inject spec '" + std::string(clause_) + "': field '" + std::string(key) + "': " + why);
  }

  uint64_t unsigned_value(std::string_view key, std::string_view v, uint64_t lo, uint64_t hi) const {
    try {
      return parse_unsigned("", v, lo, hi);
    } catch (const InputError& e) {
      fail(key, e.what());
    }
  }

  InjectionSpec parse() const {
    InjectionSpec spec;
    spec.text = std::string(clause_);
    bool have_model = false;
    for (std::string_view field : split(clause_, ',')) {
      const size_t eq = field.find('=');
      if (eq == std::string_view::npos) fail(field, "expected key=value");
      const std::string_view key = trim(field.substr(0, eq));
      const std::string_view v = trim(field.substr(eq + 1));
      if (v.empty()) fail(key, "empty value");
      if (key == "model") {
        have_model = true;
        if (v == "bitflip")
          spec.model = FaultModel::kBitflip;
        else if (v == "multibit")
          spec.model = FaultModel::kMultibit;
        else if (v == "random")
          spec.model = FaultModel::kRandom;
        else if (v == "stuck")
          spec.model = FaultModel::kStuck;
        else if (v == "lane")
          spec.model = FaultModel::kLane;
        else if (v == "hang")
          spec.model = FaultModel::kHang;
        else if (v == "crash")
          spec.model = FaultModel::kCrash;
        else if (v == "digest")
          spec.model = FaultModel::kDigest;
        else
          fail(key,
               "unknown model '" + std::string(v) + "' (bitflip, multibit, random, stuck, lane, hang, crash, digest)");
      } else if (key == "mode") {
        if (v == "transient")
          spec.mode = FaultMode::kTransient;
        else if (v == "intermittent")
          spec.mode = FaultMode::kIntermittent;
        else if (v == "permanent")
          spec.mode = FaultMode::kPermanent;
        else
          fail(key, "unknown mode '" + std::string(v) + "' (transient, intermittent, permanent)");
      } else if (key == "probe") {
        spec.probe = std::string(v);
      } else if (key == "device") {
        spec.device = std::string(v);
      } else if (key == "rank") {
        spec.rank = v == "*" ? -1 : static_cast<int>(unsigned_value(key, v, 0, 1u << 30));
      } else if (key == "p") {
        const auto p = parse_finite(v);
        if (!p || !(*p > 0.0 && *p <= 1.0)) fail(key, "expected a probability in (0, 1], got '" + std::string(v) + "'");
        spec.probability = *p;
      } else if (key == "after") {
        spec.after = unsigned_value(key, v, 0, UINT64_MAX);
      } else if (key == "bit") {
        spec.bit = v == "random" ? -1 : static_cast<int>(unsigned_value(key, v, 0, 63));
      } else if (key == "bits") {
        spec.bits = static_cast<int>(unsigned_value(key, v, 2, 64));
      } else if (key == "count") {
        spec.count = unsigned_value(key, v, 1, 1u << 20);
      } else if (key == "index") {
        spec.index = v == "random" ? -1 : static_cast<int64_t>(unsigned_value(key, v, 0, INT64_MAX));
      } else if (key == "value") {
        spec.stuck_value = unsigned_value(key, v, 0, 1) == 1;
      } else if (key == "lane") {
        spec.lane = static_cast<uint32_t>(unsigned_value(key, v, 0, 1u << 20));
      } else if (key == "lanes") {
        spec.lanes = static_cast<uint32_t>(unsigned_value(key, v, 1, 1u << 20));
      } else if (key == "mask") {
        spec.mask = unsigned_value(key, v, 1, UINT64_MAX);
      } else {
        fail(key,
             "unknown field (model, probe, device, rank, mode, after, p, bit, bits, count, index, value, lane, lanes, "
             "mask)");
      }
    }
    if (!have_model) fail("model", "missing; one of bitflip, multibit, random, stuck, lane, hang, crash, digest");
    if (spec.mode != FaultMode::kIntermittent && spec.probability != 1.0)
      fail("p", "only meaningful with mode=intermittent");
    if (spec.lane >= spec.lanes) fail("lane", "must be below lanes (" + std::to_string(spec.lanes) + ")");
    return spec;
  }

 private:
  std::string_view clause_;
};

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<InjectionSpec> parse_injection_specs(std::string_view text) {
  std::vector<InjectionSpec> specs;
  if (trim(text).empty()) throw InputError("bad --inject spec: empty");
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      char what[64];
      std::snprintf(what, sizeof what, "control character 0x%02x at offset %zu", c, i);
      throw InputError(std::string("bad --inject spec: ") + what);
    }
  }
  size_t n = 0;
  for (std::string_view clause : split(text, ';')) {
    ++n;
    if (clause.empty()) throw InputError("bad --inject spec: clause " + std::to_string(n) + " is empty");
    specs.push_back(ClauseParser(clause).parse());
  }
  return specs;
}

void check_injection_targets(const std::vector<InjectionSpec>& specs, const std::vector<std::string>& probe_ids,
                             const std::vector<std::pair<int, std::string>>& devices) {
  for (const auto& s : specs) {
    const bool probe =
        std::any_of(probe_ids.begin(), probe_ids.end(), [&](const std::string& id) { return glob_match(s.probe, id); });
    if (!probe) {
      throw InputError("bad --inject spec '" + s.text + "': field 'probe': '" + s.probe +
                       "' matches no probe of this run (see sdcprobe list)");
    }
    const bool device = s.device == "*" || std::any_of(devices.begin(), devices.end(), [&](const auto& d) {
                          return s.device == std::to_string(d.first) || s.device == d.second;
                        });
    if (!device) {
      throw InputError("bad --inject spec '" + s.text + "': field 'device': '" + s.device +
                       "' matches no device of this run (see sdcprobe devices)");
    }
  }
}

Injector::Injector(std::vector<InjectionSpec> specs, uint64_t seed, int rank)
    : specs_(std::move(specs)), matched_(specs_.size(), 0), rank_(rank), seed_(seed), rng_(seed ^ 0x1f1ec7edULL) {}

bool Injector::fires(size_t i, const InjectionPoint& point) {
  const InjectionSpec& s = specs_[i];
  if (!glob_match(s.probe, point.probe)) return false;
  if (s.rank >= 0 && s.rank != rank_) return false;
  if (s.device != "*" && s.device != std::to_string(point.device_index) && s.device != point.device_uuid) return false;
  const uint64_t seen = matched_[i]++;
  if (seen < s.after) return false;
  switch (s.mode) {
    case FaultMode::kPermanent: return true;
    case FaultMode::kTransient: return seen == s.after;
    case FaultMode::kIntermittent: return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < s.probability;
  }
  return false;
}

Corruption Injector::plan(const InjectionPoint& point) {
  std::lock_guard<std::mutex> lock(mutex_);
  Corruption c;
  if (point.elements == 0) return c;
  const unsigned width = point.width_bits;
  const uint64_t width_mask = width == 64 ? ~0ULL : ((1ULL << width) - 1u);
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].model == FaultModel::kDigest || !fires(i, point)) continue;
    const InjectionSpec& s = specs_[i];
    auto pick_bit = [&] {
      return s.bit >= 0 ? static_cast<unsigned>(s.bit) % width : static_cast<unsigned>(rng_() % width);
    };
    auto pick_index = [&](uint64_t k) {
      return s.index >= 0 ? (static_cast<uint64_t>(s.index) + k) % point.elements : rng_() % point.elements;
    };
    switch (s.model) {
      case FaultModel::kBitflip:
        for (uint64_t k = 0; k < s.count; ++k) c.xors.push_back({pick_index(k), 1ULL << pick_bit()});
        break;
      case FaultModel::kMultibit:
        for (uint64_t k = 0; k < s.count; ++k) {
          const unsigned n = std::min<unsigned>(static_cast<unsigned>(s.bits), width);
          const unsigned start = std::min(pick_bit(), width - n);
          const uint64_t run = n == 64 ? ~0ULL : ((1ULL << n) - 1u);
          c.xors.push_back({pick_index(k), run << start});
        }
        break;
      case FaultModel::kRandom:
        for (uint64_t k = 0; k < s.count; ++k) {
          uint64_t m = 0;
          while (m == 0) m = rng_() & width_mask;
          c.xors.push_back({pick_index(k), m});
        }
        break;
      case FaultModel::kStuck:
        // A stuck cell stays at one address for the whole run.
        c.stuck = true;
        c.stuck_index =
            s.index >= 0 ? static_cast<uint64_t>(s.index) % point.elements : mix64(seed_ + i) % point.elements;
        c.stuck_bit = pick_bit();
        c.stuck_value = s.stuck_value;
        break;
      case FaultModel::kLane:
        c.lane_mask = true;
        c.lane = s.lane;
        c.lanes = s.lanes;
        c.mask = (s.mask ? s.mask : 1ULL << pick_bit()) & width_mask;
        break;
      case FaultModel::kHang:
        // A device that stops answering: only a watchdog outside this process ends it. Said on
        // stderr, so that a drill (or a test) knows when the device is hung.
        std::fprintf(stderr, "sdcprobe: injected hang: %.*s on device %d\n", static_cast<int>(point.probe.size()),
                     point.probe.data(), point.device_index);
        std::fflush(stderr);
        for (;;) ::pause();
      case FaultModel::kCrash:
        std::raise(SIGSEGV);
        std::abort();                   // SIGSEGV blocked or ignored: still end the process as a crash would
      case FaultModel::kDigest: break;  // skipped above: corrupt_digest applies it
    }
  }
  return c;
}

void Injector::corrupt_digest(std::string_view probe, int device_index, std::string_view device_uuid,
                              Digest128& digest) {
  std::lock_guard<std::mutex> lock(mutex_);
  InjectionPoint point;
  point.probe = probe;
  point.device_index = device_index;
  point.device_uuid = device_uuid;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].model != FaultModel::kDigest || !fires(i, point)) continue;
    digest.lo ^= rng_() | 1u;
    digest.hi ^= rng_() | 1u;
  }
}

}  // namespace sdc
