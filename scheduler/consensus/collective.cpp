#include "scheduler/consensus/collective.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/common/gemm_elements.hpp"  // bits_of_float
#include "kernels/common/random.hpp"

namespace sdc {
namespace {

using Bytes = std::vector<uint8_t>;

// The largest value one rank contributes, so that the sum over `ranks` stays exact.
uint32_t max_value(ReduceType type, int ranks) { return type == ReduceType::kFloat32 ? 16 : 255u / ranks; }

// Integer `v` as one element of `type` (exact: v < 2^24 for FP32, v <= 256 for BF16).
void store(ReduceType type, Bytes& out, size_t i, uint32_t v) {
  const uint32_t bits = bits_of_float(static_cast<float>(v));
  if (type == ReduceType::kFloat32) {
    std::memcpy(&out[i * 4], &bits, 4);
  } else {
    const uint16_t high = static_cast<uint16_t>(bits >> 16);
    std::memcpy(&out[i * 2], &high, 2);
  }
}

uint32_t value(uint64_t seed, ReduceType type, int rank, int ranks, size_t i) {
  return static_cast<uint32_t>(mix64(seed ^ mix64(rank + 1u) ^ i) % (max_value(type, ranks) + 1));
}

Bytes contribution(uint64_t seed, ReduceType type, int rank, int ranks) {
  Bytes out(kAllreduceElements * reduce_type_bytes(type));
  for (size_t i = 0; i < kAllreduceElements; ++i) store(type, out, i, value(seed, type, rank, ranks, i));
  return out;
}

Bytes expected_sum(uint64_t seed, ReduceType type, int ranks) {
  Bytes out(kAllreduceElements * reduce_type_bytes(type));
  for (size_t i = 0; i < kAllreduceElements; ++i) {
    uint32_t sum = 0;
    for (int r = 0; r < ranks; ++r) sum += value(seed, type, r, ranks, i);
    store(type, out, i, sum);
  }
  return out;
}

// The data as it leaves this rank, after the injector's corruption (if any matches).
Bytes outgoing(uint64_t seed, ReduceType type, const Communicator& comm, Injector* injector) {
  Bytes v = contribution(seed, type, comm.rank(), comm.size());
  if (injector == nullptr || injector->empty()) return v;
  InjectionPoint point;
  point.probe = kAllreduceProbe;
  point.device_index = comm.rank();
  point.elements = kAllreduceElements;
  point.width_bits = static_cast<unsigned>(reduce_type_bytes(type) * 8);
  const size_t width = reduce_type_bytes(type);
  for (const auto& x : injector->plan(point).xors) {
    for (size_t b = 0; b < width; ++b) v[x.index * width + b] ^= static_cast<uint8_t>(x.mask >> (8 * b));
  }
  return v;
}

uint64_t differing(const Bytes& a, const Bytes& b, size_t width) {
  uint64_t n = 0;
  for (size_t i = 0; i < a.size(); i += width) n += std::memcmp(&a[i], &b[i], width) != 0;
  return n;
}

void* area_data(AllreduceStaging::Area& area) { return area.gpu ? area.gpu->data() : area.host->data(); }

void put(AllreduceStaging& staging, AllreduceStaging::Area& area, const Bytes& bytes) {
  if (bytes.size() > area.host->bytes()) throw std::logic_error("check_allreduce: staging too small");
  std::memcpy(area.host->data(), bytes.data(), bytes.size());
  if (area.gpu) staging.device->upload(*area.gpu, area.host->data(), bytes.size());
}

Bytes get(AllreduceStaging& staging, AllreduceStaging::Area& area, size_t bytes) {
  if (area.gpu) staging.device->download(area.host->data(), *area.gpu, bytes);
  const auto* p = static_cast<const uint8_t*>(area.host->data());
  return Bytes(p, p + bytes);
}

}  // namespace

AllreduceStaging make_allreduce_staging(const Communicator& comm, Device* gpu) {
  AllreduceStaging staging;
  if (comm.gpu_memory() && gpu == nullptr)
    throw std::logic_error("check_allreduce: a GPU communicator needs its device");
  // Sized for both types: FP32 is the widest element, and the pairwise rounds carry every type.
  const size_t widest = kAllreduceElements * reduce_type_bytes(ReduceType::kFloat32);
  const size_t every = widest + kAllreduceElements * reduce_type_bytes(ReduceType::kBFloat16);
  staging.device = comm.gpu_memory() ? gpu : nullptr;
  for (auto [area, bytes] : {std::pair{&staging.data, widest}, {&staging.send, every}, {&staging.received, every}}) {
    area->host = staging.device ? staging.device->allocate_host(bytes) : make_host_buffer(bytes);
    if (staging.device) area->gpu = staging.device->allocate(bytes);
  }
  return staging;
}

CollectiveResult check_allreduce(Communicator& comm, Device* gpu, uint64_t seed, Injector* injector,
                                 AllreduceStaging* staging) {
  AllreduceStaging own;
  if (staging == nullptr) {
    own = make_allreduce_staging(comm, gpu);
    staging = &own;
  }
  AllreduceStaging& st = *staging;
  CollectiveResult result;
  const int me = comm.rank();
  std::vector<ReduceType> types = {ReduceType::kFloat32};
  if (comm.size() <= kBf16MaxRanks) types.push_back(ReduceType::kBFloat16);
  Bytes sent;  // every type's outgoing data, for the pairwise rounds
  for (ReduceType type : types) {
    const Bytes mine = outgoing(seed, type, comm, injector);
    sent.insert(sent.end(), mine.begin(), mine.end());
    put(st, st.data, mine);
    comm.all_reduce_sum(area_data(st.data), kAllreduceElements, type);
    result.types.push_back(reduce_type_name(type));
    result.checked += kAllreduceElements;
    result.mismatches +=
        differing(get(st, st.data, mine.size()), expected_sum(seed, type, comm.size()), reduce_type_bytes(type));
  }
  for (const std::string& n : comm.all_gather(std::to_string(result.mismatches))) {
    result.any_failed = result.any_failed || n != "0";
  }
  // This all_gather is the final barrier of a clean run: no rank returns (and frees its staging)
  // while a peer's reduction may still read it. A failing run ends with the links' all_gather.
  if (!result.any_failed) return result;
  // Pairwise rounds in lexicographic order of the pair: each rank takes its pairs in that one total
  // order, so the smallest pending pair can always proceed and no round deadlocks.
  put(st, st.send, sent);
  std::vector<std::string> found;
  for (int peer = 0; peer < comm.size(); ++peer) {
    if (peer == me) continue;
    comm.send_recv(peer, area_data(st.send), area_data(st.received), sent.size());
    Bytes theirs;
    for (ReduceType type : types) {
      const Bytes c = contribution(seed, type, peer, comm.size());
      theirs.insert(theirs.end(), c.begin(), c.end());
    }
    if (get(st, st.received, sent.size()) != theirs) found.push_back(std::to_string(peer) + ">" + std::to_string(me));
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
  nlohmann::json j = {{"probe", kAllreduceProbe}, {"types", types},           {"transport", transport},
                      {"checked", checked},       {"mismatches", mismatches}, {"any_failed", any_failed},
                      {"bad_links", links}};
  if (!error.empty()) {
    j["outcome"] = "device_error";
    j["reason"] = error;
  }
  return j;
}

}  // namespace sdc
