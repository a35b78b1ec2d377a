#include "host/communicator.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

namespace sdc {
namespace {

// What the local ranks share: a generation-counted rendezvous, so consecutive all_gathers never mix.
struct LocalGroup {
  explicit LocalGroup(int n) : size(n), slots(static_cast<size_t>(n)) {}
  const int size;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> slots;
  std::vector<std::string> gathered;
  int arrived = 0;
  uint64_t generation = 0;
  std::map<std::pair<int, int>, std::string> mail;  // (from, to) -> record, for exchange
};

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size; }

  std::vector<std::string> all_gather(const std::string& record) override {
    LocalGroup& g = *group_;
    std::unique_lock<std::mutex> lock(g.mutex);
    const uint64_t generation = g.generation;
    g.slots[static_cast<size_t>(rank_)] = record;
    if (++g.arrived == g.size) {
      g.gathered = g.slots;
      g.arrived = 0;
      ++g.generation;
      g.changed.notify_all();
    } else {
      g.changed.wait(lock, [&] { return g.generation != generation; });
    }
    // Copied under the lock: the next generation cannot overwrite it before every rank has left,
    // since it needs every rank to arrive again.
    return g.gathered;
  }

  // Threads share memory: the sum is the gathered contributions added in rank order.
  void all_reduce_sum(std::vector<float>& data) override {
    const std::string mine(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
    const std::vector<std::string> all = all_gather(mine);
    std::fill(data.begin(), data.end(), 0.0f);
    std::vector<float> part(data.size());
    for (const std::string& bytes : all) {
      if (bytes.size() != data.size() * sizeof(float)) throw std::runtime_error("all_reduce_sum: sizes differ");
      std::memcpy(part.data(), bytes.data(), bytes.size());
      for (size_t i = 0; i < data.size(); ++i) data[i] += part[i];
    }
  }

  std::string exchange(int peer, const std::string& record) override {
    LocalGroup& g = *group_;
    std::unique_lock<std::mutex> lock(g.mutex);
    g.mail[{rank_, peer}] = record;
    g.changed.notify_all();
    g.changed.wait(lock, [&] { return g.mail.count({peer, rank_}) != 0; });
    std::string received = std::move(g.mail[{peer, rank_}]);
    g.mail.erase({peer, rank_});
    return received;
  }

 private:
  std::shared_ptr<LocalGroup> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_communicators(int size) {
  auto group = std::make_shared<LocalGroup>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<LocalCommunicator>(group, r));
  return ranks;
}

}  // namespace sdc
