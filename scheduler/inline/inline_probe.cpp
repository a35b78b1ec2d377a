#include "scheduler/inline/inline_probe.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "goodput/event.hpp"
#include "goodput/planner.hpp"
#include "host/backend.hpp"
#include "host/error.hpp"
#include "scheduler/qualify/catalogue.hpp"

namespace sdc {
namespace {

constexpr double kSecondsPerDay = 86400.0;

// Inline probes are small: they run between steps, within a fraction of a step. Memory probes
// take the quick level's passes over a small buffer, which stays in cache (the rotation,
// memory_rotation.hpp, is what reaches device memory); chains are shortened.
constexpr uint64_t kInlineBufferBytes = 4u << 20;
// GEMM and SFU working set inside the training process: the SFU's quick size (2^20 inputs per
// function), GEMMs of n = 1024 (fp32, bf16, fp64, random fp8 with its reference) to 2048 (exact
// fp8, int8): 24 MiB at most and well under a millisecond of tensor-core time, where the level's
// n = 8192 takes 0.4-1.5 GiB.
constexpr uint64_t kInlineComputeBytes = 24u << 20;
constexpr uint32_t kInlineChainIterations = 256;
// The goodput reader's line limit.
constexpr size_t kMaxEventBytes = 1 << 20;

RunOptions inline_options(const Probe& probe, RunOptions options) {
  if (probe.id().rfind("alu.", 0) == 0) options.iterations = kInlineChainIterations;
  return options;
}

// The first multiple of `every` after `step` (probes fall on global-step multiples, also after a
// restore), saturating rather than overflowing near the end of int64_t.
int64_t next_multiple(int64_t step, int64_t every) {
  const int64_t base = step - step % every;
  return base > std::numeric_limits<int64_t>::max() - every ? std::numeric_limits<int64_t>::max() : base + every;
}

// The part of step() the training loop waits for (collecting a finished probe, queueing the next),
// logged as a blocking probe span when there is such work; the probes themselves run on the worker
// thread and are logged as non-blocking.
class StepSpan {
 public:
  StepSpan(EventLog& log, int64_t step) : log_(log), step_(step) {}
  ~StepSpan() {
    if (!open_) return;
    try {
      log_.append({{"event", "probe_end"}, {"probe", "inline.step"}, {"step", step_}, {"blocking", true}});
    } catch (const std::exception&) {
      // The span's begin is in the log; the ledger caps a span left open (docs/goodput.md, rule 5).
    }
  }
  StepSpan(const StepSpan&) = delete;
  StepSpan& operator=(const StepSpan&) = delete;
  void open() {
    if (open_ || !log_.enabled()) return;
    log_.append({{"event", "probe_begin"}, {"probe", "inline.step"}, {"step", step_}, {"blocking", true}});
    open_ = true;
  }

 private:
  EventLog& log_;
  int64_t step_;
  bool open_ = false;
};

// Parses a caller's event, refusing nesting deeper than kMaxEventDepth as soon as it is seen.
nlohmann::json parse_event_json(std::string_view text) {
  using Parse = nlohmann::json::parse_event_t;
  // `depth` counts the containers around the one that starts: it opens level depth + 1.
  const nlohmann::json::parser_callback_t limit_depth = [](int depth, Parse event, nlohmann::json&) {
    if ((event == Parse::object_start || event == Parse::array_start) && depth >= kMaxEventDepth) {
      throw InputError("event nests deeper than " + std::to_string(kMaxEventDepth) + " levels");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, limit_depth);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("event is not valid JSON: ") + e.what());
  }
}

}  // namespace

