// The hidden `worker` subcommand: runs probes on one device for a parent (qualify, sweep) that
// watches it, printing one JSON line as each probe starts and one with each result (scheduler/isolation.hpp).
#include <cstdio>
#include <memory>

#include "cli/probe_run.hpp"
#include "host/backend.hpp"
#include "host/error.hpp"
#include "scheduler/catalogue.hpp"

namespace sdc::cli {
namespace {

void emit(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
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
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--seed", args->run.seed, "The parent's run seed")->required();
  sub->add_option("--inject", args->run.inject, "The parent's injection clauses");
  sub->add_option("--rank", args->rank, "The parent's MPI rank (selects rank= injection clauses)");
  sub->add_option("--size", args->run.size_bytes, "Buffer bytes for memory probes");
  sub->add_option("--iterations", args->run.iterations, "Passes for memory probes, chain length for ALU probes");
  sub->add_option("--device", args->run.device, "The device's UUID")->required();
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
    std::vector<InjectionSpec> specs;
    if (!args->run.inject.empty()) specs = parse_injection_specs(args->run.inject);
    options.rank = args->rank;
    Injector injector(specs, options.seed, options.rank);
    if (!specs.empty()) options.injector = &injector;
    const auto devices = select_devices(open_devices({global.backend, global.cpu_devices}), args->run.device);
    if (devices.size() != 1) throw InputError("worker: --device must name exactly one device");
    Device& device = *devices.front();

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
