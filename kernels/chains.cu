// ALU chain kernels: every thread runs chain copies (copy c from seed index c % seeds) with the
// SDC_HD chain code, and a second kernel checks each output against the host's golden. The split
// lets the injector corrupt the outputs in between. Built with --fmad=false and precise div/sqrt,
// so fmaf/fma/'/'/sqrt are the correctly rounded IEEE operations the host goldens use.
#include "kernels/common/chains.hpp"
#include "kernels/common/corruption.hpp"
#include "kernels/device_util.cuh"
#include "kernels/launch.hpp"

namespace sdc {
namespace {

// Rotation chain copies a thread runs interleaved (rotation_chains_run): enough independent FMAs
// to issue one every cycle, few enough that the 4,096 copies per SM of alu.fma32 still fill an
// SM with 1,024 threads.
inline constexpr unsigned kRotationInterleave = 4;

// Thread t runs copies t, t + stride, t + 2 stride, ... together (kRotationInterleave at a
// time), so copy c still runs on lane c % 32.
template <typename T>
__global__ void rotation_chain_kernel(uint64_t seed, uint32_t seeds, uint64_t copies, uint32_t iterations, T* out,
                                      uint32_t* producers) {
  const uint64_t stride = grid_stride();
  for (uint64_t c0 = grid_thread(); c0 < copies; c0 += kRotationInterleave * stride) {
    const unsigned start_sm = sm_id();
    RotationChain<T> chain[kRotationInterleave];
#pragma unroll
    for (unsigned k = 0; k < kRotationInterleave; ++k) {
      const uint64_t c = c0 + k * stride;
      chain[k] = rotation_chain_seed<T>(seed, (c < copies ? c : c0) % seeds);  // past the end: run, not written
    }
    rotation_chains_run(chain, iterations);
    const uint32_t tag = producer_tag_of(start_sm, sm_id(), lane_id());
#pragma unroll
    for (unsigned k = 0; k < kRotationInterleave; ++k) {
      const uint64_t c = c0 + k * stride;
      if (c >= copies) continue;
      out[c * kChainOutputsPerCopy] = chain[k].x;
      out[c * kChainOutputsPerCopy + 1] = chain[k].y;
      producers[c] = tag;
    }
  }
}

__global__ void int64_chain_kernel(uint64_t seed, uint32_t seeds, uint64_t copies, uint32_t iterations, uint64_t* out,
                                   uint32_t* producers) {
  const uint64_t stride = grid_stride();
  for (uint64_t c = grid_thread(); c < copies; c += stride) {
    const unsigned start_sm = sm_id();
    int64_chain_run(int64_chain_seed(seed, c % seeds), iterations, out + c * kChainOutputsPerCopy);
    producers[c] = producer_tag_of(start_sm, sm_id(), lane_id());
  }
}

template <typename T>
__global__ void divsqrt_chain_kernel(uint64_t seed, uint32_t seeds, uint64_t copies, uint32_t iterations, uint64_t* out,
                                     uint32_t* producers) {
  const uint64_t stride = grid_stride();
  for (uint64_t c = grid_thread(); c < copies; c += stride) {
    const unsigned start_sm = sm_id();
    divsqrt_chain_run<T>(divsqrt_chain_seed<T>(seed, c % seeds), iterations, out + c * kChainOutputsPerCopy);
    producers[c] = producer_tag_of(start_sm, sm_id(), lane_id());
  }
}

__global__ void check_chains_kernel(const void* out, unsigned width_bits, uint64_t elements, const uint64_t* goldens,
                                    uint32_t seeds, const uint32_t* producers, DeviceMismatchLog* log) {
  const uint64_t stride = grid_stride();
  for (uint64_t i = grid_thread(); i < elements; i += stride) {
    const uint64_t copy = i / kChainOutputsPerCopy;
    const uint64_t expected = goldens[(copy % seeds) * kChainOutputsPerCopy + i % kChainOutputsPerCopy];
    const uint64_t observed = load_element(out, i, width_bits);
    // Name the SM and lane that computed the copy, not the ones that checked it.
    const uint32_t tag = observed != expected ? producers[copy] : 0;
    record_mismatch_if(observed != expected, log, i, expected, observed, producer_unit(tag), producer_lane(tag));
  }
}

}  // namespace

cudaError_t launch_chains(ChainKernel kind, uint64_t seed, uint32_t seeds, uint64_t copies, uint32_t iterations,
                          void* out, uint32_t* producers, LaunchShape shape, cudaStream_t stream) {
  if (copies == 0) return cudaSuccess;
  const unsigned blocks = blocks_for(copies, shape);
  // A thread per kRotationInterleave copies, in one wave.
  const uint64_t rotation_threads = (copies + kRotationInterleave - 1) / kRotationInterleave;
  switch (kind) {
    case ChainKernel::kFma32: {
      const auto kernel = rotation_chain_kernel<float>;
      kernel<<<one_wave_blocks(kernel, rotation_threads, shape), shape.threads, 0, stream>>>(
          seed, seeds, copies, iterations, static_cast<float*>(out), producers);
      break;
    }
    case ChainKernel::kFma64: {
      const auto kernel = rotation_chain_kernel<double>;
      kernel<<<one_wave_blocks(kernel, rotation_threads, shape), shape.threads, 0, stream>>>(
          seed, seeds, copies, iterations, static_cast<double*>(out), producers);
      break;
    }
    case ChainKernel::kInt64:
      int64_chain_kernel<<<blocks, shape.threads, 0, stream>>>(seed, seeds, copies, iterations,
                                                               static_cast<uint64_t*>(out), producers);
      break;
    case ChainKernel::kDivSqrt32:
      divsqrt_chain_kernel<float><<<blocks, shape.threads, 0, stream>>>(seed, seeds, copies, iterations,
                                                                        static_cast<uint64_t*>(out), producers);
      break;
    case ChainKernel::kDivSqrt64:
      divsqrt_chain_kernel<double><<<blocks, shape.threads, 0, stream>>>(seed, seeds, copies, iterations,
                                                                         static_cast<uint64_t*>(out), producers);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_check_chains(const void* out, unsigned width_bits, uint64_t copies, const uint64_t* device_goldens,
                                uint32_t seeds, const uint32_t* producers, DeviceMismatchLog* log, LaunchShape shape,
                                cudaStream_t stream) {
  const cudaError_t reset = cudaMemsetAsync(log, 0, sizeof(DeviceMismatchLog), stream);
  if (reset != cudaSuccess || copies == 0) return reset;
  const uint64_t elements = copies * kChainOutputsPerCopy;
  check_chains_kernel<<<blocks_for(elements, shape), shape.threads, 0, stream>>>(out, width_bits, elements,
                                                                                 device_goldens, seeds, producers, log);
  return cudaGetLastError();
}

}  // namespace sdc