int64_t choose_probe_every(double step_s, double probe_cost_s, double sdc_per_device_day, double budget_fraction,
                           int64_t ranks) {
  if (!(step_s > 0) || !(probe_cost_s > 0) || !std::isfinite(step_s) || !std::isfinite(probe_cost_s)) {
    throw std::invalid_argument("the step's and the check's times (step_s, check_s) must be positive and finite");
  }
  if (!(sdc_per_device_day > 0) || !std::isfinite(sdc_per_device_day)) {
    throw std::invalid_argument("sdc_rate_per_device_day must be positive and finite");
  }
  if (!(budget_fraction > 0 && budget_fraction <= 1)) throw std::invalid_argument("budget_fraction must be in (0, 1]");
  if (ranks < 1) throw std::invalid_argument("ranks must be >= 1");
  const double sdc_per_s = sdc_per_device_day * static_cast<double>(ranks) / kSecondsPerDay;
  // A rate so small that it underflows to 0 per second has no finite optimum (never 0, which
  // would leave the interval to the budget and make fewer ranks probe more often than more).
  const double optimal_s = sdc_per_s > 0 ? goodput::optimal_probe_interval(sdc_per_s, probe_cost_s)
                                         : std::numeric_limits<double>::infinity();
  const double budget_steps = probe_cost_s / (kBudgetMargin * budget_fraction * step_s);
  const double steps = std::max(std::ceil(optimal_s / step_s), std::ceil(budget_steps));
  return static_cast<int64_t>(std::clamp(steps, 1.0, 1e15));
}

InlineProbe::InlineProbe(InlineConfig config)
    : config_(std::move(config)), log_(config_.event_log), every_(config_.every), auto_every_(config_.every <= 0) {
  if (!(config_.budget_fraction > 0 && config_.budget_fraction <= 1)) {
    throw InputError("budget_fraction must be in (0, 1]");
  }
  if (!(config_.sdc_rate_per_device_day > 0) || !std::isfinite(config_.sdc_rate_per_device_day)) {
    throw InputError("sdc_rate_per_device_day must be positive and finite");
  }
  if (config_.ranks < 1) throw InputError("ranks must be >= 1");
  if (config_.probes.empty()) throw InputError("probes: empty");
  probes_ = builtin_registry().select(config_.probes);
  if (!config_.inject.empty()) {
    auto specs = parse_injection_specs(config_.inject);
    for (const InjectionSpec& spec : specs) {
      // They would hang close() or kill the training process; qualify's watched workers test them.
      if (spec.model == FaultModel::kHang || spec.model == FaultModel::kCrash) {
        throw InputError(
            "inject: model hang and crash are refused by the inline probe (they would hang or kill "
            "the training job); use qualify, which watches its workers");
      }
    }
    injector_ = std::make_unique<Injector>(std::move(specs), config_.seed);
  }

  // Only this device: every rank of a job creates a probe, and must not touch the other GPUs.
  device_ = open_device({config_.backend, 1}, config_.device);
  if (config_.stream != nullptr) check_stream(config_.stream);

  options_.seed = config_.seed != 0 ? config_.seed : (static_cast<uint64_t>(std::random_device{}()) << 32 | 1);
  options_.level = Level::kQuick;
  options_.size_bytes = kInlineBufferBytes;
  options_.compute_bytes = kInlineComputeBytes;
  // One run now allocates every buffer the probes reuse and measures their cost. It is a real
  // probe (without injection): a fault found here is reported like any other.
  Done first = run_probes(-1, /*log_events=*/false);
  for (const auto& r : first.results) {
    if (r["outcome"] == "skipped") {
      throw std::runtime_error("probe " + r["probe"].get<std::string>() + " cannot run on " +
                               device_->identity().label() + ": " + r.value("reason", ""));
    }
  }
  start_rotation(first);
  if (!auto_every_) {
    cadence_note_ = "probe every " + std::to_string(every_) + " steps (fixed)";
    if (rotation_) cadence_note_ += "; " + rotation_note();
  }
  collect(std::move(first));
  options_.injector = injector_.get();
  worker_ = std::thread([this] { worker_loop(); });
}

