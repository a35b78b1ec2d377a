// What the inline probe needs from CUDA streams: the caller's stream may belong to another GPU or
// be capturing a CUDA graph, and the probe's worker must wait without spinning a host core.
#pragma once

#include <cuda_runtime_api.h>

#include "host/cuda/cuda_raii.hpp"

namespace sdc {

namespace detail {
struct BlockingEventTraits {
  using Handle = cudaEvent_t;
  static Handle create();
  static void release(Handle h) noexcept;
};
}  // namespace detail

// An event whose cudaEventSynchronize sleeps (cudaEventBlockingSync) and that records no time.
using BlockingEvent = detail::DeviceOwner<detail::BlockingEventTraits>;

// Records `event` (a BlockingEvent's) on `stream` and sleeps until the stream's work so far is done.
void wait_blocking(cudaStream_t stream, cudaEvent_t event);

// Whether `stream` is capturing a graph. The legacy default stream reports an implicit capture
// error while another stream captures in global mode: that counts as capturing too.
bool stream_is_capturing(cudaStream_t stream);

// Sets the calling thread's capture mode to relaxed (cudaThreadExchangeStreamCaptureMode).
void relax_thread_capture_mode();

// An event on `stream` that a worker can wait on without spinning; the caller destroys it.
cudaEvent_t record_blocking_event(int ordinal, cudaStream_t stream);

}  // namespace sdc
