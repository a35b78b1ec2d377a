#include "scheduler/consensus/golden.hpp"

#include <set>
#include <stdexcept>

#include "host/error.hpp"
#include "host/input_file.hpp"

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
  const std::string text = read_input(path, "--golden");
  auto bad = [&](const std::string& field, const std::string& why) {
    return InputError("--golden " + path + ": " + field + ": " + why);
  };
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw bad("(file)", "not a JSON object");
  if (!j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != "sdcprobe-golden") {
    throw bad("format", "must be the string \"sdcprobe-golden\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer()) throw bad("version", "missing or not an integer");
  const int64_t version = j["version"].get<int64_t>();
  if (version == 1) {
    throw bad("version", "1 holds digests of an earlier definition, which no longer match: record the file again");
  }
  if (version != kGoldenVersion) throw bad("version", "must be " + std::to_string(kGoldenVersion));
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
    // The ranges of --size and --iterations: a value the CLI refuses is refused here too.
    if (!j["size_bytes"].is_number_unsigned() || j["size_bytes"].get<uint64_t>() < 8 ||
        j["size_bytes"].get<uint64_t>() > kMaxGoldenSizeBytes) {
      throw bad("size_bytes", "expected an integer in [8, " + std::to_string(kMaxGoldenSizeBytes) + "], got " +
                                  j["size_bytes"].dump());
    }
    g.size_bytes = j["size_bytes"].get<uint64_t>();
  }
  if (j.contains("iterations")) {
    if (!j["iterations"].is_number_unsigned() || j["iterations"].get<uint64_t>() < 1 ||
        j["iterations"].get<uint64_t>() > kMaxIterations) {
      throw bad("iterations",
                "expected an integer in [1, " + std::to_string(kMaxIterations) + "], got " + j["iterations"].dump());
    }
    g.iterations = static_cast<uint32_t>(j["iterations"].get<uint64_t>());
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
    Digest128 digest;
    try {
      digest = parse_digest(e["digest"].get<std::string>());
    } catch (const std::invalid_argument& err) {
      throw bad(at + ".digest", err.what());
    }
    if (!g.digests.emplace(std::make_pair(e["class"].get<std::string>(), e["probe"].get<std::string>()), digest)
             .second) {
      throw bad(at, "a second entry for the same class and probe");
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