InlineProbe::~InlineProbe() {
  try {
    finish();  // records a last probe's verdict, and its sdc_detected
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sdcprobe inline: the last probe's verdict was not recorded: %s\n", e.what());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

void InlineProbe::check_stream(void* stream) {
  const std::optional<int> owner = device_->stream_device(stream);
  if (owner && *owner != config_.device) {
    throw InputError("stream belongs to device " + std::to_string(*owner) + ", not to device " +
                     std::to_string(config_.device) + " that the probe tests: give the stream's device");
  }
}

void InlineProbe::start_rotation(Done& first) {
  const auto carrier =
      std::find_if(probes_.begin(), probes_.end(), [](const Probe* p) { return is_memory_probe(p->id()); });
  if (carrier == probes_.end()) return;
  // The memory probes' own rate in the run just made, over their in-cache buffer, is above the rate
  // of device memory, and that run's cost includes setting up the buffers: both make the slice err
  // large, and plan_rotation caps it at the cache.
  double bytes = 0, seconds = 0;
  for (const auto& r : first.results) {
    if (!is_memory_probe(r["probe"].get<std::string>())) continue;
    bytes += r["bytes"].get<double>();
    seconds += r["duration_s"].get<double>() - r["setup_s"].get<double>();
  }
  const RotationPlan plan =
      plan_rotation(device_->identity().cache_bytes, first.seconds, seconds > 0 ? bytes / seconds : 0);
  rotation_ = std::make_unique<MemoryRotation>(*device_, plan, probe_seed(options_.seed, (*carrier)->id()));
  // Every slice's first visit, which only writes: from the first probe on, each visit checks one.
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t s = 0; s < plan.slices; ++s) rotation_->visit_next();
  const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A later visit reads and writes one slice: about twice a first visit, in the cost the cadence starts from.
  first.seconds += 2 * write_s / static_cast<double>(plan.slices);
  rotating_probe_ = std::make_unique<RotatingMemoryProbe>(**carrier, *rotation_);
  *carrier = rotating_probe_.get();
}

int64_t InlineProbe::cycle_steps() const {
  const auto slices = static_cast<int64_t>(rotation_->plan().slices);
  return every_ > std::numeric_limits<int64_t>::max() / slices ? std::numeric_limits<int64_t>::max() : every_ * slices;
}

std::string InlineProbe::rotation_note() const {
  const RotationPlan& plan = rotation_->plan();
  const auto mib = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  char note[256];
  std::snprintf(note, sizeof(note),
                "memory: a %.1f MiB region (%.2fx the %.1f MiB cache%s) in %llu slices of %.1f MiB, one per "
                "probe: each slice is checked every %lld steps",
                mib(plan.region_bytes()),
                static_cast<double>(plan.region_bytes()) / static_cast<double>(plan.cache_bytes), mib(plan.cache_bytes),
                plan.cache_assumed ? ", assumed" : "", static_cast<unsigned long long>(plan.slices),
                mib(plan.slice_bytes), static_cast<long long>(cycle_steps()));
  return note;
}

nlohmann::json InlineProbe::rotation_json() const {
  if (!rotation_) return nullptr;
  const RotationPlan& plan = rotation_->plan();
  return {{"probe", rotating_probe_->id()},
          {"cache_bytes", plan.cache_bytes},
          {"cache", plan.cache_assumed ? "assumed" : "device"},
          {"region_bytes", plan.region_bytes()},
          {"region_cache_multiple", static_cast<double>(plan.region_bytes()) / static_cast<double>(plan.cache_bytes)},
          {"slice_bytes", plan.slice_bytes},
          {"slices", plan.slices},
          {"cycle_steps", cycle_steps()},
          {"slices_checked", slices_checked_}};
}

void InlineProbe::choose_cadence() {
  std::vector<double> steps = step_times_;
  std::nth_element(steps.begin(), steps.begin() + steps.size() / 2, steps.end());
  step_s_ = steps[steps.size() / 2];
  const size_t n = std::min(kCostWindow, probe_costs_.size());
  double cost = 0;
  for (size_t i = probe_costs_.size() - n; i < probe_costs_.size(); ++i) cost += probe_costs_[i];
  cost /= static_cast<double>(n);
  const int64_t previous = every_;
  every_ = choose_probe_every(step_s_, cost, config_.sdc_rate_per_device_day, config_.budget_fraction, config_.ranks);
  // Logged when first chosen and when it moves by more than a tenth.
  if (previous != 0 && std::abs(static_cast<double>(every_ - previous)) <= 0.1 * static_cast<double>(previous)) return;
  // Say which bound chose the interval: the planner's optimum or the budget.
  const double job_rate = config_.sdc_rate_per_device_day * static_cast<double>(config_.ranks);
  const double optimal_steps = goodput::optimal_probe_interval(job_rate / kSecondsPerDay, cost) / step_s_;
  const double budget_steps = cost / (kBudgetMargin * config_.budget_fraction * step_s_);
  char note[448];
  std::snprintf(note, sizeof(note),
                "probe every %lld steps (step %.4g s, probe %.4g s, SDC rate %.3g per device-day on %lld ranks, "
                "budget %.3g): the planner's optimum for the job is %.4g steps, the budget allows one probe per "
                "%.4g steps; the larger wins",
                static_cast<long long>(every_), step_s_, cost, config_.sdc_rate_per_device_day,
                static_cast<long long>(config_.ranks), config_.budget_fraction, optimal_steps, budget_steps);
  cadence_note_ = note;
  if (rotation_) cadence_note_ += "; " + rotation_note();
  std::fprintf(stderr, "sdcprobe inline: %s\n", cadence_note_.c_str());
}

void InlineProbe::step(int64_t step, void* stream) {
  if (step < 0) throw InputError("step " + std::to_string(step) + ": must be >= 0");
  std::lock_guard<std::mutex> calls(calls_mutex_);
  const auto now = std::chrono::steady_clock::now();
  const bool first_call = !last_step_time_;
  if (last_step_time_) {
    const double dt = std::chrono::duration<double>(now - *last_step_time_).count();
    if (step_times_.size() < kStepWindow) {
      step_times_.push_back(dt);
    } else {
      step_times_[static_cast<size_t>(steps_timed_) % kStepWindow] = dt;
    }
    ++steps_timed_;
  }
  last_step_time_ = now;
  last_step_ = step;
  // A fixed cadence falls on multiples of `every` from the first call on.
  if (first_call && every_ > 0 && !auto_every_ && step % every_ != 0) next_due_ = next_multiple(step, every_);
  StepSpan span(log_, step);
  if (done_ready_.load(std::memory_order_acquire)) {
    span.open();
    std::optional<Done> done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done.swap(done_);
      done_ready_.store(false, std::memory_order_relaxed);
    }
    if (done) collect(std::move(*done));
  }
  if (every_ == 0) {
    if (steps_timed_ < kCalibrationSteps) {
      if (cadence_note_.empty()) cadence_note_ = "calibrating: the cadence is chosen once 5 step times are measured";
      return;
    }
    choose_cadence();
    next_due_ = next_multiple(step, every_);  // the probe at create time covers the start
  }
  if (step < next_due_) return;
  next_due_ = next_multiple(step, every_);
  span.open();
  // Recording on a capturing stream would add to the job's graph, and waiting on it is not allowed.
  if (device_->stream_capturing(stream)) {
    ++probes_skipped_capturing_;
    return;
  }
  if (stream != nullptr) check_stream(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  if (busy_) {
    ++probes_skipped_busy_;  // never queue behind a probe still running: the budget would slip
    return;
  }
  stream_event_ = device_->mark_stream(stream);  // may throw: then nothing is queued
  busy_ = true;
  queued_step_ = step;
  wake_.notify_one();
}

void InlineProbe::worker_loop() {
  while (true) {
    int64_t step;
    void* marker;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || queued_step_.has_value(); });
      if (!queued_step_) return;  // stopping, nothing queued
      step = *queued_step_;
      queued_step_.reset();
      marker = stream_event_;
      stream_event_ = nullptr;
    }
    Done done;
    try {
      device_->prepare_side_thread();
      device_->wait_for_marker(marker);
      done = run_probes(step, /*log_events=*/true);
    } catch (const std::exception& e) {
      // Nothing may escape the worker thread; the verdict says what went wrong.
      done = Done{step, false, true, 0, nlohmann::json::array({{{"outcome", "skipped"}, {"reason", e.what()}}})};
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = std::move(done);
      busy_ = false;
      done_ready_.store(true, std::memory_order_release);
    }
    idle_.notify_all();
  }
}

