// The inline probe: runs small probes every N training steps on the job's own device, off the
// training thread, and writes probe and SDC events to the goodput event log.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "host/device.hpp"
#include "probes/probe.hpp"
#include "scheduler/inline/event_log.hpp"
#include "scheduler/inline/memory_rotation.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {

// Public fleet data: of Llama 3's 419 unexpected interruptions in 54 days on 16,384 GPUs, 6 were
// silent data corruption (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3.4).
inline constexpr double kDefaultSdcRatePerDeviceDay = 6.0 / (54.0 * 16384.0);
// With every = auto, no probe runs until this many step times are measured; the probe cost comes
// from the run at create time. The cadence is chosen again after every probe, from the median of
// the last kStepWindow step times and the mean of the last kCostWindow probe times.
inline constexpr int64_t kCalibrationSteps = 5;
inline constexpr size_t kStepWindow = 64;
inline constexpr size_t kCostWindow = 4;
// The budget is aimed at with this margin, so that noise in the measured times does not exceed it.
inline constexpr double kBudgetMargin = 0.9;
// Caller events nest no deeper than this: deeper JSON is refused before it is parsed further, so
// hostile input cannot exhaust the training process's stack.
inline constexpr int kMaxEventDepth = 32;

struct InlineConfig {
  std::string backend = "auto";
  int device = 0;
  std::vector<std::string> probes = {"alu.fma32", "alu.int64", "mem.random_blocks"};
  double budget_fraction = 0.01;
  int64_t every = 0;  // 0: auto
  std::string event_log;
  uint64_t seed = 0;
  double sdc_rate_per_device_day = kDefaultSdcRatePerDeviceDay;
  std::string inject;
  void* stream = nullptr;  // the caller's stream, checked to belong to `device`; null: not checked
  int64_t ranks = 1;       // devices in the job, all probed at the same step: the job's rate is ranks x one's
};

// The steps between probes that minimise probe overhead plus expected SDC rework (the planner's
// optimum, detection latency being about half the interval), never spending more than
// `budget_fraction` of step time on probes. A job of `ranks` devices that all probe at the same
// step: a fault on any of them corrupts the model through the reductions, so the rate is `ranks`
// times one device's and the optimum sqrt(ranks) times shorter, while the probe costs one probe time.
// Throws std::invalid_argument naming the argument out of range.
int64_t choose_probe_every(double step_s, double probe_cost_s, double sdc_per_device_day, double budget_fraction,
                           int64_t ranks = 1);

// Every public member is safe to call from several threads at once (calls are serialised); only
// the destructor must not overlap another call.
class InlineProbe {
 public:
  explicit InlineProbe(InlineConfig config);  // throws InputError on a bad config
  ~InlineProbe();                             // finish(), then stops the worker
  InlineProbe(const InlineProbe&) = delete;
  InlineProbe& operator=(const InlineProbe&) = delete;

  // Non-blocking: queues a probe on a due step and collects a finished one. A due step whose
  // stream is capturing a CUDA graph is skipped and counted; a stream of another device is an
  // InputError. `step` must be >= 0.
  void step(int64_t step, void* stream);
  // Waits for a probe in flight and collects its verdict.
  void finish();
  nlohmann::json verdict() const;
  // Appends a caller's event (JSON text: an object without "t") to the event log, stamped now, after
  // checking it against the goodput schema. Throws InputError saying what is wrong.
  void log_event(std::string_view json_text);

 private:
  struct Done {
    int64_t step;
    bool fault = false;    // a probe failed or raised a device error: SDC
    bool skipped = false;  // a probe could not run: no verdict, and no SDC either
    double seconds = 0;
    nlohmann::json results = nlohmann::json::array();
    bool slice_checked = false;  // the memory rotation checked a slice
  };

  void worker_loop();
  Done run_probes(int64_t step, bool log_events);
  void collect(Done done);
  void choose_cadence();
  void check_stream(void* stream);
  void start_rotation(Done& first);
  int64_t cycle_steps() const;  // slices x every: the steps between two checks of one slice
  std::string rotation_note() const;
  nlohmann::json rotation_json() const;

  InlineConfig config_;
  std::unique_ptr<Device> device_;
  std::vector<const Probe*> probes_;
  // With a memory probe in the set: the region it rotates through (after device_, which it uses),
  // and that probe with the rotation's visit added, in place of the plain one in probes_.
  std::unique_ptr<MemoryRotation> rotation_;
  std::unique_ptr<RotatingMemoryProbe> rotating_probe_;
  std::unique_ptr<Injector> injector_;
  RunOptions options_;
  EventLog log_;

  // Callers' state, under calls_mutex_.
  mutable std::mutex calls_mutex_;
  int64_t every_;  // 0 until an auto cadence is chosen
  bool auto_every_;
  int64_t next_due_ = 0;
  int64_t steps_timed_ = 0;
  std::optional<std::chrono::steady_clock::time_point> last_step_time_;
  std::vector<double> step_times_;  // the last kStepWindow times between step() calls (a ring)
  double step_s_ = 0;               // their median when the cadence was last chosen
  std::vector<double> probe_costs_;
  int64_t last_good_step_ = -1;
  int64_t probes_run_ = 0;
  int64_t probes_skipped_busy_ = 0;
  int64_t probes_skipped_capturing_ = 0;
  int64_t failures_ = 0;
  int64_t slices_checked_ = 0;
  int64_t last_step_ = -1;
  std::string verdict_ = "none";
  nlohmann::json last_results_ = nlohmann::json::array();
  std::string cadence_note_;

  // Shared with the worker, under mutex_ (taken after calls_mutex_ when both are).
  mutable std::mutex mutex_;
  std::condition_variable wake_;  // the worker waits for a queued step
  std::condition_variable idle_;  // finish() waits for the worker to be idle
  bool stop_ = false;
  bool busy_ = false;
  std::optional<int64_t> queued_step_;
  std::optional<Done> done_;
  std::atomic<bool> done_ready_{false};
  void* stream_event_ = nullptr;  // CUDA: the event the probe waits on before it starts
  std::thread worker_;
};

}  // namespace sdc
