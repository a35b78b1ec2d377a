#include "scheduler/collective.hpp"

#include <cstring>
#include <string>

#include "kernels/common/random.hpp"

namespace sdc {
namespace {

std::vector<float> contribution(uint64_t seed, int rank) {
  std::vector<float> v(kAllreduceElements);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(mix64(seed ^ mix64(rank + 1u) ^ i) % 17);
  return v;
}

// The data as it leaves this rank, after the injector's corruption (if any matches).
std::vector<float> outgoing(uint64_t seed, int rank, Injector* injector) {
  std::vector<float> v = contribution(seed, rank);
  if (injector == nullptr || injector->empty()) return v;
  InjectionPoint point;
  point.probe = kAllreduceProbe;
  point.device_index = rank;
  point.elements = v.size();
  point.width_bits = 32;
  for (const auto& x : injector->plan(point).xors) {
    uint32_t bits;
    std::memcpy(&bits, &v[x.index], sizeof bits);
    bits ^= static_cast<uint32_t>(x.mask);
    std::memcpy(&v[x.index], &bits, sizeof bits);
  }
  return v;
}

uint64_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  uint64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

}  // namespace

CollectiveResult check_allreduce(Communicator& comm, uint64_t seed, Injector* injector) {
  CollectiveResult result;
  const int me = comm.rank();
  std::vector<float> data = outgoing(seed, me, injector);
  comm.all_reduce_sum(data);
  std::vector<float> expected(kAllreduceElements, 0.0f);
  for (int r = 0; r < comm.size(); ++r) {
    const std::vector<float> c = contribution(seed, r);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += c[i];
  }
  result.checked = expected.size();
  result.mismatches = differing(data, expected);
  for (const std::string& n : comm.all_gather(std::to_string(result.mismatches))) {
    result.any_failed = result.any_failed || n != "0";
  }
  if (!result.any_failed) return result;
  // Pairwise rounds in lexicographic order of the pair: each rank takes its pairs in that one total
  // order, so the smallest pending pair can always proceed and no round deadlocks.
  const std::vector<float> mine = outgoing(seed, me, injector);
  const std::string bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(float));
  std::vector<std::string> found;
  for (int peer = 0; peer < comm.size(); ++peer) {
    if (peer == me) continue;
    const std::string got = comm.exchange(peer, bytes);
    std::vector<float> theirs(got.size() / sizeof(float));
    std::memcpy(theirs.data(), got.data(), theirs.size() * sizeof(float));
    if (differing(theirs, contribution(seed, peer)) != 0)
      found.push_back(std::to_string(peer) + ">" + std::to_string(me));
  }
  // Every rank learns every failing link.
  for (const std::string& text : comm.all_gather(nlohmann::json(found).dump())) {
    for (const auto& link : nlohmann::json::parse(text)) {
      const std::string s = link.get<std::string>();
      const size_t gt = s.find('>');
      result.bad_links.emplace_back(std::stoi(s.substr(0, gt)), std::stoi(s.substr(gt + 1)));
    }
  }
  return result;
}

bool CollectiveResult::implicates(int rank) const {
  if (!any_failed) return false;
  if (local || bad_links.empty()) return true;
  for (const auto& link : bad_links) {
    if (link.first == rank) return true;
  }
  return false;
}

std::string CollectiveResult::links_text() const {
  std::string text;
  for (const auto& [from, to] : bad_links)
    text += (text.empty() ? "" : ",") + std::to_string(from) + ">" + std::to_string(to);
  return text;
}

nlohmann::json CollectiveResult::to_json() const {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& [from, to] : bad_links) links.push_back({{"from_rank", from}, {"to_rank", to}});
  return {{"probe", kAllreduceProbe},
          {"checked", checked},
          {"mismatches", mismatches},
          {"any_failed", any_failed},
          {"bad_links", links}};
}

}  // namespace sdc