void InlineProbe::finish() {
  std::lock_guard<std::mutex> calls(calls_mutex_);
  std::optional<Done> done;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return !busy_; });
    done.swap(done_);
    done_ready_.store(false, std::memory_order_relaxed);
  }
  if (done) collect(std::move(*done));
}

InlineProbe::Done InlineProbe::run_probes(int64_t step, bool log_events) {
  Done done;
  done.step = step;
  const auto start = std::chrono::steady_clock::now();
  for (const Probe* p : probes_) {
    // On the worker thread: the loop does not wait for these.
    if (log_events) log_.append({{"event", "probe_begin"}, {"probe", p->id()}, {"step", step}, {"blocking", false}});
    const ProbeResult r = run_probe(*p, *device_, inline_options(*p, options_));
    if (log_events) {
      log_.append({{"event", "probe_end"},
                   {"probe", p->id()},
                   {"verdict", outcome_name(r.outcome)},
                   {"step", step},
                   {"blocking", false}});
    }
    done.fault = done.fault || r.outcome == Outcome::kFail || r.outcome == Outcome::kDeviceError;
    done.skipped = done.skipped || r.outcome == Outcome::kSkipped;
    if (r.params.contains("rotation")) done.slice_checked = r.params["rotation"]["checked"].get<uint64_t>() > 0;
    done.results.push_back(to_json(r));
  }
  done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return done;
}

