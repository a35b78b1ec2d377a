// The C ABI over InlineProbe. Every entry point catches everything: no C++ exception crosses it.
#include <cstring>
#include <new>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "host/backend.hpp"
#include "host/byte_digest.hpp"
#include "host/error.hpp"
#include "scheduler/inline/inline_probe.hpp"
#include "scheduler/version.hpp"
#include "sdcprobe/sdcprobe.h"

struct sdc_inline {
  explicit sdc_inline(sdc::InlineConfig config) : probe(std::move(config)) {}
  sdc::InlineProbe probe;
};

namespace {

thread_local std::string last_error;

sdc_status fail(sdc_status status, const std::string& message) {
  last_error = message;
  return status;
}

// Runs f, turning every exception into a status and a message.
template <typename F>
sdc_status guarded(F&& f) {
  try {
    last_error.clear();
    return f();
  } catch (const sdc::NoDeviceError& e) {
    return fail(SDC_ERR_NO_DEVICE, e.what());
  } catch (const sdc::InputError& e) {
    return fail(SDC_ERR_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(SDC_ERR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(SDC_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(SDC_ERR_INTERNAL, "unknown exception");
  }
}

std::vector<std::string> split_globs(const char* text) {
  std::vector<std::string> globs;
  std::string item;
  for (const char* c = text;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!item.empty()) globs.push_back(item);
      item.clear();
      if (*c == '\0') return globs;
    } else if (*c != ' ') {
      item += *c;
    }
  }
}

// Copies `text` and its NUL into buf, or says how much room it needs.
sdc_status copy_out(const std::string& text, char* buf, size_t len, size_t* needed) {
  if (needed != nullptr) *needed = text.size() + 1;
  if (buf == nullptr || len < text.size() + 1) {
    return fail(SDC_ERR_BUFFER_TOO_SMALL,
                "buffer of " + std::to_string(len) + " bytes; " + std::to_string(text.size() + 1) + " needed");
  }
  std::memcpy(buf, text.c_str(), text.size() + 1);
  return SDC_OK;
}

}  // namespace

extern "C" {

void sdc_inline_config_init(sdc_inline_config* config) {
  if (config == nullptr) return;
  std::memset(config, 0, sizeof(*config));
  config->abi_version = SDC_INLINE_ABI_VERSION;
  config->budget_fraction = 0.01;
}

sdc_status sdc_inline_create(const sdc_inline_config* config, sdc_inline** out) {
  return guarded([&] {
    if (config == nullptr || out == nullptr) return fail(SDC_ERR_INVALID_ARGUMENT, "config and out must not be NULL");
    *out = nullptr;
    // Version 1 callers pass a shorter struct, without `stream`.
    if (config->abi_version < 1 || config->abi_version > SDC_INLINE_ABI_VERSION) {
      return fail(SDC_ERR_INVALID_ARGUMENT, "abi_version " + std::to_string(config->abi_version) +
                                                " is not supported (this library: 1 to " +
                                                std::to_string(SDC_INLINE_ABI_VERSION) + ")");
    }
    sdc::InlineConfig c;
    if (config->backend != nullptr) c.backend = config->backend;
    if (c.backend != "auto" && c.backend != "cpu" && c.backend != "cuda") {
      return fail(SDC_ERR_INVALID_ARGUMENT, "backend '" + c.backend + "': expected auto, cpu or cuda");
    }
    c.device = config->device;
    if (config->probes != nullptr) c.probes = split_globs(config->probes);
    c.budget_fraction = config->budget_fraction;
    if (config->every < 0) return fail(SDC_ERR_INVALID_ARGUMENT, "every must be >= 0 (0: auto)");
    c.every = config->every;
    if (config->event_log != nullptr) c.event_log = config->event_log;
    c.seed = config->seed;
    if (config->sdc_rate_per_device_day != 0) c.sdc_rate_per_device_day = config->sdc_rate_per_device_day;
    if (config->inject != nullptr) c.inject = config->inject;
    if (config->abi_version >= 2) c.stream = config->stream;
    if (config->abi_version >= 3 && config->ranks != 0) {
      if (config->ranks < 0) return fail(SDC_ERR_INVALID_ARGUMENT, "ranks must be >= 0 (0: one)");
      c.ranks = config->ranks;
    }
    *out = new sdc_inline{std::move(c)};
    return SDC_OK;
  });
}

sdc_status sdc_inline_step(sdc_inline* probe, int64_t step, void* stream) {
  if (probe == nullptr) return fail(SDC_ERR_INVALID_ARGUMENT, "probe must not be NULL");
  return guarded([&] {
    probe->probe.step(step, stream);
    return SDC_OK;
  });
}

sdc_status sdc_inline_finish(sdc_inline* probe) {
  if (probe == nullptr) return fail(SDC_ERR_INVALID_ARGUMENT, "probe must not be NULL");
  return guarded([&] {
    probe->probe.finish();
    return SDC_OK;
  });
}

sdc_status sdc_inline_poll(sdc_inline* probe, char* buf, size_t len, size_t* needed) {
  if (probe == nullptr) return fail(SDC_ERR_INVALID_ARGUMENT, "probe must not be NULL");
  return guarded([&] { return copy_out(probe->probe.verdict().dump(), buf, len, needed); });
}

sdc_status sdc_inline_log_event(sdc_inline* probe, const char* event_json) {
  if (probe == nullptr || event_json == nullptr) return fail(SDC_ERR_INVALID_ARGUMENT, "arguments must not be NULL");
  return guarded([&] {
    probe->probe.log_event(event_json);
    return SDC_OK;
  });
}

void sdc_inline_destroy(sdc_inline* probe) {
  guarded([&] {
    delete probe;
    return SDC_OK;
  });
}

sdc_status sdc_digest_host(const void* data, size_t bytes, sdc_digest* out) {
  if (out == nullptr) return fail(SDC_ERR_INVALID_ARGUMENT, "out must not be NULL");
  return guarded([&] {
    const sdc::Digest128 d = sdc::digest_host_bytes(data, bytes);
    out->lo = d.lo;
    out->hi = d.hi;
    return SDC_OK;
  });
}

sdc_status sdc_digest_cuda(const void* data, size_t bytes, sdc_digest* device_out, void* stream) {
  static_assert(sizeof(sdc_digest) == sizeof(sdc::Digest128), "sdc_digest mirrors Digest128");
  return guarded([&] {
    // Checked here, before any device is looked for: the same answer with and without CUDA.
    if (data == nullptr || device_out == nullptr) throw sdc::InputError("data and out must not be NULL");
    if (bytes == 0) throw sdc::InputError("bytes must be positive");
    sdc::digest_cuda_bytes(data, bytes, reinterpret_cast<sdc::Digest128*>(device_out), stream);
    return SDC_OK;
  });
}

sdc_status sdc_device_identity(const char* backend, int32_t device, char* buf, size_t len, size_t* needed) {
  return guarded([&] {
    const std::string name = backend != nullptr ? backend : "auto";
    if (name != "auto" && name != "cpu" && name != "cuda") {
      return fail(SDC_ERR_INVALID_ARGUMENT, "backend '" + name + "': expected auto, cpu or cuda");
    }
    if (device < 0) return fail(SDC_ERR_INVALID_ARGUMENT, "device must be >= 0");
    const sdc::DeviceIdentity id = sdc::open_device({name, 1}, device)->identity();
    const nlohmann::json j = {{"backend", id.backend},
                              {"index", device},
                              {"name", id.name},
                              {"uuid", id.uuid},
                              {"pci_bus_id", id.pci_bus_id},
                              {"cache_bytes", id.cache_bytes}};
    return copy_out(j.dump(), buf, len, needed);
  });
}

sdc_status sdc_choose_every(double step_s, double check_s, double sdc_rate_per_device_day, double budget_fraction,
                            int64_t* every) {
  return sdc_choose_job_every(step_s, check_s, sdc_rate_per_device_day, budget_fraction, 1, every);
}

sdc_status sdc_choose_job_every(double step_s, double check_s, double sdc_rate_per_device_day, double budget_fraction,
                                int64_t ranks, int64_t* every) {
  if (every == nullptr) return fail(SDC_ERR_INVALID_ARGUMENT, "every must not be NULL");
  return guarded([&] {
    if (sdc_rate_per_device_day == 0) sdc_rate_per_device_day = sdc::kDefaultSdcRatePerDeviceDay;
    try {
      *every = sdc::choose_probe_every(step_s, check_s, sdc_rate_per_device_day, budget_fraction, ranks);
    } catch (const std::invalid_argument& e) {  // the planner's own bounds, one place
      return fail(SDC_ERR_INVALID_ARGUMENT, e.what());
    }
    return SDC_OK;
  });
}

const char* sdc_last_error(void) { return last_error.c_str(); }

const char* sdc_version(void) { return sdc::kVersion; }

}  // extern "C"
