#include "host/cuda/cuda_streams.hpp"

#include "host/cuda/cuda_error.hpp"

namespace sdc {

cudaEvent_t detail::BlockingEventTraits::create() {
  cudaEvent_t event = nullptr;
  SDC_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventBlockingSync | cudaEventDisableTiming));
  return event;
}

void detail::BlockingEventTraits::release(cudaEvent_t event) noexcept { SDC_CUDA_LOG(cudaEventDestroy(event)); }

void wait_blocking(cudaStream_t stream, cudaEvent_t event) {
  SDC_CUDA_TRY(cudaEventRecord(event, stream));
  SDC_CUDA_TRY(cudaEventSynchronize(event));
}

bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &status);
  if (e == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();  // not sticky: cleared so that it does not surface in a later call
    return true;
  }
  SDC_CUDA_TRY(e);
  return status != cudaStreamCaptureStatusNone;
}

void relax_thread_capture_mode() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  SDC_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
}

cudaEvent_t record_blocking_event(int ordinal, cudaStream_t stream) {
  DeviceGuard guard(ordinal);
  const cudaEvent_t event = detail::BlockingEventTraits::create();
  const cudaError_t recorded = cudaEventRecord(event, stream);
  if (recorded != cudaSuccess) {
    detail::BlockingEventTraits::release(event);
    SDC_CUDA_TRY(recorded);
  }
  return event;
}

}  // namespace sdc
