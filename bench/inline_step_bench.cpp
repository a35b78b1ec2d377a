// The cost of sdc_inline_step() on a step where no probe is due, through the C ABI as a training
// job calls it; the budget is 1 us per call. Reported against a clock read measured in the same
// run, since step() reads the clock once to time steps.
#include <benchmark/benchmark.h>

#include <chrono>

#include "sdcprobe/sdcprobe.h"

namespace {

void BM_StepNotDue(benchmark::State& state) {
  sdc_inline_config c;
  sdc_inline_config_init(&c);
  c.backend = "cpu";
  c.probes = "alu.fma32";
  c.every = int64_t{1} << 60;  // due at step 0 only
  c.seed = 1;
  sdc_inline* probe = nullptr;
  if (sdc_inline_create(&c, &probe) != SDC_OK) {
    state.SkipWithError(sdc_last_error());
    return;
  }
  sdc_inline_step(probe, 0, nullptr);
  int64_t step = 1;
  for (auto _ : state) benchmark::DoNotOptimize(sdc_inline_step(probe, step++, nullptr));
  sdc_inline_destroy(probe);
  // Seconds per call divided by the 1 us budget.
  state.counters["fraction_of_1us"] = benchmark::Counter(static_cast<double>(state.iterations()) * 1e-6,
                                                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}

}  // namespace

BENCHMARK(BM_StepNotDue)->MinTime(0.5);
BENCHMARK(BM_ClockRead)->MinTime(0.5);

BENCHMARK_MAIN();
