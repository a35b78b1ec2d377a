#include "host/communicator.hpp"

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "kernels/common/gemm_elements.hpp"  // bf16_to_float, bits_of_float

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
  std::map<std::pair<int, int>, std::string> mail;  // (from, to) -> bytes, for send_recv
  std::string aborted;                              // why the group was aborted; empty while it runs

  // Under `mutex`: a call cannot complete once the group is aborted.
  void throw_if_aborted() const {
    if (!aborted.empty()) throw CommunicatorAborted("communicator aborted: " + aborted);
  }
};

// Element i of a rank's contribution, as gathered.
template <typename T>
T element_of(const std::string& bytes, size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof v, sizeof v);
  return v;
}

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size; }

  std::vector<std::string> all_gather(const std::string& record) override {
    LocalGroup& g = *group_;
    std::unique_lock<std::mutex> lock(g.mutex);
    g.throw_if_aborted();
    const uint64_t generation = g.generation;
    g.slots[static_cast<size_t>(rank_)] = record;
    if (++g.arrived == g.size) {
      g.gathered = g.slots;
      g.arrived = 0;
      ++g.generation;
      g.changed.notify_all();
    } else {
      g.changed.wait(lock, [&] { return g.generation != generation || !g.aborted.empty(); });
      if (g.generation == generation) g.throw_if_aborted();
    }
    // Copied under the lock: the next generation cannot overwrite it before every rank has left,
    // since it needs every rank to arrive again.
    return g.gathered;
  }

  void barrier() override { all_gather(std::string()); }

  // Threads share memory: the contributions are gathered and added in rank order, one hop each.
  void all_reduce_sum(void* data, size_t count, ReduceType type) override {
    const size_t bytes = count * reduce_type_bytes(type);
    const std::vector<std::string> all = all_gather(std::string(static_cast<const char*>(data), bytes));
    for (const std::string& part : all) {
      if (part.size() != bytes) throw std::runtime_error("all_reduce_sum: ranks gave different counts");
    }
    for (size_t i = 0; i < count; ++i) {
      if (type == ReduceType::kFloat32) {
        float sum = element_of<float>(all[0], i);
        for (size_t r = 1; r < all.size(); ++r) sum += element_of<float>(all[r], i);
        std::memcpy(static_cast<char*>(data) + i * sizeof sum, &sum, sizeof sum);
      } else {
        uint16_t sum = element_of<uint16_t>(all[0], i);
        for (size_t r = 1; r < all.size(); ++r) sum = bf16_add(sum, element_of<uint16_t>(all[r], i));
        std::memcpy(static_cast<char*>(data) + i * sizeof sum, &sum, sizeof sum);
      }
    }
  }

  void send_recv(int peer, const void* send, void* recv, size_t bytes) override {
    LocalGroup& g = *group_;
    std::unique_lock<std::mutex> lock(g.mutex);
    g.throw_if_aborted();
    g.mail[{rank_, peer}] = std::string(static_cast<const char*>(send), bytes);
    g.changed.notify_all();
    g.changed.wait(lock, [&] { return g.mail.count({peer, rank_}) != 0 || !g.aborted.empty(); });
    g.throw_if_aborted();
    const std::string received = std::move(g.mail[{peer, rank_}]);
    g.mail.erase({peer, rank_});
    if (received.size() != bytes) throw std::runtime_error("send_recv: the peer sent a different size");
    std::memcpy(recv, received.data(), bytes);
  }

  void abort(const std::string& why) override {
    LocalGroup& g = *group_;
    std::lock_guard<std::mutex> lock(g.mutex);
    if (g.aborted.empty()) g.aborted = why;  // the first failure is the cause; later ones are its echoes
    g.changed.notify_all();
  }

 private:
  std::shared_ptr<LocalGroup> group_;
  int rank_;
};

}  // namespace

const char* reduce_type_name(ReduceType type) { return type == ReduceType::kFloat32 ? "fp32" : "bf16"; }

size_t reduce_type_bytes(ReduceType type) { return type == ReduceType::kFloat32 ? 4 : 2; }

uint16_t bf16_add(uint16_t a, uint16_t b) {
  uint32_t bits = bits_of_float(bf16_to_float(a) + bf16_to_float(b));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

std::vector<std::string> run_ranks(const std::vector<std::unique_ptr<Communicator>>& ranks,
                                   const std::function<void(int rank, Communicator& comm)>& body) {
  std::vector<std::string> errors(ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r) {
    threads.emplace_back([&, r] {
      Communicator& comm = *ranks[r];
      try {
        body(static_cast<int>(r), comm);
      } catch (const CommunicatorAborted& e) {
        errors[r] = e.what();  // released by another rank's failure, which already aborted the group
      } catch (const std::exception& e) {
        const std::string name = "rank " + std::to_string(r) + ": ";
        const std::string what = e.what();
        errors[r] = what.rfind(name, 0) == 0 ? what : name + what;
        comm.abort(errors[r]);
      } catch (...) {
        errors[r] = "rank " + std::to_string(r) + ": unknown exception";
        comm.abort(errors[r]);
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

std::vector<std::unique_ptr<Communicator>> make_local_communicators(int size) {
  auto group = std::make_shared<LocalGroup>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<LocalCommunicator>(group, r));
  return ranks;
}

}  // namespace sdc
