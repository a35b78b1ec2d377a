#include "scheduler/golden.hpp"

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "host/error.hpp"

namespace sdc {

std::vector<std::string> golden_probe_globs() {
  return {"alu.*", "gemm.exact.*", "gemm.repeat.*", "gemm.simt.*", "sfu.*"};
}

GoldenFile golden_from_outcome(const ConsensusOutcome& outcome, uint64_t seed, Level level,
                               std::optional<uint64_t> size_bytes, std::optional<uint32_t> iterations) {
  GoldenFile g;
  g.seed = seed;
  g.level = level;
  g.size_bytes = size_bytes;
  g.iterations = iterations;
  for (const auto& v : outcome.votes) {
    if (v.kind == VoteKind::kInconclusive || !v.suspects.empty() || !v.winner) {
      throw std::runtime_error("devices disagree on " + v.probe + " (" + vote_kind_name(v.kind) +
                               "): not a known-good machine, no golden file written");
    }
    g.digests[{v.class_key, v.probe}] = *v.winner;
  }
  return g;
}

std::string golden_to_json(const GoldenFile& g) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [key, d] : g.digests) {
    entries.push_back({{"class", key.first}, {"probe", key.second}, {"digest", digest_hex(d)}});
  }
  nlohmann::json j = {{"format", "sdcprobe-golden"},
                      {"version", kGoldenVersion},
                      {"seed", g.seed},
                      {"level", level_name(g.level)},
                      {"entries", entries}};
  if (g.size_bytes) j["size_bytes"] = *g.size_bytes;
  if (g.iterations) j["iterations"] = *g.iterations;
  return j.dump(2) + "\n";
}

GoldenFile load_golden(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("--golden " + path + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  auto bad = [&](const std::string& field, const std::string& why) {
    return InputError("--golden " + path + ": " + field + ": " + why);
  };
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw bad("(file)", "not a JSON object");
  if (j.value("format", "") != "sdcprobe-golden") throw bad("format", "must be \"sdcprobe-golden\"");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kGoldenVersion) {
    throw bad("version", "must be " + std::to_string(kGoldenVersion));
  }
  GoldenFile g;
  if (!j.contains("seed") || !j["seed"].is_number_unsigned()) throw bad("seed", "missing or not an unsigned integer");
  g.seed = j["seed"].get<uint64_t>();
  if (!j.contains("level") || !j["level"].is_string()) throw bad("level", "missing or not a string");
  try {
    g.level = parse_level(j["level"].get<std::string>());
  } catch (const InputError& e) {
    throw bad("level", e.what());
  }
  if (j.contains("size_bytes")) {
    if (!j["size_bytes"].is_number_unsigned()) throw bad("size_bytes", "not an unsigned integer");
    g.size_bytes = j["size_bytes"].get<uint64_t>();
  }
  if (j.contains("iterations")) {
    if (!j["iterations"].is_number_unsigned()) throw bad("iterations", "not an unsigned integer");
    g.iterations = j["iterations"].get<uint32_t>();
  }
  if (!j.contains("entries") || !j["entries"].is_array()) throw bad("entries", "missing or not an array");
  size_t i = 0;
  for (const auto& e : j["entries"]) {
    const std::string at = "entries[" + std::to_string(i++) + "]";
    for (const char* field : {"class", "probe", "digest"}) {
      if (!e.is_object() || !e.contains(field) || !e[field].is_string()) {
        throw bad(at + "." + field, "missing or not a string");
      }
    }
    try {
      g.digests[{e["class"].get<std::string>(), e["probe"].get<std::string>()}] =
          parse_digest(e["digest"].get<std::string>());
    } catch (const std::invalid_argument& err) {
      throw bad(at + ".digest", err.what());
    }
  }
  return g;
}

std::vector<std::string> apply_golden(const GoldenFile& golden, std::vector<ConsensusRecord>& records) {
  std::set<std::string> missing;
  for (auto& r : records) {
    const auto it = golden.digests.find({r.class_key, r.probe});
    if (it == golden.digests.end()) {
      missing.insert(r.probe + " on " + r.class_key);
    } else if (!r.golden) {
      r.golden = it->second;
    }
  }
  return {missing.begin(), missing.end()};
}

}  // namespace sdc
