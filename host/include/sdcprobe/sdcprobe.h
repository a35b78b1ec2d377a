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
 * accepts every version from 1 up to its own; version 2 added `stream`, version 3 `ranks`. New
 * functions leave it alone: a caller checks for them by symbol. Added without a version change
 * (library 0.1.0): sdc_digest_host, sdc_digest_cuda, sdc_device_identity, sdc_choose_every; later:
 * sdc_choose_job_every. */
#define SDC_INLINE_ABI_VERSION 3

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
  int64_t ranks;                  /* devices in the job, all probed at the same step, for "auto": the
                                     job's SDC rate is ranks times one device's; 0 = 1 (version 3) */
} sdc_inline_config;

/* The CPU backend has no streams: there a stream is an opaque id naming a CPU device, its index + 1
 * (NULL names none), and is checked like a CUDA stream. */

typedef struct sdc_inline sdc_inline;

/* Fills `config` with defaults. */
SDC_API void sdc_inline_config_init(sdc_inline_config* config);

/* Opens the device (that one alone) and allocates every probe buffer once; with a mem.* probe in the
 * set, also the region the inline memory rotation checks (more than twice the device's last-level
 * cache, docs/inline.md): SDC_ERR_INTERNAL, saying how much it needs, when the device cannot spare it. */
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

/* ---- Digests of the caller's memory (the replica check, docs/replica.md) ----------------------
 *
 * The order-independent 128-bit digest the probes use (kernels/common/digest.hpp): bytes are read as
 * 64-bit little-endian words, word i being bytes [8i, 8i + 8), and the digest is the sum modulo 2^64
 * of two independent bijective mixes of each word with its index. When `bytes` is not a multiple of
 * 8, the last word holds the remaining 1 to 7 bytes in its low bytes and zeros above (the range is
 * zero-padded to a whole word), identically on the host and on a GPU. The length itself is not part
 * of the digest: a caller comparing ranges of different lengths combines it in. A NULL pointer or
 * `bytes` == 0 is SDC_ERR_INVALID_ARGUMENT (the digest of nothing is {0, 0}; there is nothing to
 * compute). */
typedef struct sdc_digest {
  uint64_t lo;
  uint64_t hi;
} sdc_digest;

/* The digest of host memory, on the calling thread; `data` needs no alignment. */
SDC_API sdc_status sdc_digest_host(const void* data, size_t bytes, sdc_digest* out);

/* Enqueues the digest of device memory on `stream` (a cudaStream_t of the device that holds `data`;
 * NULL is that device's legacy default stream): a kernel of this library writes the sdc_digest to
 * `device_out`, 16 bytes of device memory on the same device, in stream order. It never waits: the
 * result is there once the stream's work so far has completed. `data` and `device_out` must be
 * 8-byte aligned (a misaligned view must be copied first). SDC_ERR_INVALID_ARGUMENT names a NULL,
 * host, misaligned or other-device pointer, a stream of another device, or bytes == 0;
 * SDC_ERR_NO_DEVICE when the library was built without CUDA. */
SDC_API sdc_status sdc_digest_cuda(const void* data, size_t bytes, sdc_digest* device_out, void* stream);

/* The identity of `device` of `backend` ("cpu" or "cuda"; NULL or "auto": CUDA when present) as a
 * NUL-terminated JSON object {"backend", "index", "name", "uuid", "pci_bus_id", "cache_bytes"} into
 * buf (capacity len): a GPU's UUID and PCI bus id in nvidia-smi's forms; a CPU's "CPU-..." id and
 * "cpu:<cores>"; the last-level cache (a GPU's L2), 0 when unknown.
 * *needed, when not NULL, receives the size required including the NUL; SDC_ERR_BUFFER_TOO_SMALL
 * when it does not fit. */
SDC_API sdc_status sdc_device_identity(const char* backend, int32_t device, char* buf, size_t len, size_t* needed);

/* The inline probe's "auto" cadence for any periodic check: the number of steps between checks
 * that minimises check overhead plus expected SDC rework (the planner's optimal interval), never
 * spending more than budget_fraction of step time on checks. step_s and check_s must be positive,
 * budget_fraction in (0, 1]; sdc_rate_per_device_day 0 is the documented default. */
SDC_API sdc_status sdc_choose_every(double step_s, double check_s, double sdc_rate_per_device_day,
                                    double budget_fraction, int64_t* every);

/* sdc_choose_every for a check made on all `ranks` (>= 1) devices of a job at the same step: a fault
 * on any of them corrupts the model, so the job's SDC rate is ranks times one device's and the
 * planner's optimum sqrt(ranks) times shorter; the check still costs check_s. ranks 1 is
 * sdc_choose_every. */
SDC_API sdc_status sdc_choose_job_every(double step_s, double check_s, double sdc_rate_per_device_day,
                                        double budget_fraction, int64_t ranks, int64_t* every);

/* The calling thread's last error message ("" when none). Valid until the thread's next call. */
SDC_API const char* sdc_last_error(void);

/* The library version, e.g. "0.1.0". */
SDC_API const char* sdc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* SDCPROBE_SDCPROBE_H_ */
