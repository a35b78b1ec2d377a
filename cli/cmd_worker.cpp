// The hidden `worker` subcommand: runs probes on one device for a parent (qualify, sweep) that
// watches it, writing to fd 3 one JSON line as each probe starts, heartbeats as it progresses, and
// one line with each result (scheduler/qualify/worker_protocol.hpp).
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>

#include "cli/probe_run.hpp"
#include "host/backend.hpp"
#include "host/error.hpp"
#include "scheduler/qualify/catalogue.hpp"
#include "scheduler/qualify/worker_protocol.hpp"

namespace sdc::cli {
namespace {

// Heartbeats may come from any thread that finishes a kernel: one line at a time.
std::mutex g_emit;

void emit(const std::string& line) {
  const std::lock_guard<std::mutex> lock(g_emit);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(kWorkerProtocolFd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("worker: cannot write to the parent (fd 3)");
    done += static_cast<size_t>(n);
  }
}

// At most a few beats a second: enough for the parent's watchdog, never a flood.
void beat() {
  using Clock = std::chrono::steady_clock;
  static std::atomic<int64_t> last{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
  int64_t prev = last.load();
  if (now - prev < 250 || !last.compare_exchange_strong(prev, now)) return;
  emit(worker_beat_line());
}

}  // namespace

void add_worker_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* sub = app.add_subcommand("worker", "Run probes on one device for a watching parent (internal)");
  sub->group("");  // internal: not listed in --help
  struct Args {
    ProbeRunArgs run;
    std::string level = "quick";
    std::vector<std::string> probes;
    bool retry_failures = false;
    int rank = 0;
    int index = -1;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--seed", args->run.seed, "The parent's run seed")->required();
  sub->add_option("--inject", args->run.inject, "The parent's injection clauses");
  sub->add_option("--rank", args->rank, "The parent's MPI rank (selects rank= injection clauses)");
  sub->add_option("--size", args->run.size_bytes, "Buffer bytes for memory probes");
  sub->add_option("--iterations", args->run.iterations, "Passes for memory probes, chain length for ALU probes");
  sub->add_option("--burn", args->run.burn_s, "Seconds of the gemm.burn.* probes");
  sub->add_option("--device", args->run.device, "The device's UUID")->required();
  sub->add_option("--index", args->index, "The parent's index of the device");
  sub->add_option("--level", args->level)->check(CLI::IsMember({"quick", "standard", "long"}));
  sub->add_flag("--retry-failures", args->retry_failures, "Re-run a failing probe at once with a new seed");
  sub->add_option("probes", args->probes, "Probe ids, in order")->required();
  sub->callback([&global, &exit_code, args] {
    const ProbeRegistry& registry = builtin_registry();
    std::vector<const Probe*> probes;
    for (const auto& id : args->probes) {
      const Probe* p = registry.find(id);
      if (p == nullptr) throw InputError("worker: unknown probe '" + id + "'");
      probes.push_back(p);
    }
    RunOptions options;
    options.seed = *args->run.seed;
    options.level = parse_level(args->level);
    options.size_bytes = args->run.size_bytes;
    options.iterations = args->run.iterations;
    options.burn_s = args->run.burn_s;
    std::vector<InjectionSpec> specs;
    if (!args->run.inject.empty()) specs = parse_injection_specs(args->run.inject);
    options.rank = args->rank;
    Injector injector(specs, options.seed, options.rank);
    if (!specs.empty()) options.injector = &injector;
    const auto devices = select_devices(open_devices({global.backend, global.cpu_devices}), args->run.device);
    if (devices.size() != 1) throw InputError("worker: --device must name exactly one device");
    Device& device = *devices.front();
    if (args->index >= 0) device.set_index(args->index);
    device.set_heartbeat(beat);

    RunOptions retry = options;
    retry.seed = retry_seed(options.seed);
    try {
      for (const Probe* probe : probes) {
        emit(worker_start_line(probe->id()));
        const ProbeResult result = run_probe(*probe, device, options);
        emit(worker_result_line(result, false));
        if (result.outcome == Outcome::kFail && args->retry_failures) {
          emit(worker_start_line(probe->id(), true));
          emit(worker_result_line(run_probe(*probe, device, retry), true));
        }
        // The device's context is unusable: the parent skips its remaining probes.
        if (result.outcome == Outcome::kDeviceError) break;
      }
    } catch (const InputError& e) {
      // The operator's mistake, not the device's: the parent reports it (once) and exits 2.
      emit(worker_input_error_line(e.what()));
      exit_code = 2;
      return;
    }
    exit_code = 0;
  });
}

}  // namespace sdc::cli