void InlineProbe::collect(Done done) {
  ++probes_run_;
  if (done.slice_checked) ++slices_checked_;
  probe_costs_.push_back(done.seconds);
  last_results_ = std::move(done.results);
  if (done.fault) {
    // One detection: the first failing probe starts the incident (the ledger reads sdc_detected so);
    // later ones show in their probe_end and in the verdict's failures.
    if (++failures_ == 1) {
      nlohmann::json event = {{"event", "sdc_detected"}, {"device", device_->identity().uuid}, {"step", done.step}};
      if (last_good_step_ >= 0) event["last_good_step"] = last_good_step_;
      log_.append(event, /*durable=*/true);
    }
    verdict_ = "fail";
  } else if (done.skipped) {
    if (verdict_ != "fail") verdict_ = "error";
  } else {
    last_good_step_ = std::max(last_good_step_, done.step);
    if (verdict_ != "fail") verdict_ = "pass";
  }
  if (auto_every_ && every_ > 0) choose_cadence();  // again, with the latest step and probe times
}

nlohmann::json InlineProbe::verdict() const {
  std::lock_guard<std::mutex> calls(calls_mutex_);
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json j = {{"abi_version", 1},
                      {"backend", device_->identity().backend},
                      {"device", device_->identity().uuid},
                      {"verdict", verdict_},
                      {"probes_run", probes_run_},
                      {"probes_skipped_busy", probes_skipped_busy_},
                      {"probes_skipped_capturing", probes_skipped_capturing_},
                      {"failures", failures_},
                      {"last_step", last_step_},
                      {"last_good_step", last_good_step_},
                      {"in_flight", busy_},
                      {"every", every_},
                      {"auto", auto_every_},
                      {"step_seconds", step_s_},
                      {"cadence", cadence_note_},
                      {"memory_rotation", rotation_json()},
                      {"results", last_results_}};
  return j;
}

void InlineProbe::log_event(std::string_view json_text) {
  const nlohmann::json event = parse_event_json(json_text);
  if (!event.is_object() || !event.contains("event") || !event["event"].is_string()) {
    throw InputError("event must be a JSON object with a string field \"event\"");
  }
  if (event.contains("t")) throw InputError("event must not carry \"t\": the log stamps it");
  // Checked as the goodput reader will read the line, so that one bad call cannot make the whole
  // log unreadable later.
  nlohmann::json line = {
      {"t", std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count()}};
  line.update(event);
  const std::string text = line.dump();
  if (text.size() >= kMaxEventBytes) throw InputError("event is longer than the log's 1 MiB line limit");
  try {
    goodput::parse_event(text);
  } catch (const InputError& e) {
    throw InputError(std::string("event does not fit the goodput schema (docs/goodput.md): ") + e.what());
  }
  log_.append(event);
}

}  // namespace sdc
