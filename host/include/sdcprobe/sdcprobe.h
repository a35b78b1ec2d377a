/* sdcprobe inline probe: a stable, versioned C ABI for running SDC probes inside a training job,
 * every N steps, on the device the job already holds.
 *
 * Every function returns an sdc_status; on failure sdc_last_error() describes it (per thread).
 * No C++ exception ever crosses this interface.
 *
 * Threading: sdc_inline_step, sdc_inline_finish, sdc_inline_poll and sdc_inline_log_event may be
 * called on one handle from several threads at once; the library serialises them (a call waits for
 * another in progress). sdc_inline_destroy must not overlap any other call on the same handle, and
 * the handle must not be used after it: a caller that shares a handle between threads must make
 * every other call finish first (the Python package holds a lock for this). */
#ifndef SDCPROBE_SDCPROBE_H_
#define SDCPROBE_SDCPROBE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SDC_API __attribute__((visibility("default")))
#else
#define SDC_API
#endif

/* Raised when a field is added to sdc_inline_config (fields are only ever appended). The library
 * accepts every version from 1 up to its own; version 2 added `stream`. */
#define SDC_INLINE_ABI_VERSION 2

typedef enum sdc_status {
  SDC_OK = 0,
  SDC_ERR_INVALID_ARGUMENT = 1, /* a bad config field or argument: sdc_last_error() names it */
  SDC_ERR_NO_DEVICE = 2,        /* the requested backend or device is not available */
  SDC_ERR_BUFFER_TOO_SMALL = 3, /* sdc_inline_poll: *needed holds the size required */
  SDC_ERR_INTERNAL = 4          /* an unexpected failure: sdc_last_error() says what */
} sdc_status;

typedef struct sdc_inline_config {
  uint32_t abi_version;           /* SDC_INLINE_ABI_VERSION: set by sdc_inline_config_init */
  const char* backend;            /* "auto" (CUDA when present, else CPU), "cpu" or "cuda"; NULL = "auto" */
  int32_t device;                 /* device index within the backend (CUDA: the ordinal) */
  const char* probes;             /* comma-separated probe ids or globs; NULL = the default inline set */
  double budget_fraction;         /* probe time never exceeds this fraction of step time (default 0.01) */
  int64_t every;                  /* probe every N steps; 0 = "auto" (chosen by the planner) */
  const char* event_log;          /* goodput event log (JSON Lines) to append to; NULL = none */
  uint64_t seed;                  /* probe seed; 0 = derived from the time */
  double sdc_rate_per_device_day; /* for "auto"; 0 = the documented default (docs/inline.md) */
  const char* inject;             /* fault injection spec (docs/injection.md), for tests; NULL = none;
                                     models hang and crash are refused */
  void* stream;                   /* the job's stream (cudaStream_t): create fails unless it belongs to
                                     `device`; NULL = not checked (version 2) */
} sdc_inline_config;

/* The CPU backend has no streams: there a stream is an opaque id naming a CPU device, its index + 1
 * (NULL names none), and is checked like a CUDA stream. */

typedef struct sdc_inline sdc_inline;

/* Fills `config` with defaults. */
SDC_API void sdc_inline_config_init(sdc_inline_config* config);

/* Opens the device (that one alone) and allocates every probe buffer once. */
SDC_API sdc_status sdc_inline_create(const sdc_inline_config* config, sdc_inline** out);

/* Call once per training step (step >= 0), after the step's work is enqueued. Never blocks: on a
 * due step it queues a probe that starts once `stream`'s work so far has completed (a cudaStream_t
 * on CUDA; NULL is the device's legacy default stream), and it collects the previous probe's
 * verdict if that probe has finished. A due step whose stream belongs to another device is
 * SDC_ERR_INVALID_ARGUMENT; one whose stream is capturing a CUDA graph queues nothing and is
 * counted in the verdict's probes_skipped_capturing. */
SDC_API sdc_status sdc_inline_step(sdc_inline* probe, int64_t step, void* stream);

/* Waits for a probe in flight and records its verdict: poll then reports the final verdict. */
SDC_API sdc_status sdc_inline_finish(sdc_inline* probe);

/* Writes the latest verdict as a NUL-terminated JSON object into buf (capacity len). *needed,
 * when not NULL, receives the size required including the NUL. */
SDC_API sdc_status sdc_inline_poll(sdc_inline* probe, char* buf, size_t len, size_t* needed);

/* Appends the caller's own event to the same event log, e.g. {"event":"step_end","step":7}; the
 * library stamps "t", so the log's timestamps never go backwards between the caller's events and
 * the probe's. An event the goodput schema (docs/goodput.md) would reject, such as an unknown
 * event or a step_end without "step", or one nested deeper than 32 levels, is refused with
 * SDC_ERR_INVALID_ARGUMENT and nothing is written. */
SDC_API sdc_status sdc_inline_log_event(sdc_inline* probe, const char* event_json);

/* sdc_inline_finish, then frees everything. NULL is a no-op. */
SDC_API void sdc_inline_destroy(sdc_inline* probe);

/* The calling thread's last error message ("" when none). Valid until the thread's next call. */
SDC_API const char* sdc_last_error(void);

/* The library version, e.g. "0.1.0". */
SDC_API const char* sdc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* SDCPROBE_SDCPROBE_H_ */
