// The inline probe on a GPU: only the requested device is opened, the caller's stream must belong
// to it, a stream capturing a CUDA graph is skipped and the capture survives the probe's worker,
// and the worker sleeps rather than spins while it waits. Each test skips without the GPUs it needs.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>

#include "host/backend.hpp"
#include "host/error.hpp"
#include "scheduler/inline/inline_probe.hpp"

namespace sdc {
namespace {

int gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

InlineConfig gpu_config(int device) {
  InlineConfig c;
  c.backend = "cuda";
  c.device = device;
  c.probes = {"alu.fma32", "mem.random_blocks"};
  c.every = 1;
  c.seed = 17;
  return c;
}

void wait_idle(const InlineProbe& probe) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (probe.verdict()["in_flight"].get<bool>()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Holds a stream at a host function until released, so that work queued after it waits.
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t stream) {
    EXPECT_EQ(cudaLaunchHostFunc(stream, &StreamGate::hold, &open_), cudaSuccess);
  }
  ~StreamGate() { release(); }
  void release() { open_.store(true); }

 private:
  static void hold(void* open) {
    // Sleeps: the gate itself must not burn a core, or the spin test would measure it.
    while (!static_cast<std::atomic<bool>*>(open)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::atomic<bool> open_{false};
};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

TEST(InlineGpu, ProbesTheRequestedOrdinal) {
  const int n = gpu_count();
  if (n < 1) GTEST_SKIP() << "no CUDA device";
  InlineProbe probe(gpu_config(n - 1));
  EXPECT_EQ(probe.verdict()["device"], open_cuda_device(n - 1)->identity().uuid);
  EXPECT_EQ(probe.verdict()["verdict"], "pass");
}

// The memory rotation over HBM: a region of more than twice the L2 that CUDA reports, every slice
// checked clean once a cycle, and a bit flipped in the region caught at its slice's next check.
TEST(InlineGpu, MemoryRotationCoversTwiceTheL2AndCatchesAFault) {
  if (gpu_count() < 1) GTEST_SKIP() << "no CUDA device";
  int l2 = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), cudaSuccess);
  InlineConfig c = gpu_config(0);
  // mem.random_blocks checks its in-cache buffer twice, then the rotation checks a slice: point
  // 3k + 2 is the rotation's check at step k (after=8: step 2).
  c.inject = "probe=mem.random_blocks,model=bitflip,mode=transient,after=8,bit=9";
  InlineProbe probe(c);
  nlohmann::json v = probe.verdict();
  const auto& rotation = v["memory_rotation"];
  EXPECT_EQ(rotation["cache_bytes"], static_cast<uint64_t>(l2));
  EXPECT_EQ(rotation["cache"], "device");
  EXPECT_GE(rotation["region_bytes"].get<uint64_t>(), 2 * static_cast<uint64_t>(l2));
  const int64_t slices = rotation["slices"];
  for (int64_t step = 0; step <= 2 * slices; ++step) {
    wait_idle(probe);
    probe.step(step, nullptr);
    if (step == 0) continue;
    for (const auto& r : probe.verdict()["results"]) {
      if (r["probe"] != "mem.random_blocks") continue;
      EXPECT_EQ(r["params"]["rotation"]["checked"], rotation["slice_bytes"].get<uint64_t>() / 8);
      EXPECT_EQ(r["params"]["rotation"]["mismatches"], step - 1 == 2 ? 1 : 0) << "step " << step - 1;
    }
  }
  probe.finish();
  v = probe.verdict();
  EXPECT_EQ(v["verdict"], "fail");
  EXPECT_EQ(v["failures"], 1);
  EXPECT_EQ(v["memory_rotation"]["slices_checked"], 2 * slices + 1);
}

TEST(InlineGpu, OpensNoContextOnTheOtherGpus) {
  const int n = gpu_count();
  if (n < 2) GTEST_SKIP() << "needs two GPUs";
  InlineProbe probe(gpu_config(n - 1));
  // The driver API through the runtime, so that the test links no libcuda (absent in CI).
  void* get_device = nullptr;
  void* get_state = nullptr;
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuDeviceGet", &get_device, 12000, cudaEnableDefault, nullptr),
            cudaSuccess);
  ASSERT_EQ(
      cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &get_state, 12000, cudaEnableDefault, nullptr),
      cudaSuccess);
  for (int ordinal = 0; ordinal < n - 1; ++ordinal) {
    CUdevice dev = 0;
    ASSERT_EQ(reinterpret_cast<decltype(&cuDeviceGet)>(get_device)(&dev, ordinal), CUDA_SUCCESS);
    unsigned flags = 0;
    int active = 0;
    ASSERT_EQ(reinterpret_cast<decltype(&cuDevicePrimaryCtxGetState)>(get_state)(dev, &flags, &active), CUDA_SUCCESS);
    EXPECT_EQ(active, 0) << "GPU " << ordinal << " has a context";
  }
}

TEST(InlineGpu, StreamMustBelongToTheProbedGpu) {
  const int n = gpu_count();
  if (n < 1) GTEST_SKIP() << "no CUDA device";
  cudaStream_t own = nullptr;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&own), cudaSuccess);
  InlineConfig c = gpu_config(0);
  c.stream = own;
  {
    InlineProbe probe(c);
    probe.step(0, own);
    probe.finish();
    EXPECT_EQ(probe.verdict()["last_good_step"], 0);
  }
  if (n >= 2) {
    c.device = 1;  // the stream is GPU 0's
    try {
      InlineProbe wrong(c);
      ADD_FAILURE() << "a stream of GPU 0 was accepted for GPU 1";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("stream belongs to device 0, not to device 1"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(cudaStreamDestroy(own), cudaSuccess);
}

TEST(InlineGpu, CapturingStreamIsSkippedAndTheCaptureSurvivesTheWorker) {
  if (gpu_count() < 1) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t gated = nullptr, captured = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&gated, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&captured, cudaStreamNonBlocking), cudaSuccess);
  void* scratch = nullptr;
  ASSERT_EQ(cudaMalloc(&scratch, 4096), cudaSuccess);
  {
    InlineProbe probe(gpu_config(0));
    StreamGate gate(gated);
    probe.step(0, gated);  // the worker now waits for the gate
    // A job's global-mode capture, as torch.cuda.graph does; the probe's worker runs inside it.
    ASSERT_EQ(cudaStreamBeginCapture(captured, cudaStreamCaptureModeGlobal), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(scratch, 0, 4096, captured), cudaSuccess);
    gate.release();
    wait_idle(probe);
    probe.step(1, captured);  // due, but capturing: skipped and counted
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(captured, &graph), cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, captured), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(captured), cudaSuccess);
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    probe.step(2, captured);  // not capturing any more: probed
    probe.finish();
    const auto v = probe.verdict();
    EXPECT_EQ(v["probes_skipped_capturing"], 1) << v.dump();
    EXPECT_EQ(v["verdict"], "pass") << v.dump();
    EXPECT_EQ(v["last_good_step"], 2) << v.dump();
  }
  EXPECT_EQ(cudaFree(scratch), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(gated), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(captured), cudaSuccess);
}

TEST(InlineGpu, WorkerSleepsWhileItWaitsForTheCallersStream) {
  if (gpu_count() < 1) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t gated = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&gated, cudaStreamNonBlocking), cudaSuccess);
  {
    InlineProbe probe(gpu_config(0));
    StreamGate gate(gated);
    probe.step(0, gated);
    // A spinning wait would take about a second of CPU here; a blocking one almost none. Loose on
    // purpose: it tells spinning from sleeping, not how fast the machine is.
    const double cpu_before = process_cpu_seconds();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double cpu_spent = process_cpu_seconds() - cpu_before;
    gate.release();
    probe.finish();
    EXPECT_LT(cpu_spent, 0.3) << "the worker spun while waiting for the caller's stream";
    EXPECT_EQ(probe.verdict()["last_good_step"], 0);
  }
  EXPECT_EQ(cudaStreamDestroy(gated), cudaSuccess);
}

}  // namespace
}  // namespace sdc
